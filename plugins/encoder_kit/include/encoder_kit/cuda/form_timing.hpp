// Timing several forms of one computation as the runtime runs them, to pick
// the fastest (GemmPlan::tune's candidates, a plugin's layer forms). Each form
// is a CUDA graph of `runs` calls, replayed: eager calls of a few microseconds
// would time the host's launches instead, which differ between libraries and
// which a replay does not pay. Rounds alternate between the forms, so that
// clock and power drift during the search hits them alike; each form keeps
// its best round.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace encoder_kit::cuda {

struct FormTimes {
  std::vector<float> best_ms;  // a round's milliseconds; -1: the form failed to run
  std::vector<bool> captured;  // false: timed with eager calls (it did not capture)
};

// run(i) launches form i once on `stream` (not capturing) and returns 0 or an
// error code. A form whose first, eager call fails is left out (best_ms -1);
// one that does not capture is timed with eager calls. Returns 0, or the
// first error of the timing itself (recorded as kernels.hpp's last error).
int time_forms(size_t count, const std::function<int(size_t)>& run, cudaStream_t stream, int runs,
               int rounds, FormTimes& out);

}  // namespace encoder_kit::cuda
