// The sequence lengths graphs are captured and timed with: typical, covering
// every row of the budget, bounded by a real frame, whole merge units.
#include <encoder_kit/capture_values.hpp>

#include <doctest/doctest.h>

using encoder_kit::capture_sequence_patches;
using encoder_kit::kCaptureSequencePatches;

TEST_CASE("a large budget with many sequences is captured as typical frames, not one sequence") {
  // 65536 patches, 256 sequences possible: 256 covers the rows, the typical
  // 1024 is longer, the largest frame allows 16384.
  CHECK(capture_sequence_patches(16384, 65536, 256, 4) == kCaptureSequencePatches);
}

TEST_CASE("few sequences still cover every row of the budget") {
  // 16 sequences over 65536 patches: each must hold 4096 for the rows to be
  // covered, as a batch of 16 items filling that budget does on average.
  const int64_t len = capture_sequence_patches(16384, 65536, 16, 4);
  CHECK(len == 4096);
  CHECK(len * 16 >= 65536);
  // An odd covering length is rounded up to whole merge units.
  const int64_t odd = capture_sequence_patches(100000, 65537, 16, 4);
  CHECK(odd % 4 == 0);
  CHECK(odd * 16 >= 65537);
}

TEST_CASE("a sequence is never longer than a real frame may be, and at least one merge unit") {
  CHECK(capture_sequence_patches(256, 65536, 1, 4) == 256);
  CHECK(capture_sequence_patches(0, 16, 1, 4) == 4);
  CHECK(capture_sequence_patches(1, 1, 0, 4) == 4);
}
