#!/usr/bin/env bash
# The qwen2_5_vl plugin against transformers on the GPU machine (see the .py).
#   bash scripts/gpu/qwen_vs_transformers.sh <bundle dir> <log dir>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
python3 "$here/qwen_vs_transformers.py" --bundle "$bundle" --out-dir "$logs" "${@:3}"
