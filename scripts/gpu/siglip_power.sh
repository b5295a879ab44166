#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash siglip_power.sh <bundle> <logdir>):
# what bounds SigLIP so400m's sustained rate. Runs `siglip_bench` (graphs,
# requests of 64, 2048 images, 4 passes) under lib/power_sample.sh (power, SM
# clock and throttle reasons every 100 ms). Leaves <logdir>/siglip_power.table.
#   device run: bash scripts/gpu-run-all.sh siglip_power
# step-timeout: 300
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$1
logdir=$2
bash "$here/lib/power_sample.sh" "$logdir" siglip_power \
  "$bundle/bin/siglip_bench" --device cuda --weights random --set hidden_size=1152 \
  --set intermediate_size=4304 --set num_hidden_layers=27 --set num_attention_heads=16 \
  --set image_size=384 --set patch_size=14 --images 2048 --request-size 64 --repeats 4 \
  --modes graphs
echo "siglip_bench: $(grep -o '"images_per_s": [0-9.]*' "$logdir/siglip_power_bench.log")" |
  tee -a "$logdir/siglip_power.table"
