#!/usr/bin/env bash
# On the GPU machine (gpu-bundle/ carried, unpacked): Nsight Compute's stall
# sampling of one launch of our Hopper GEMM (gemm_sm90.cu), per SASS
# instruction, hottest first: where a tile's time goes besides the wgmma.
#   bash bench/kernels/profile_gemm_sm90.sh <bundle> <out-dir> [bench_kernels args]
# Default: the fused gate/up + SiLU·mul form at 65536 rows (bench_kernels --only mlp,
# the second launch: the first after a warm-up call).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$1
out=$2
shift 2
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(--only mlp)
bash "$here/profile_kernel.sh" "$bundle" "$out" gemm_sm90_kernel "${args[@]}"
