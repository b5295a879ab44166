#!/usr/bin/env bash
# Configures and builds encgraph into ${ENCGRAPH_BUILD_DIR:-build}. Extra
# arguments go to cmake's configure step (e.g. -DCMAKE_CUDA_ARCHITECTURES=90).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENCGRAPH_BUILD_DIR:-$root/build}
"$root/scripts/setup-deps.sh"
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
elif (($#)); then
  cmake "$build" "$@"
fi
cmake --build "$build" -j "$(nproc)"
