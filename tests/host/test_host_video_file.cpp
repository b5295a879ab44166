// Video files (MP4, MKV, WebM) through FFmpeg: the frame sampling rules of
// each model family on several (total frames, fps) cases; the decoded frames
// of a lossless clip (FFV1, RGB, in Matroska) equal the source frames
// byte for byte and lossy clips (MPEG-4 Part 2, H.264, VP8, VP9) come within
// a tolerance; `encgraph encode` of a video file writes the same rows as the
// same frames given as frame files (toy and the small Qwen2.5-VL tower); the
// report lists the sampled indices; corrupt, truncated, audio-only, empty and
// over-the-limit files are exit code 2 naming the file. The test videos are
// made here with FFmpeg's encoders; a missing encoder skips its clip with a
// message.
#include "cli.hpp"
#include "config.hpp"
#include "host_test_support.hpp"
#include "safetensors_reader.hpp"
#include "test_video_writer.hpp"
#include "video_file.hpp"
#include "video_sampling.hpp"
#include "workload.hpp"

#include <encgraph/error.hpp>

#include <doctest/doctest.h>
#include <stb/stb_image_write.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <sys/stat.h>

using namespace encgraph::host;
using host_test::Clip;
using host_test::Frames;
using host_test::source_frames;
using host_test::write_video;
namespace fs = std::filesystem;

namespace {

// FFV1 keeps 8-bit RGB as 0RGB32 (BGR0 in memory): lossless through RGB24.
const Clip kLossless{"matroska", "ffv1", AV_PIX_FMT_0RGB32};

// The largest difference of two frames' bytes, and their mean difference.
std::pair<int, double> difference(const uint8_t* a, const uint8_t* b, size_t n) {
  int most = 0;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const int d = std::abs(int(a[i]) - int(b[i]));
    most = std::max(most, d);
    sum += d;
  }
  return {most, sum / static_cast<double>(n)};
}

std::vector<std::string> overrides(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> sets = {"runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]",
                                   "runtime.log_level=\"warn\"", "runtime.prefer_faster_path=false",
                                   "output.report=\"\""};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return sets;
}

host_test::Outcome encode(const std::string& config, const std::vector<std::string>& inputs,
                          const fs::path& out, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {
      "--config", (fs::path(EG_HOST_SOURCE_DIR) / "configs" / config).string(), "-o", out.string()};
  args.insert(args.end(), inputs.begin(), inputs.end());
  for (const auto& s : overrides(extra)) {
    args.push_back("--set");
    args.push_back(s);
  }
  return host_test::run("encode", args);
}

SamplingParams rule(SamplingRule r, double fps = 2.0, int64_t min = 4, int64_t max = 768) {
  SamplingParams p;
  p.rule = r;
  p.fps = fps;
  p.min_frames = min;
  p.max_frames = max;
  return p;
}

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Input);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("qwen2.5-vl sampling: qwen-vl-utils smart_nframes and linspace(...).round()") {
  const auto p = rule(SamplingRule::QwenVlUtils);
  // 2 s at 30 fps: 4 frames (the minimum).
  CHECK(sample_frame_indices(p, 60, 30.0) == std::vector<int64_t>{0, 20, 39, 59});
  // 10 s at 30 fps: 20 frames.
  CHECK(sample_frame_indices(p, 300, 30.0) ==
        std::vector<int64_t>{0,   16,  31,  47,  63,  79,  94,  110, 126, 142,
                             157, 173, 189, 205, 220, 236, 252, 268, 283, 299});
  // Fewer frames than the minimum: all of them, down to the factor.
  CHECK(sample_frame_indices(p, 3, 30.0) == std::vector<int64_t>{0, 2});
  CHECK(sample_frame_indices(p, 8, 4.0) == std::vector<int64_t>{0, 2, 5, 7});
  CHECK(sample_frame_indices(p, 7, 1.0) == std::vector<int64_t>{0, 1, 2, 4, 5, 6});
  // 400 s at 25 fps wants 800: capped at 768.
  const auto many = sample_frame_indices(p, 10000, 25.0);
  REQUIRE(many.size() == 768);
  CHECK(many[1] == 13);
  CHECK(many[2] == 26);
  CHECK(many[766] == 9986);
  CHECK(many.back() == 9999);
  // One frame: below the temporal patch of 2.
  CHECK(input_error([&] { sample_frame_indices(p, 1, 30.0); }).find("at least 2") !=
        std::string::npos);
  // Settings: 1 fps of 20 s at 10 fps = 20 frames; max 6.
  CHECK(sample_frame_indices(rule(SamplingRule::QwenVlUtils, 1.0), 200, 10.0).size() == 20);
  CHECK(sample_frame_indices(rule(SamplingRule::QwenVlUtils, 2.0, 4, 7), 200, 10.0).size() == 6);
}

TEST_CASE("qwen3-vl sampling: Qwen3VLVideoProcessor.sample_frames (no factor, half to even)") {
  const auto p = rule(SamplingRule::Qwen3Vl);
  CHECK(sample_frame_indices(p, 60, 30.0) == std::vector<int64_t>{0, 20, 39, 59});
  // int(6 / 2.4 * 2) = 5 frames: linspace(0, 5, 5) = 0, 1.25, 2.5, 3.75, 5 -> 2.5 rounds to 2.
  CHECK(sample_frame_indices(p, 6, 2.4) == std::vector<int64_t>{0, 1, 2, 4, 5});
  CHECK(sample_frame_indices(p, 1, 30.0) == std::vector<int64_t>{0});
  CHECK(sample_frame_indices(p, 9, 30.0) == std::vector<int64_t>{0, 3, 5, 8});
  CHECK(sample_frame_indices(p, 301, 29.97) ==
        std::vector<int64_t>{0,   16,  32,  47,  63,  79,  95,  111, 126, 142,
                             158, 174, 189, 205, 221, 237, 253, 268, 284, 300});
}

// transformers' Qwen2VLVideoProcessor.sample_frames (do_sample_frames=True):
// qwen-vl-utils' count, indices torch.arange(0, total, total / n).int().
TEST_CASE("qwen2.5-vl transformers sampling: arange indices, truncated") {
  const auto p = rule(SamplingRule::TransformersQwen2Vl);
  // The GPU comparison's clip: 16 frames at 8 fps -> 4 frames.
  CHECK(sample_frame_indices(p, 16, 8.0) == std::vector<int64_t>{0, 4, 8, 12});
  CHECK(sample_frame_indices(rule(SamplingRule::QwenVlUtils), 16, 8.0) ==
        std::vector<int64_t>{0, 5, 10, 15});
  CHECK(sample_frame_indices(p, 60, 30.0) == std::vector<int64_t>{0, 15, 30, 45});
  // 7 frames at 1 fps wants 14: max floor(7 / 2) * 2 = 6; step 7/6.
  CHECK(sample_frame_indices(p, 7, 1.0) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  const auto twenty = sample_frame_indices(p, 300, 30.0);
  REQUIRE(twenty.size() == 20);
  CHECK(twenty[1] == 15);
  CHECK(twenty.back() == 285);
  // min_frames is taken as given (qwen-vl-utils rounds it up to the factor):
  // 5 wanted 2 -> max(2, 5) = 5 -> floor to 4.
  CHECK(sample_frame_indices(rule(SamplingRule::TransformersQwen2Vl, 2.0, 5), 20, 20.0).size() ==
        4);
  CHECK(sample_frame_indices(rule(SamplingRule::QwenVlUtils, 2.0, 5), 20, 20.0).size() == 6);
  CHECK(input_error([&] { sample_frame_indices(p, 1, 30.0); }).find("at least 2") !=
        std::string::npos);
}

TEST_CASE("sampling settings: [video] keys, then the checkpoint folder, then the family") {
  VideoConfig v;
  v.plugin = "qwen2_5_vl";
  CHECK(sampling_params(v).rule == SamplingRule::QwenVlUtils);
  v.plugin = "qwen3_vl";
  CHECK(sampling_params(v).rule == SamplingRule::Qwen3Vl);
  v.sampling = "qwen2_5_vl";
  CHECK(sampling_params(v).rule == SamplingRule::QwenVlUtils);

  host_test::TempDir dir;
  fs::create_directories(dir / "model");
  std::ofstream(dir / "model" / "video_preprocessor_config.json")
      << R"({"fps": 1.5, "min_frames": 6, "max_frames": 10, "temporal_patch_size": 2})";
  v.weights = (dir / "model").string();
  auto p = sampling_params(v);
  CHECK(p.fps == 1.5);
  CHECK(p.min_frames == 6);
  CHECK(p.max_frames == 10);
  CHECK(p.origin.find("video_preprocessor_config.json") != std::string::npos);
  v.fps = 3.0;
  v.max_frames = 12;
  p = sampling_params(v);
  CHECK(p.fps == 3.0);
  CHECK(p.min_frames == 6);
  CHECK(p.max_frames == 12);
  std::ofstream(dir / "model" / "video_preprocessor_config.json") << R"({"min_frames": "six"})";
  CHECK(input_error([&] { sampling_params(v); }).find("'min_frames' must be a positive integer") !=
        std::string::npos);

  const auto c =
      load_config_text(host_test::toy_config("[video]\nfps = 1.0\nmax_frames = 8\n"), "t.toml", {});
  CHECK(c.workload.video.fps == 1.0);
  CHECK(c.workload.video.max_frames == 8);
  CHECK(c.workload.video.plugin == "toy");
  CHECK(host_test::config_error(host_test::toy_config("[video]\nfps = 0\n")).find("video.fps") !=
        std::string::npos);
  CHECK(host_test::config_error(host_test::toy_config("[video]\nsampling = \"x\"\n"))
            .find("video.sampling") != std::string::npos);
  CHECK(host_test::config_error(host_test::toy_config("[video]\nmin_frames = 9\nmax_frames = 8\n"))
            .find("video.max_frames") != std::string::npos);
}

TEST_CASE("a lossless clip (FFV1, RGB, Matroska) decodes to its source frames exactly") {
  host_test::TempDir dir;
  const Frames src = source_frames(6, 40, 30);
  const fs::path path = dir / "clip.mkv";
  REQUIRE(write_video(path, kLossless, src, 40, 30));
  CHECK(is_video_file(path));
  const VideoInfo info = probe_video(path, 1 << 20);
  CHECK(info.width == 40);
  CHECK(info.height == 30);
  CHECK(info.total_frames == 6);
  CHECK(info.fps == doctest::Approx(10.0));
  CHECK(info.codec == "ffv1");
  const DecodedImage img = decode_video_frames(path, {0, 2, 5}, ImageInfo{30, 40, 3});
  REQUIRE(img.frames == 3);
  const size_t n = 40 * 30 * 3;
  REQUIRE(img.pixels.size() == 3 * n);
  CHECK(std::equal(src[0].begin(), src[0].end(), img.pixels.begin()));
  CHECK(std::equal(src[2].begin(), src[2].end(), img.pixels.begin() + n));
  CHECK(std::equal(src[5].begin(), src[5].end(), img.pixels.begin() + 2 * n));
  // A frame past the end: the file changed since it was probed.
  CHECK(input_error([&] {
          decode_video_frames(path, {0, 6}, ImageInfo{30, 40, 3});
        }).find("ended after 6 decoded frames") != std::string::npos);
}

TEST_CASE("lossy clips (MPEG-4, H.264 in MP4; VP8, VP9 in WebM) decode within a tolerance") {
  const Clip clips[] = {{"mp4", "mpeg4", AV_PIX_FMT_YUV420P},
                        {"mp4", "libx264", AV_PIX_FMT_YUV420P},
                        {"matroska", "libx264", AV_PIX_FMT_YUV444P},
                        {"webm", "libvpx", AV_PIX_FMT_YUV420P},
                        {"webm", "libvpx-vp9", AV_PIX_FMT_YUV420P}};
  host_test::TempDir dir;
  const Frames src = source_frames(8, 64, 48);
  for (const Clip& clip : clips) {
    const std::string ext =
        std::string(clip.muxer) == "matroska" ? ".mkv" : std::string(".") + clip.muxer;
    const fs::path path = dir / (std::string(clip.encoder) + ext);
    INFO(path.string());
    if (!write_video(path, clip, src, 64, 48)) continue;
    const VideoInfo info = probe_video(path, 1 << 20);
    CHECK(info.total_frames == 8);
    CHECK(info.fps == doctest::Approx(10.0));
    const DecodedImage img = decode_video_frames(path, {1, 4, 7}, ImageInfo{48, 64, 3});
    const size_t n = 64 * 48 * 3;
    for (int k = 0; k < 3; ++k) {
      const auto [most, mean] = difference(src[static_cast<size_t>(1 + 3 * k)].data(),
                                           img.pixels.data() + static_cast<size_t>(k) * n, n);
      CHECK(mean < 6.0);
      CHECK(most < 60);
    }
  }
}

TEST_CASE("encode: a video file writes the rows of its sampled frames given as frame files") {
  host_test::TempDir dir;
  // 8 frames at 4 fps: 2 s, the Qwen2.5-VL rule samples 4 (0, 2, 5, 7).
  const Frames src = source_frames(8, 56, 28);
  Clip clip = kLossless;
  clip.fps = 4;
  REQUIRE(write_video(dir / "clip.mkv", clip, src, 56, 28));
  std::string files = "[";
  for (int i : {0, 2, 5, 7}) {
    // Appended piece by piece: GCC 12's -Wrestrict misfires on "f" + to_string(...).
    std::string name = "f";
    name.append(std::to_string(i)).append(".png");
    REQUIRE(stbi_write_png((dir / name).c_str(), 56, 28, 3, src[static_cast<size_t>(i)].data(),
                           56 * 3));
    files += std::string(files.size() > 1 ? ", " : "") + "\"" + name + "\"";
  }
  files += "]";
  const fs::path trace = dir.write("t.jsonl",
                                   "{\"video\": \"clip.mkv\", \"id\": \"v\"}\n"
                                   "{\"frames_files\": " +
                                       files + ", \"id\": \"f\"}\n");
  for (const std::string config : {"toy.toml", "qwen2_5_vl_small_cpu.toml"}) {
    INFO(config);
    const fs::path out = dir / "e.safetensors";
    const fs::path report = dir / "r.json";
    // The toy reads hidden pixel bytes in order: 600 covers every frame. One
    // item per request: each runs alone, so equal pixels give equal bits.
    std::vector<std::string> sets = {"workload.request_size=1"};
    if (config == "toy.toml") sets.push_back("plugin.config.hidden=600");
    const auto o =
        encode(config, {"--trace", trace.string(), "--report", report.string()}, out, sets);
    INFO(o.log);
    REQUIRE(o.code == 0);
    const auto st = host_test::read_safetensors(out);
    CHECK(st.header["v"]["shape"] == st.header["f"]["shape"]);
    CHECK(st.floats("v") == st.floats("f"));
    const auto r = nlohmann::json::parse(host_test::read_all(report));
    const auto& videos = r["workload"]["videos"];
    REQUIRE(videos.size() == 1);
    CHECK(videos[0]["id"] == "v");
    CHECK(videos[0]["total_frames"] == 8);
    CHECK(videos[0]["fps"] == 4.0);
    CHECK(videos[0]["frame_indices"] == nlohmann::json({0, 2, 5, 7}));
    if (config == "toy.toml") {
      // The file named on the command line: one item, named by its path.
      const auto direct =
          encode(config, {(dir / "clip.mkv").string()}, out, {"plugin.config.hidden=600"});
      REQUIRE(direct.code == 0);
      const auto again = host_test::read_safetensors(out);
      CHECK(again.floats((dir / "clip.mkv").string()) == st.floats("f"));
    }
  }
}

TEST_CASE("bad video files: exit code 2 naming the file and the fix") {
  host_test::TempDir dir;
  const Frames src = source_frames(8, 32, 32);
  REQUIRE(write_video(dir / "ok.mkv", kLossless, src, 32, 32));
  const bool mp4 = write_video(dir / "ok.mp4", {"mp4", "mpeg4", AV_PIX_FMT_YUV420P}, src, 32, 32);
  REQUIRE(write_video(dir / "audio.mkv", kLossless, src, 32, 32, false, true));
  const std::string bytes = host_test::read_all(dir / "ok.mp4");
  std::ofstream(dir / "cut.mp4", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::ofstream(dir / "garbage.mp4", std::ios::binary) << std::string(4096, 'x');
  // The index ('moov') first: a file cut in its frame data still opens, and
  // lists more frames than it holds.
  const bool fast = write_video(dir / "fast.mp4", {"mp4", "mpeg4", AV_PIX_FMT_YUV420P}, src, 32, 32,
                                true, false, "+faststart");
  const std::string fast_bytes = host_test::read_all(dir / "fast.mp4");
  std::ofstream(dir / "cutdata.mp4", std::ios::binary)
      << fast_bytes.substr(0, fast_bytes.size() * 2 / 3);
  std::ofstream(dir / "empty.webm", std::ios::binary);
  fs::create_directories(dir / "dir.mp4");
  REQUIRE(write_video(dir / "one.mkv", kLossless, source_frames(1, 32, 32), 32, 32));
  struct Bad {
    std::string file;
    std::vector<std::string> extra;
    std::string message;
  };
  std::vector<Bad> cases = {
      {"garbage.mp4", {}, "is not a video file FFmpeg can read"},
      {"empty.webm", {}, "is not a video file FFmpeg can read"},
      {"audio.mkv", {}, "has no video stream"},
      {"dir.mp4", {}, "is a directory"},
      {"missing.mkv", {}, "does not exist"},
      {"one.mkv", {}, "has 1 frame and qwen-vl-utils smart_nframes samples at least 2"},
      {"ok.mkv", {"limits.max_frames_per_video=2"}, "limits.max_frames_per_video"},
      {"ok.mkv", {"limits.max_image_pixels=100"}, "limits.max_image_pixels"},
  };
  if (mp4) cases.push_back({"cut.mp4", {}, "truncated"});
  if (fast) cases.push_back({"cutdata.mp4", {}, "truncated"});
  for (const Bad& b : cases) {
    INFO(b.file);
    const auto o = encode("toy.toml", {(dir / b.file).string()}, dir / "e.safetensors", b.extra);
    INFO(o.log);
    CHECK(o.code == 2);
    CHECK(o.log.find(b.file) != std::string::npos);
    CHECK(o.log.find(b.message) != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "e.safetensors"));
  }
  // In a trace: the line and the file are named.
  const fs::path trace = dir.write("t.jsonl", "{\"video\": \"audio.mkv\"}\n");
  const auto o = encode("toy.toml", {"--trace", trace.string()}, dir / "e.safetensors");
  CHECK(o.code == 2);
  CHECK(o.log.find("t.jsonl:1") != std::string::npos);
  CHECK(o.log.find("has no video stream") != std::string::npos);
  const fs::path both = dir.write("b.jsonl", "{\"video\": \"ok.mkv\", \"file\": \"x.png\"}\n");
  CHECK(encode("toy.toml", {"--trace", both.string()}, dir / "e.safetensors").code == 2);
}
