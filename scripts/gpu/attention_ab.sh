#!/usr/bin/env bash
# GPU runner hook (scripts/gpu-run-all.sh calls: bash attention_ab.sh <bundle> <logdir>):
# the Hopper attention's grid and output stores. Variant 3, the default, runs
# a sequence's heads and query blocks together (sequence-major grid) and
# stores O as 16-byte chunks staged in shared memory; 6 is the former kernel
# (query blocks fastest, one head a grid row, 4-byte stores from registers;
# ENCGRAPH_ATTENTION_HEADS_FIRST=0). (Heads fastest, 4-byte stores alone
# and an L2 prefetch of the next sequence, variants 7-9 of the fifteenth
# session, measured slower: git history.) In one call: `bench_kernels --only
# attnshort` (SigLIP's head_dim at 704..2048 tokens, the variants
# alternating) and `--only attn` once, then `siglip_bench` (so400m, requests
# of 64, graphs) alternating the default and the former kernel twice.
# (The eleventh and twelfth sessions' lazy-max A/B, the thirteenth's and
# fourteenth's chained query blocks and end-aligned tails: git history.)
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
arms=("sequence-major:ENCGRAPH_ATTENTION_HEADS_FIRST=1" "former:ENCGRAPH_ATTENTION_HEADS_FIRST=0")
for round in 1 2; do
  for arm in "${arms[@]}"; do
    env "${arm#*:}" "$bundle/bin/siglip_bench" "${siglip[@]}" \
      >"$logdir/attention_ab_siglip_${arm%%:*}_$round.log" 2>&1
  done
done
{
  echo "attention, µs: 3 sequence-major + staged stores (default) / 6 former grid, 4-byte stores"
  echo "| case | 3 | 6 |"
  echo "|---|---|---|"
  # Rows of the TMA-fed kernel: "<case words> ... <µs> us <TFLOP/s> TFLOP/s ... <variant name>".
  cat "$logdir"/attention_ab_short.log "$logdir"/attention_ab_attn.log |
    awk '/TMA ring/ && !/every tile/ && !/cp.async/ && !/window/ && / us / {
      us = ""; for (i = 1; i <= NF; ++i) if ($i == "us") { us = $(i - 1); break }
      split($0, parts, /[ ]+[0-9.]+ us /); name = parts[1]; sub(/[ ]+$/, "", name)
      gsub(/[ ]+/, " ", name)
      v = /former grid/ ? 6 : 3
      key = name "\t" v
      if (count[key]++) t[key] = t[key] " / " us; else t[key] = us
      if (!(name in seen)) { seen[name] = 1; order[++n] = name }
    }
    END { for (i = 1; i <= n; ++i) printf "| %s | %s | %s |\n", order[i],
      t[order[i] "\t3"], t[order[i] "\t6"] }'
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
