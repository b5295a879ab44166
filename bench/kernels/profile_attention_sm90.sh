#!/usr/bin/env bash
# On the GPU machine (gpu-bundle/ carried, unpacked): Nsight Compute on one
# launch of the Hopper attention kernel with K and V by TMA
# (attention_sm90_tma.cu), per SASS instruction, hottest first.
#   bash bench/kernels/profile_attention_sm90.sh <bundle> <out-dir> [bench_kernels args]
# Default: full attention, 16 sequences of 4096, 16 heads x 80
# (bench_kernels --only attnfull).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$1
out=$2
shift 2
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(--only attnfull)
bash "$here/profile_kernel.sh" "$bundle" "$out" tma_attention_kernel "${args[@]}"
