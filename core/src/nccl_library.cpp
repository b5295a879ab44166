#include "nccl_library.hpp"

#include <dlfcn.h>

namespace encgraph {

const NcclLibrary& nccl() {
  static const NcclLibrary loaded = [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      throw Error(ErrorKind::Device, std::string("data parallel over CUDA needs NCCL: ") +
                                         dlerror() + " (add its folder to LD_LIBRARY_PATH)");
    NcclLibrary n;
    bool complete = true;
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      complete = complete && fn != nullptr;
    };
    load(n.comm_init_all, "ncclCommInitAll");
    load(n.comm_init_rank_config, "ncclCommInitRankConfig");
    load(n.get_unique_id, "ncclGetUniqueId");
    load(n.comm_get_async_error, "ncclCommGetAsyncError");
    load(n.comm_abort, "ncclCommAbort");
    load(n.comm_destroy, "ncclCommDestroy");
    load(n.send, "ncclSend");
    load(n.recv, "ncclRecv");
    load(n.all_gather, "ncclAllGather");
    load(n.group_start, "ncclGroupStart");
    load(n.group_end, "ncclGroupEnd");
    load(n.error_string, "ncclGetErrorString");
    if (!complete)
      throw Error(ErrorKind::Device,
                  "libnccl lacks one of the functions encgraph calls (ncclCommInitRankConfig, "
                  "ncclSend, ncclRecv, ncclAllGather, ncclCommAbort, ...): NCCL 2.14 or later is "
                  "needed; point LD_LIBRARY_PATH at a newer NCCL");
    return n;
  }();
  return loaded;
}

}  // namespace encgraph
