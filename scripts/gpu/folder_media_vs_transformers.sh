#!/usr/bin/env bash
# A Qwen2.5-VL checkpoint folder (config.json, preprocessor_config.json, two
# bf16 shards + index, text tensors beside the visual ones) and PNG/JPEG/MP4
# files through `encgraph encode` on the folder alone, against transformers'
# processor and tower in fp32 and bf16 (issue 13; see the .py).
#   bash scripts/gpu/folder_media_vs_transformers.sh <bundle dir> [log dir] [script options]
# step-timeout: 600
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=${2:-${OUT:-/tmp/encgraph-gpu-out}}
mkdir -p "$logs"
# Standalone (not through gpu-run-all.sh): the bundle's libraries and plugins.
if [[ -z ${ENCGRAPH_PLUGIN_PATH:-} ]]; then
  bash "$here/../gpu-unpack.sh" "$bundle"
  export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export ENCGRAPH_PLUGIN_PATH=$bundle/plugins
fi
python3 "$here/folder_media_vs_transformers.py" --bundle "$bundle" --out-dir "$logs" "${@:3}"
