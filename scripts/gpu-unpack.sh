#!/usr/bin/env bash
# On the GPU machine: restores what gpu-bundle.sh compressed (packed/<dir>/*.xz
# back into lib/, bin/ and plugins/), with xz or, where it is missing, Python's
# lzma. Idempotent.
#   bash scripts/gpu-unpack.sh [bundle dir]   (default: $ENCGRAPH_BUNDLE_DIR or gpu-bundle)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:-${ENCGRAPH_BUNDLE_DIR:-$root/gpu-bundle}}
shopt -s nullglob
unpack() {  # unpack FILE.xz DESTINATION
  local f=$1 out=$2
  [[ -f $out && $out -nt $f ]] && return 0
  if command -v xz >/dev/null 2>&1; then
    xz -dkc "$f" >"$out.tmp"
  else
    python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$f" "$out.tmp"
  fi
  mv "$out.tmp" "$out"
}
for dir in lib bin plugins; do
  for f in "$bundle/packed/$dir"/*.xz; do
    out=$bundle/$dir/$(basename "$f" .xz)
    unpack "$f" "$out"
    [[ $dir == lib ]] || chmod +x "$out"
  done
done
