#!/usr/bin/env bash
# Capture time of the Qwen2.5-VL bench config (20 graphs) with the GEMM tuning
# cache: cold (empty cache folder: tunes, writes the cache), warm (reads it,
# times nothing), and with tuning off for reference (see capture_bench.py).
#   bash scripts/gpu/capture_bench.sh <bundle dir> <log dir> [capture_bench.py options]
# Through the runner: bash scripts/gpu-run-all.sh capture_bench
# About 60 s on an H200 (three processes, each loading and capturing).
# step-timeout: 300
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
python3 "$here/capture_bench.py" --bundle "$bundle" --out-dir "$logs" ${CAPTURE_BENCH_ARGS:-} "${@:3}"
