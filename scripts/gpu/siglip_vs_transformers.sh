#!/usr/bin/env bash
# The siglip plugin against transformers' SiglipVisionModel, and the 512-image
# benchmark (graphs, eager, transformers), on the GPU machine (see the .py).
#   bash scripts/gpu/siglip_vs_transformers.sh <bundle dir> <log dir>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
python3 "$here/siglip_vs_transformers.py" --bundle "$bundle" --out-dir "$logs" "${@:3}"
