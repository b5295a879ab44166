#include "serve/video_input.hpp"

#include "video_file.hpp"
#include "video_sampling.hpp"

#include <encgraph/error.hpp>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace encgraph::host::serve {
namespace {

// A file of the request's bytes under the temporary folder, removed when done.
class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    std::string name =
        (std::filesystem::temp_directory_path() / "encgraph-serve-video-XXXXXX").string();
    const int fd = mkstemp(name.data());
    if (fd < 0)
      throw Error(ErrorKind::Internal, "cannot create a temporary file for a video under " +
                                           std::filesystem::temp_directory_path().string() +
                                           " (set TMPDIR to a writable folder)");
    path_ = name;
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) {
        ::close(fd);
        throw Error(ErrorKind::Internal, "cannot write a temporary video file " + path_ +
                                             " (is the temporary folder full?)");
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The error's text with the temporary file's name replaced by the input's label.
[[noreturn]] void rethrow_named(const Error& e, const std::string& path, const std::string& label) {
  std::string text = e.what();
  for (size_t at = text.find(path); at != std::string::npos; at = text.find(path, at))
    text.replace(at, path.size(), label);
  throw Error(e.kind(), text);
}

}  // namespace

DecodedImage decode_video_bytes(const std::vector<uint8_t>& bytes, const std::string& label,
                                const VideoConfig& video, int64_t max_pixels, int64_t max_frames) {
  const TempFile file(bytes);
  try {
    const VideoInfo info = probe_video(file.path(), max_pixels);
    std::vector<int64_t> indices;
    try {
      indices = sample_frame_indices(sampling_params(video), info.total_frames, info.fps);
    } catch (const Error& e) {
      throw Error(e.kind(), "video '" + label + "': " + e.what());
    }
    if (static_cast<int64_t>(indices.size()) > max_frames)
      throw Error(ErrorKind::Input,
                  "video '" + label + "': " + std::to_string(indices.size()) +
                      " frames sampled (of " + std::to_string(info.total_frames) +
                      "), over the limit of " + std::to_string(max_frames) +
                      " frames per video (limits.max_frames_per_video; lower video.max_frames "
                      "or video.fps, or raise the limit)");
    DecodedImage frames =
        decode_video_frames(file.path(), indices, ImageInfo{info.height, info.width, 0});
    frames.frames = static_cast<int64_t>(indices.size());
    return frames;
  } catch (const Error& e) {
    rethrow_named(e, file.path(), label);
  }
}

}  // namespace encgraph::host::serve
