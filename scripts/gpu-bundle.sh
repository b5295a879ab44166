#!/usr/bin/env bash
# Builds for sm_90 here and bundles everything the H200 machine needs to run the
# GPU tests and benchmarks into gpu-bundle/ (git-ignored; pass it in `carry`):
#   gpu-bundle/bin      host binary, test and benchmark executables
#   gpu-bundle/lib      libencgraph.so plus the non-CUDA shared libraries they
#                       need (Boost program_options, spdlog, fmt, toml++, BLAS…)
#   gpu-bundle/plugins  every plugin
# CUDA, cuBLAS and NCCL are taken from the GPU machine's /usr/local/cuda.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENCGRAPH_BUILD_DIR:-$root/build}
bundle=${ENCGRAPH_BUNDLE_DIR:-$root/gpu-bundle}
"$root/scripts/build.sh" -DCMAKE_CUDA_ARCHITECTURES=90

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/plugins"
cp -P "$build"/core/libencgraph.so* "$bundle/lib/"
cp "$build"/plugins/libencgraph_*.so "$bundle/plugins/"
# Test-only plugins (toy_faults, toy_badpad, the ABI 1.0 plugin) that the GPU
# suites load by name; the loader's deliberately broken ones stay behind.
find "$build/tests/plugins" "$build/tests/abi_compat" -name 'libencgraph_*.so' \
  -exec cp {} "$bundle/plugins/" \; 2>/dev/null || true
cp "$build/host/encgraph" "$bundle/bin/"
# Test and benchmark executables (ELF files with the executable bit).
find "$build/tests" "$build/bench" -maxdepth 3 -type f -perm -u+x 2>/dev/null |
  while read -r f; do
    if head -c 4 "$f" | grep -q ELF; then cp "$f" "$bundle/bin/"; fi
  done
# Shared libraries the GPU machine lacks: everything ldd resolves outside the C
# runtime, the C++ runtime and CUDA.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia|libencgraph)'
for elf in "$bundle"/bin/* "$bundle"/lib/libencgraph.so "$bundle"/plugins/*.so; do
  ldd "$elf" 2>/dev/null | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$bundle/lib/$name"
done
# The device tool carries at most 64 MiB: large libraries travel xz-compressed
# (OpenBLAS: 36 MB -> 4 MB); scripts/gpu-unpack.sh restores them there.
find "$bundle/lib" -type f -size +4M | while read -r f; do
  xz -T0 -6 "$f"  # writes f.xz, removes f
done
# Python helpers for reference checks travel with the tree (scripts/gpu/).
du -sh "$bundle"
