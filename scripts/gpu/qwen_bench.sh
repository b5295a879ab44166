#!/usr/bin/env bash
# The Qwen2.5-VL-7B tower benchmark: encgraph graphs and eager against
# transformers (eager, sdpa) on four workloads, one run (see qwen_bench.py).
#   bash scripts/gpu/qwen_bench.sh <bundle dir> <log dir> [qwen_bench.py options]
# It takes about 400 s on an H200 (most of it transformers' eager attention):
# give it a device call of its own, `bash scripts/gpu-run-all.sh qwen_bench`
# (the step-timeout line below sets its limit there).
# step-timeout: 570
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
# QWEN_BENCH_ARGS: extra options when run through gpu-run-all.sh (e.g. --only 224).
python3 "$here/qwen_bench.py" --bundle "$bundle" --out-dir "$logs" ${QWEN_BENCH_ARGS:-} "${@:3}"
