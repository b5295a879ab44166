#!/usr/bin/env bash
# The qwen3_vl plugin against transformers' Qwen3VLVisionModel on the GPU
# machine (see the .py): 8B tower dimensions at full depth, random bf16
# weights saved as a checkpoint (model.visual.* names), every output compared.
#   bash scripts/gpu/qwen3_vs_transformers.sh <bundle dir> <log dir> [.py options]
# step-timeout: 540
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
python3 "$here/qwen3_vs_transformers.py" --bundle "$bundle" --out-dir "$logs" "${@:3}"
