#!/usr/bin/env bash
# DeepSeek-OCR-2 vision side benchmark (see the .py): encgraph graphs, eager and
# transformers on document-like pages, bf16, random weights, released sizes.
#   bash scripts/gpu/dsocr2_bench.sh <bundle dir> <log dir> [.py options]
# step-timeout: 540
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
# DSOCR2_BENCH_ARGS: extra options, e.g. "--only a4_150,mixed --skip-transformers".
# shellcheck disable=SC2086
python3 "$here/dsocr2_bench.py" --bundle "$bundle" --out-dir "$logs" "${@:3}" ${DSOCR2_BENCH_ARGS:-}
