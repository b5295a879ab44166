#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash serve_bench.sh <bundle> <logdir>):
# `encgraph serve` with 64 closed-loop clients, one 224x224 image per request,
# half of them repeats, against `encgraph bench` on the same config
# (scripts/gpu/serve_bench.py; docs/serving.md).
# step-timeout: 600
set -euo pipefail
bundle=$1
logdir=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/gpu/serve_bench.py" --encgraph "$bundle/bin/encgraph" \
  --plugin-dir "$bundle/plugins" --config "$root/configs/siglip.toml" \
  --table "$logdir/serve_bench.table"
