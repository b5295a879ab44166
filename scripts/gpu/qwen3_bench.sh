#!/usr/bin/env bash
# The Qwen3-VL-8B tower benchmark: encgraph graphs and eager against
# transformers (sdpa) on the Qwen2.5-VL benchmark's workloads with sides in
# multiples of 32, plus one image per request (see qwen3_bench.py).
#   bash scripts/gpu/qwen3_bench.sh <bundle dir> <log dir> [qwen3_bench.py options]
# Give it device calls of its own. Each workload captures its 20 graphs again
# (82 s each on an H200 on 2026-11-30; issue 15's cache brings that down), so
# the five workloads do not fit one 570 s step: split them, e.g.
#   QWEN3_BENCH_ARGS="--only 224,mixed" bash scripts/gpu-run-all.sh qwen3_bench
#   QWEN3_BENCH_ARGS="--only 1344,video,224x1" bash scripts/gpu-run-all.sh qwen3_bench
# step-timeout: 570
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
# QWEN3_BENCH_ARGS: extra options when run through gpu-run-all.sh (e.g. --only 224).
python3 "$here/qwen3_bench.py" --bundle "$bundle" --out-dir "$logs" ${QWEN3_BENCH_ARGS:-} "${@:3}"
