#!/usr/bin/env bash
# Data parallel against one GPU on the Qwen2.5-VL-7B tower, in one process and
# as one process per GPU under mpirun (see dp_bench.py);
# skipped (77) on a machine with one GPU. Run on the 2-GPU kind:
#   ENCGRAPH_STEP_TIMEOUT=500 bash scripts/gpu-run-all.sh dp_bench
# step-timeout: 500
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
source "$here/mpi_env.sh" "$bundle"  # mpirun for the one-process-per-GPU runs
python3 "$here/dp_bench.py" --bundle "$bundle" --out-dir "$logs" "${@:3}"
