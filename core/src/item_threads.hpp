// Making a request's items on several threads: the plugin's preprocessing
// (resize, normalise, patchify) is host work that a single thread cannot keep
// ahead of a fast device (docs/serving.md, "Where the time goes").
#pragma once

#include <cstddef>
#include <functional>

namespace encgraph {

// The threads to make `items` items with: 1 unless the plugin allows
// concurrent item making; `configured` 0 means one per core, at most 8; never
// more threads than items.
int item_threads_for(int configured, bool concurrent, size_t items);

// Runs body(i) for every i in [0, n) on `threads` threads, the caller's among
// them; each other thread runs `enter` first (e.g. to make the device
// current). Indices are handed out in increasing order. When a body throws, no
// further index is started, every started one finishes, and the exception of
// the lowest failed index is rethrown: the same item is blamed whatever the
// timing, since every lower index had been started and succeeded. An `enter`
// that throws stops the run the same way; its exception is rethrown when no
// body failed.
void for_each_index(size_t n, int threads, const std::function<void()>& enter,
                    const std::function<void(size_t)>& body);

}  // namespace encgraph
