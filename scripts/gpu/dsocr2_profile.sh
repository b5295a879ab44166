#!/usr/bin/env bash
# Per-kernel GPU time of DeepSeek-OCR-2's vision side (released sizes, bf16,
# random weights) on one request of 8 A4 pages at 150 dpi (6 crops each),
# eager, measured by Nsight Compute (gpu__time_duration, clocks left alone):
# the evidence table for the speed work (docs/benchmarks.md).
#   bash scripts/gpu/dsocr2_profile.sh <bundle dir> <log dir> [workload: a key of dsocr2_bench.py's SIZES]
# step-timeout: 400
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
[[ -n $ncu ]] || { echo "no ncu on this machine"; exit 1; }
# DSOCR2_PROFILE_PLUGINS: plugin folders to compare (default: the bundle's).
for plugins in ${DSOCR2_PROFILE_PLUGINS:-$bundle/plugins}; do
  python3 "$here/dsocr2_profile.py" --bundle "$bundle" --out-dir "$logs" --ncu "$ncu" \
    --plugins "$plugins" "${@:3}"
done
