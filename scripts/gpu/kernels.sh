#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash kernels.sh <bundle> <logdir>):
# times the shared CUDA kernels at Qwen2.5-VL-7B shapes and leaves the table in
# <logdir>/kernels.table for the summary.
set -euo pipefail
bundle=$1
logdir=$2
# KERNELS_ARGS: e.g. "--only attn" (bench_kernels --help).
"$bundle/bin/bench_kernels" --table "$logdir/kernels.table" ${KERNELS_ARGS:-}
