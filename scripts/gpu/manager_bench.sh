#!/usr/bin/env bash
# Manager overhead benchmark on the GPU (run by scripts/gpu-run-all.sh).
set -euo pipefail
bundle=$1
out=$2
"$bundle/bin/bench_manager_overhead" cuda "$out/manager.table"
