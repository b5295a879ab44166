// Sequence lengths for the values a graph is warmed up, captured and timed
// with. A graph replays any sequence layout its capacity allows (kernels read
// cu_seqlens from device memory), so these values only decide what the
// warm-up, GEMM tuning and the runtime's calibration pay. One sequence over a
// whole budget makes full attention quadratic in the budget: capture of a
// 64k-patch budget then costs seconds, and the calibrated replay times grow
// faster than the work a real batch of many images does, which made
// prefer_faster_path choose eager runs that were in fact slower.
#pragma once

#include <algorithm>
#include <cstdint>

namespace encoder_kit {

// Patches of a typical image frame (a 512x512 image at patch 16, 448x448 at
// patch 14): sequences this long keep the timed cost close to linear in the
// budget, as a batch of real images is.
inline constexpr int64_t kCaptureSequencePatches = 1024;

// The length of each of `sequences` captured sequences over `patches` rows:
// typical, long enough that the sequences cover every row (a batch that fills
// a budget with few items has sequences that long on average), never longer
// than a real frame may be, and whole merge units.
inline int64_t capture_sequence_patches(int64_t max_frame_patches, int64_t patches,
                                        int64_t sequences, int64_t merge_unit) {
  const int64_t covering =
      (patches + std::max<int64_t>(sequences, 1) - 1) / std::max<int64_t>(sequences, 1);
  int64_t len = std::min(max_frame_patches, std::max(kCaptureSequencePatches, covering));
  len = (len + merge_unit - 1) / merge_unit * merge_unit;
  return std::max(len, merge_unit);
}

}  // namespace encoder_kit
