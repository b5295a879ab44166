#include "video_path.hpp"

#include <encgraph/error.hpp>

// ENCGRAPH_PYTHON_VIDEO_FILES: python/CMakeLists.txt found the video file
// reader (frontend/src/video_file.cpp) among encgraph_frontend's sources.
#if ENCGRAPH_PYTHON_VIDEO_FILES
#include <video_file.hpp>
#include <video_sampling.hpp>
#endif

namespace encgraph::python {

bool video_files_supported() {
  return ENCGRAPH_PYTHON_VIDEO_FILES != 0;
}

host::DecodedImage decode_video_path(const std::string& file, const host::HostConfig& config,
                                     const std::string& label) {
#if ENCGRAPH_PYTHON_VIDEO_FILES
  try {
    const host::VideoInfo info = host::probe_video(file, config.limits.max_image_pixels);
    const host::SamplingParams params = host::sampling_params(config.workload.video);
    std::vector<int64_t> indices;
    try {
      indices = host::sample_frame_indices(params, info.total_frames, info.fps);
    } catch (const Error& e) {
      throw Error(e.kind(), file + ": " + e.what());
    }
    if (static_cast<int64_t>(indices.size()) > config.limits.max_frames_per_video)
      throw Error(ErrorKind::Input,
                  file + ": " + std::to_string(indices.size()) +
                      " sampled frames exceed limits.max_frames_per_video (" +
                      std::to_string(config.limits.max_frames_per_video) +
                      "); lower video.max_frames or raise limits.max_frames_per_video");
    const host::ImageInfo expected{info.height, info.width, 3};
    return host::decode_video_frames(file, indices, expected);
  } catch (const Error& e) {
    throw Error(e.kind(), label + ": " + e.what());
  }
#else
  (void)config;
  throw Error(ErrorKind::Input, label + " ('" + file +
                                    "'): this build reads no video files; pass the video as a "
                                    "list of frames or a TxHxWx3 uint8 array");
#endif
}

}  // namespace encgraph::python
