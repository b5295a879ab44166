#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash attention_ab.sh <bundle> <logdir>):
# the Hopper attention's end-aligned tails (variant 3, the default: a
# sequence's partial last key tile and its last query block read by TMA as its
# last 64 and 128 rows) against the former kernel, tails copied by cp.async
# behind block barriers (variant 5, ENCGRAPH_ATTENTION_END_ALIGNED=0), in one
# call: `bench_kernels --only attnshort` (SigLIP's head_dim at 704..2048
# tokens, the variants alternating) and `--only attn` once, then
# `siglip_bench` (so400m, requests of 64, graphs) alternating the default and
# the former kernel twice.
# (The eleventh and twelfth sessions' lazy-max A/B, the thirteenth's and
# fourteenth's chained query blocks: git history of this file.)
# Leaves <logdir>/attention_ab.table for the summary; full logs beside it.
#   device run: bash scripts/gpu-run-all.sh attention_ab
# step-timeout: 540
set -euo pipefail
bundle=$1
logdir=$2
table=$logdir/attention_ab.table
"$bundle/bin/bench_kernels" --only attnshort >"$logdir/attention_ab_short.log" 2>&1
"$bundle/bin/bench_kernels" --only attn >"$logdir/attention_ab_attn.log" 2>&1
siglip=(--device cuda --weights random --set hidden_size=1152 --set intermediate_size=4304
  --set num_hidden_layers=27 --set num_attention_heads=16 --set image_size=384
  --set patch_size=14 --images 1024 --request-size 64 --repeats 2 --modes graphs)
arms=("end-aligned:ENCGRAPH_ATTENTION_END_ALIGNED=1" "former:ENCGRAPH_ATTENTION_END_ALIGNED=0")
for round in 1 2; do
  for arm in "${arms[@]}"; do
    env "${arm#*:}" "$bundle/bin/siglip_bench" "${siglip[@]}" \
      >"$logdir/attention_ab_siglip_${arm%%:*}_$round.log" 2>&1
  done
done
{
  echo "attention: end-aligned (variant 3) / former, cp.async tails (5), µs"
  echo "| case | end-aligned | former |"
  echo "|---|---|---|"
  # Rows of the TMA-fed kernel: "<case words> ... <µs> us <TFLOP/s> TFLOP/s ... <variant name>".
  cat "$logdir"/attention_ab_short.log "$logdir"/attention_ab_attn.log |
    awk '/TMA ring/ && !/every tile/ && !/window/ && / us / {
      us = ""; for (i = 1; i <= NF; ++i) if ($i == "us") { us = $(i - 1); break }
      split($0, parts, /[ ]+[0-9.]+ us /); name = parts[1]; sub(/[ ]+$/, "", name)
      gsub(/[ ]+/, " ", name)
      key = name (/cp.async/ ? "\t5" : "\t3")
      if (count[key]++) t[key] = t[key] " / " us; else t[key] = us
      if (!(name in seen)) { seen[name] = 1; order[++n] = name }
    }
    END { for (i = 1; i <= n; ++i) printf "| %s | %s | %s |\n", order[i], t[order[i] "\t3"], t[order[i] "\t5"] }'
  echo
  for round in 1 2; do
    for arm in "${arms[@]}"; do
      rate=$(grep -o '"images_per_s": [0-9.]*' "$logdir/attention_ab_siglip_${arm%%:*}_$round.log" |
        awk '{print $2}')
      echo "siglip_bench, round $round, ${arm%%:*} (${arm#*:}): ${rate:-failed} images/s"
    done
  done
} >"$table"
cat "$table"
