#!/usr/bin/env bash
# The deepseek_ocr2 plugin against transformers' DeepseekOcr2Model.get_image_features
# on the GPU machine (see the .py): released vision sizes, random bf16 weights
# saved under transformers' names, inputs from transformers' own processor.
#   bash scripts/gpu/dsocr2_vs_transformers.sh <bundle dir> <log dir> [.py options]
# step-timeout: 540
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
python3 "$here/dsocr2_vs_transformers.py" --bundle "$bundle" --out-dir "$logs" "${@:3}"
