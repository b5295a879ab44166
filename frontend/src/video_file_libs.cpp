#include "video_file_libs.hpp"

extern "C" {
#include <libavcodec/version.h>
#include <libavformat/version.h>
#include <libavutil/version.h>
#include <libswscale/version.h>
}

#include <encgraph/error.hpp>

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace encgraph::host {
namespace {

#define EG_STR2(x) #x
#define EG_STR(x) EG_STR2(x)

struct Loaded {
  FfmpegApi api;
  std::string error;  // empty when every function was found
};

Loaded load() {
  Loaded out;
  // The sonames of the headers built against: another major version has
  // another ABI.
  const struct {
    const char* lib;
    const char* soname;
  } libs[] = {{"avutil", "libavutil.so." EG_STR(LIBAVUTIL_VERSION_MAJOR)},
              {"swscale", "libswscale.so." EG_STR(LIBSWSCALE_VERSION_MAJOR)},
              {"avcodec", "libavcodec.so." EG_STR(LIBAVCODEC_VERSION_MAJOR)},
              {"avformat", "libavformat.so." EG_STR(LIBAVFORMAT_VERSION_MAJOR)}};
  void* handles[4] = {};
  for (size_t i = 0; i < 4; ++i) {
    // Never closed: the functions are used until the process ends.
    handles[i] = ::dlopen(libs[i].soname, RTLD_NOW | RTLD_LOCAL);
    if (!handles[i]) {
      const char* why = ::dlerror();
      out.error = std::string("reading video files needs FFmpeg's ") + libs[i].soname +
                  ", which cannot be loaded (" + (why ? why : "not found") +
                  "); install FFmpeg's libraries (Debian 12: apt install libavformat59 "
                  "libavcodec59 libswscale6; or put them on LD_LIBRARY_PATH), or give the "
                  "video as frame files (\"frames_files\")";
      return out;
    }
  }
  auto handle = [&](const char* lib) {
    for (size_t i = 0; i < 4; ++i)
      if (std::string(libs[i].lib) == lib) return handles[i];
    return static_cast<void*>(nullptr);
  };
#define EG_FFMPEG_RESOLVE(lib, name)                                                \
  out.api.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle(#lib), #name)); \
  if (!out.api.name && out.error.empty())                                           \
    out.error = "FFmpeg's lib" #lib " has no function " #name                       \
                "; install the FFmpeg version encgraph was built with (" LIBAVFORMAT_IDENT ")";
  EG_FFMPEG_FUNCTIONS(EG_FFMPEG_RESOLVE)
#undef EG_FFMPEG_RESOLVE
  return out;
}

}  // namespace

const FfmpegApi& ffmpeg() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.error.empty()) throw Error(ErrorKind::Input, loaded.error);
  return loaded.api;
}

}  // namespace encgraph::host
