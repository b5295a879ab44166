// The process group of an environment launch (RANK, WORLD_SIZE, LOCAL_RANK set
// by a scheduler, no mpirun): NCCL carries control messages and rows between
// CUDA ranks; rank 0's NCCL id and failure notices pass through files beside
// distributed.id_file.
#pragma once

#include <encgraph/process_group.hpp>

#include <memory>

namespace encgraph {

std::shared_ptr<ProcessGroup> make_env_process_group(const DistributedConfig& config, int rank,
                                                     int size, int local_rank);

}  // namespace encgraph
