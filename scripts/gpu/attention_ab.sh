#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash attention_ab.sh <bundle> <logdir>):
# the Hopper attention's lazy running max (variant 3, the default) against the
# same kernel compiled to move the max every tile (variant 4,
# ENCGRAPH_ATTENTION_LAZY_RESCALE=0), in one call: `bench_kernels --only attn`
# twice (both variants side by side in each pass), then `siglip_bench` (so400m,
# requests of 64, graphs) alternating the switch twice. Leaves
# <logdir>/attention_ab.table for the summary; full logs beside it.
#   device run: bash scripts/gpu-run-all.sh attention_ab
# step-timeout: 420
set -euo pipefail
bundle=$1
logdir=$2
table=$logdir/attention_ab.table
for pass in 1 2; do
  "$bundle/bin/bench_kernels" --only attn >"$logdir/attention_ab_attn_$pass.log" 2>&1
done
siglip=(--device cuda --weights random --set hidden_size=1152 --set intermediate_size=4304
  --set num_hidden_layers=27 --set num_attention_heads=16 --set image_size=384
  --set patch_size=14 --images 1024 --request-size 64 --repeats 2 --modes graphs)
for round in 1 2; do
  for lazy in 1 0; do
    ENCGRAPH_ATTENTION_LAZY_RESCALE=$lazy "$bundle/bin/siglip_bench" "${siglip[@]}" \
      >"$logdir/attention_ab_siglip_${lazy}_$round.log" 2>&1
  done
done
{
  echo "attention: lazy max (variant 3) against the max moved every tile (variant 4), µs"
  echo "| case | lazy, passes 1 / 2 | every tile, passes 1 / 2 |"
  echo "|---|---|---|"
  # Rows of the TMA-fed kernel over sequences longer than 64 tokens: "<case
  # words> ... <µs> us <TFLOP/s> TFLOP/s ... <variant name>".
  cat "$logdir"/attention_ab_attn_1.log "$logdir"/attention_ab_attn_2.log |
    awk '/TMA ring/ && !/window/ && / us / {
      us = ""; for (i = 1; i <= NF; ++i) if ($i == "us") { us = $(i - 1); break }
      split($0, parts, /[ ]+[0-9.]+ us /); name = parts[1]; sub(/[ ]+$/, "", name)
      gsub(/[ ]+/, " ", name)
      key = name (/every tile/ ? "\t4" : "\t3")
      if (count[key]++) t[key] = t[key] " / " us; else t[key] = us
      if (!(name in seen)) { seen[name] = 1; order[++n] = name }
    }
    END { for (i = 1; i <= n; ++i) printf "| %s | %s | %s |\n", order[i], t[order[i] "\t3"], t[order[i] "\t4"] }'
  echo
  for round in 1 2; do
    for lazy in 1 0; do
      rate=$(grep -o '"images_per_s": [0-9.]*' "$logdir/attention_ab_siglip_${lazy}_$round.log" |
        awk '{print $2}')
      echo "siglip_bench, round $round, ENCGRAPH_ATTENTION_LAZY_RESCALE=$lazy: ${rate:-failed} images/s"
    done
  done
} >"$table"
cat "$table"
