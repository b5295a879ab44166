#!/usr/bin/env bash
# The qwen2_5_vl plugin against transformers on the GPU machine (see the .py):
# transformers' initialisation (pass/fail at 2e-2), then a fan-in-scaled one
# where bf16 noise itself is near 2e-2 (reported, not judged).
#   bash scripts/gpu/qwen_vs_transformers.sh <bundle dir> <log dir>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
rc=0
python3 "$here/qwen_vs_transformers.py" --bundle "$bundle" --out-dir "$logs" --init hf "${@:3}" || rc=$?
python3 "$here/qwen_vs_transformers.py" --bundle "$bundle" --out-dir "$logs" --init fan_in \
  --informational --cpu-items 0 "${@:3}" || rc=$?
exit $rc
