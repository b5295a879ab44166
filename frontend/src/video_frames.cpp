#include "video_frames.hpp"

#include "input_files.hpp"
#include "toml_util.hpp"

#include <encgraph/error.hpp>

namespace encgraph::host {
namespace {

// "frame 3 of 8": which frame a message is about.
std::string frame_number(const std::vector<std::string>& files, size_t i) {
  return "frame " + std::to_string(i + 1) + " of " + std::to_string(files.size());
}

// "frame 3 of 8 ('clip/0003.png')", for messages not already naming the file.
std::string frame_name(const std::vector<std::string>& files, size_t i) {
  return frame_number(files, i) + " ('" + printable(files[i]) + "')";
}

std::string size_of(const ImageInfo& info) {
  return std::to_string(info.width) + "x" + std::to_string(info.height);
}

}  // namespace

ImageInfo probe_frames(const std::vector<std::string>& files, int64_t max_pixels) {
  if (files.empty()) throw Error(ErrorKind::Input, "a video needs at least one frame file");
  ImageInfo first;
  for (size_t i = 0; i < files.size(); ++i) {
    ImageInfo info;
    try {
      info = probe_image(files[i], max_pixels);
    } catch (const Error& e) {
      throw Error(ErrorKind::Input, frame_number(files, i) + ": " + e.what() +
                                        "; every frame must be a PNG or JPEG file");
    }
    if (i == 0) {
      first = info;
      continue;
    }
    if (info.height != first.height || info.width != first.width)
      throw Error(ErrorKind::Input, frame_name(files, i) + " is " + size_of(info) + " but " +
                                        frame_name(files, 0) + " is " + size_of(first) +
                                        "; every frame of a video must have the same size "
                                        "(resize or crop the frames to one size)");
    if (info.channels != first.channels)
      throw Error(ErrorKind::Input, frame_name(files, i) + " has " + std::to_string(info.channels) +
                                        " channels but " + frame_name(files, 0) + " has " +
                                        std::to_string(first.channels) +
                                        "; every frame of a video must have the same channel "
                                        "count (save the frames alike, e.g. all RGB)");
  }
  return first;
}

DecodedImage decode_frames(const std::vector<std::string>& files, int64_t max_pixels,
                           const ImageInfo* expected) {
  if (files.empty()) throw Error(ErrorKind::Input, "a video needs at least one frame file");
  DecodedImage video;
  video.frames = static_cast<int64_t>(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    // decode_image names the file and stb's reason; the frame number is added.
    DecodedImage frame;
    try {
      frame = decode_image(files[i], max_pixels, expected);
    } catch (const Error& e) {
      throw Error(e.kind(), frame_number(files, i) + ": " + e.what());
    }
    if (i == 0) {
      video.height = frame.height;
      video.width = frame.width;
      video.channels = frame.channels;
      video.pixels.reserve(frame.pixels.size() * files.size());
    } else if (frame.height != video.height || frame.width != video.width) {
      // probe_frames checked this when the workload was read; the file changed since.
      throw Error(ErrorKind::Input, frame_name(files, i) + " is " +
                                        size_of({frame.height, frame.width, 0}) + " but " +
                                        frame_name(files, 0) + " is " +
                                        size_of({video.height, video.width, 0}) +
                                        "; every frame of a video must have the same size");
    }
    video.pixels.insert(video.pixels.end(), frame.pixels.begin(), frame.pixels.end());
  }
  return video;
}

}  // namespace encgraph::host
