// NCCL, opened on first use rather than linked: a process that never runs data
// parallel starts on machines whose NCCL is elsewhere or missing. Only built
// with NCCL's header (ENCGRAPH_HAVE_NCCL).
#pragma once

#include <encgraph/error.hpp>

#include <nccl.h>

#include <string>

namespace encgraph {

struct NcclLibrary {
  decltype(&::ncclCommInitAll) comm_init_all = nullptr;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};

// Throws Error(Device) saying what to install when NCCL cannot be opened or
// lacks a function this runtime calls.
const NcclLibrary& nccl();

}  // namespace encgraph

#define EG_NCCL_CHECK(expr)                                                                    \
  do {                                                                                         \
    const ncclResult_t eg_nccl_status_ = (expr);                                               \
    if (eg_nccl_status_ != ncclSuccess && eg_nccl_status_ != ncclInProgress)                   \
      throw ::encgraph::Error(::encgraph::ErrorKind::Device,                                   \
                              std::string("NCCL error ") +                                     \
                                  ::encgraph::nccl().error_string(eg_nccl_status_) + " in " +  \
                                  #expr + " at " + __FILE__ + ":" + std::to_string(__LINE__)); \
  } while (0)
