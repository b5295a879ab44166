#!/usr/bin/env bash
# The CPU backend on the GPU machine's host cores (issue 15's CPU targets):
# cpu_layer_bench (one Qwen2.5-VL-7B-width block, GFLOP/s against a measured
# FMA peak) and the depth-8, 7B-width tower on 7 images, eagerly, timed.
#   bash scripts/gpu/cpu_bench.sh <bundle dir> <log dir>
# step-timeout: 300
set -euo pipefail
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
lscpu | grep -E "Model name|Flags" | cut -c1-400 | tee "$logs/cpu_lscpu.txt"
"$bundle/bin/cpu_layer_bench" --patches 1024 --runs 5 | tee "$logs/cpu_layer_bench.txt"
# OpenBLAS picks its kernels from CPUID; under a VM that may be a weaker set.
# The same block with the kernels forced (a set the CPU lacks dies: SIGILL).
for core in ${CPU_BENCH_CORETYPES:-SkylakeX Haswell Zen}; do
  echo "== OPENBLAS_CORETYPE=$core"
  OPENBLAS_CORETYPE=$core "$bundle/bin/cpu_layer_bench" --patches 1024 --runs 3 || true
done 2>&1 | tee "$logs/cpu_layer_bench_coretypes.txt"
config=$logs/cpu_depth8.toml
cat >"$config" <<TOML
[runtime]
device = "cpu"
log_level = "warn"
use_graphs = false
[plugin]
name = "qwen2_5_vl"
weights = "random"
[plugin.config]
depth = 8
fullatt_block_indexes = [7]
dtype = "f32"
max_pixels = 451584
[budgets]
token_budgets = [1024]
max_items_per_batch = 7
[workload]
kind = "synthetic"
count = 7
seed = 1
min_side = 224
max_side = 672
side_multiple = 28
video_fraction = 0.0
request_size = 7
warmup_requests = 0
TOML
start=$(date +%s.%N)
"$bundle/bin/encgraph" run -c "$config" | tee "$logs/cpu_depth8.txt"
end=$(date +%s.%N)
python3 -c "print(f'depth-8 7B-width tower, 7 images, CPU ({__import__(\"os\").cpu_count()} cores): {$end - $start:.1f} s wall')" |
  tee -a "$logs/cpu_depth8.txt"
{
  echo "CPU backend on the GPU machine's host"
  tail -3 "$logs/cpu_layer_bench.txt"
  tail -1 "$logs/cpu_depth8.txt"
} >"$logs/cpu_bench.table"
