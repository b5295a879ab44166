#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash siglip_mlp_ab.sh <bundle> <logdir>):
# SigLIP's layer_norm2 + fc1 + GELU, the norm inside our Hopper product
# (mlp_kernel = "fused_norm") against the norm pass and cuBLASLt ("cublaslt").
# In one call: `bench_kernels --only lnprobe` (the forms at 64, 22.5 and 4
# images of so400m, alternating), then `siglip_bench` (so400m, graphs) at
# requests of 64 and of 4, the two forms alternating twice.
# Leaves <logdir>/siglip_mlp_ab.table for the summary; full logs beside it.
#   device run: bash scripts/gpu-run-all.sh siglip_mlp_ab
# step-timeout: 540
set -euo pipefail
bundle=$1
logdir=$2
table=$logdir/siglip_mlp_ab.table
"$bundle/bin/bench_kernels" --only lnprobe --table "$logdir/siglip_mlp_ab_kernels.table" \
  >"$logdir/siglip_mlp_ab_kernels.log" 2>&1
siglip=(--device cuda --weights random --set hidden_size=1152 --set intermediate_size=4304
  --set num_hidden_layers=27 --set num_attention_heads=16 --set image_size=384
  --set patch_size=14 --repeats 2 --modes graphs)
forms=(fused_norm cublaslt)
for request in 64 4; do
  images=$((request == 64 ? 1024 : 256))
  for round in 1 2; do
    for form in "${forms[@]}"; do
      "$bundle/bin/siglip_bench" "${siglip[@]}" --images "$images" --request-size "$request" \
        --set mlp_kernel="$form" >"$logdir/siglip_mlp_ab_${request}_${form}_$round.log" 2>&1
    done
  done
done
{
  echo "layer_norm2 + fc1 (+ gelu), µs (bench_kernels --only lnprobe):"
  grep -E "^siglip ln" "$logdir/siglip_mlp_ab_kernels.table" | cut -c1-200
  echo
  for request in 64 4; do
    for round in 1 2; do
      for form in "${forms[@]}"; do
        rate=$(grep -o '"images_per_s": [0-9.]*' \
          "$logdir/siglip_mlp_ab_${request}_${form}_$round.log" | awk '{print $2}')
        echo "siglip_bench, requests of $request, round $round, mlp_kernel=$form: ${rate:-failed} images/s"
      done
    done
  done
} >"$table"
cat "$table"
