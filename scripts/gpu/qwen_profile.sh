#!/usr/bin/env bash
# Per-kernel GPU time of the Qwen2.5-VL-7B tower (bench config, bf16, random
# weights) on one 224x224 and one 1344x1344 image, eager, measured by Nsight
# Compute (gpu__time_duration, clocks left alone): the evidence for issue 15's
# latency and kernel work (docs/benchmarks.md).
#   bash scripts/gpu/qwen_profile.sh <bundle dir> <log dir> [--sizes 224,1344]
# step-timeout: 400
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
[[ -n $ncu ]] || { echo "no ncu on this machine"; exit 1; }
python3 "$here/qwen_profile.py" --bundle "$bundle" --out-dir "$logs" --ncu "$ncu" "${@:3}"
