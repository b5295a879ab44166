#!/usr/bin/env bash
# On the GPU machine: restores the libraries gpu-bundle.sh compressed (*.xz in
# the bundle's lib/), with xz or, where it is missing, Python's lzma. Idempotent.
#   bash scripts/gpu-unpack.sh [bundle dir]   (default: $ENCGRAPH_BUNDLE_DIR or gpu-bundle)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:-${ENCGRAPH_BUNDLE_DIR:-$root/gpu-bundle}}
shopt -s nullglob
for f in "$bundle"/lib/*.xz; do
  out=${f%.xz}
  [[ -f $out && $out -nt $f ]] && continue
  if command -v xz >/dev/null 2>&1; then
    xz -dkc "$f" >"$out.tmp"
  else
    python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$f" "$out.tmp"
  fi
  mv "$out.tmp" "$out"
done
