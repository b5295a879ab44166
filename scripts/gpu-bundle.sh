#!/usr/bin/env bash
# Builds for sm_90 here and bundles everything the H200 machine needs to run the
# GPU tests and benchmarks into gpu-bundle/ (git-ignored; pass it in `carry`):
#   gpu-bundle/bin      host binary, the GPU test suites, benchmark executables
#   gpu-bundle/lib      libencgraph.so plus the non-CUDA shared libraries they
#                       need (Boost program_options, spdlog, fmt, toml++, BLAS…)
#   gpu-bundle/plugins  every plugin
#   gpu-bundle/packed   files of lib/, bin/ and plugins/ over 4 MiB, xz-compressed
#                       (steps.sh --unpack puts them back)
# CUDA, cuBLAS and NCCL are taken from the GPU machine's /usr/local/cuda.
#
# Video files: encgraph loads FFmpeg's libraries (libavformat, libavcodec,
# libavutil, libswscale) only when it reads a video file, and the GPU machine
# has none of them. With their dependencies they are ~140 MiB (~41 MiB
# xz-compressed), too much beside the test executables, so they travel only
# in a video bundle: ENCGRAPH_BUNDLE_VIDEO=1 adds them (every library over
# 256 KiB xz-compressed) and leaves the test executables out (bin/ holds
# encgraph and the benchmarks). Without it, a video file on the GPU machine
# is an error naming the missing library; images and frame files work.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENCGRAPH_BUILD_DIR:-$root/build}
bundle=${ENCGRAPH_BUNDLE_DIR:-$root/gpu-bundle}
"$root/scripts/build.sh" -DCMAKE_CUDA_ARCHITECTURES=90

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/plugins"
cp -P "$build"/core/libencgraph.so* "$bundle/lib/"
# MPI support (opened under mpirun) and the Open MPI runtime it needs, which
# the GPU machine lacks (scripts/gpu/steps.sh's mpi_env relocates it there).
if [[ -f $build/core/libencgraph_mpi.so ]]; then
  cp "$build/core/libencgraph_mpi.so" "$bundle/lib/"
  bash "$root/scripts/gpu-bundle-mpi.sh" "$bundle"
fi
cp "$build"/plugins/libencgraph_*.so "$bundle/plugins/"
# Test-only plugins that the GPU suites load by name (the build's test plugin
# folder: toy_faults, toy_badpad, toy_v1_1, verify_mistakes; and the ABI 1.0
# plugin); the loader's deliberately broken ones stay behind.
find "$build/test-plugins" "$build/tests/abi_compat" -name 'libencgraph_*.so' \
  -exec cp {} "$bundle/plugins/" \; 2>/dev/null || true
cp "$build/host/encgraph" "$bundle/bin/"
video=${ENCGRAPH_BUNDLE_VIDEO:-0}
# Test and benchmark executables (ELF files with the executable bit). The
# suite that encodes its own test videos links FFmpeg's encoders: it stays
# behind (it runs on the CPU).
bin_dirs=("$build/bench")
[[ $video == 1 ]] || bin_dirs+=("$build/tests")
# Of the tests, only the GPU suites travel (gpu-run-all.sh runs test_*gpu* and
# test_*cuda*; the CPU suites run in CI): all of them would not fit in 64 MiB.
# A test executable travels only when this build's CTest still registers it:
# a suite removed from the tree leaves its old binary in the build folder.
registered=$(ctest --test-dir "$build" --show-only=json-v1 | python3 -c '
import json, os, sys
for t in json.load(sys.stdin).get("tests", []):
    if t.get("command"): print(os.path.basename(t["command"][0]))')
find "${bin_dirs[@]}" -maxdepth 3 -type f -perm -u+x 2>/dev/null |
  while read -r f; do
    name=$(basename "$f")
    case $name in test_*)
      [[ $name == *gpu* || $name == *cuda* ]] || continue
      grep -qxF "$name" <<<"$registered" || continue
      ;;
    esac
    if head -c 4 "$f" | grep -q ELF; then cp "$f" "$bundle/bin/"; fi
  done
# FFmpeg's libraries, dlopen'ed by encgraph (so ldd does not list them).
ffmpeg_libs=()
if [[ $video == 1 ]]; then
  for lib in libavformat libavcodec libavutil libswscale; do
    path=$(pkg-config --variable=libdir "$lib")/$lib.so
    soname=$(objdump -p "$(readlink -f "$path")" | awk '/SONAME/{print $2}')
    cp -L "$(dirname "$path")/$soname" "$bundle/lib/$soname"
    ffmpeg_libs+=("$bundle/lib/$soname")
  done
fi
# Shared libraries the GPU machine lacks: everything ldd resolves outside the C
# runtime, the C++ runtime and CUDA.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia|libencgraph)'
for elf in "$bundle"/bin/* "$bundle"/lib/libencgraph.so "$bundle"/plugins/*.so \
  "${ffmpeg_libs[@]}"; do
  ldd "$elf" 2>/dev/null | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$bundle/lib/$name"
done
# The device tool carries at most 64 MiB: large files travel xz-compressed
# under packed/<dir>/ (OpenBLAS: 36 MB -> 4 MB; a plugin with every kernel
# variant: 7.9 MB -> 1.6 MB), so that lib/ and plugins/ hold nothing but what
# is loaded from them; steps.sh --unpack puts them back. A video bundle
# compresses every library over 256 KiB: FFmpeg's dependencies are many
# mid-sized ones.
lib_min_size=+4M
[[ $video == 1 ]] && lib_min_size=+256k
for dir in lib bin plugins; do
  min_size=+4M
  [[ $dir == lib ]] && min_size=$lib_min_size
  find "$bundle/$dir" -maxdepth 1 -type f -size "$min_size" | while read -r f; do
    mkdir -p "$bundle/packed/$dir"
    xz -T0 -6 -c "$f" >"$bundle/packed/$dir/$(basename "$f").xz"
    rm "$f"
  done
done
# Python helpers for reference checks travel with the tree (scripts/gpu/).
du -sh "$bundle"
# The device tool's limit: a larger bundle would not travel.
size_kib=$(du -sk "$bundle" | cut -f1)
if ((size_kib > 64 * 1024)); then
  echo "gpu-bundle: $bundle is $((size_kib / 1024)) MiB, over the 64 MiB the device tool carries" >&2
  exit 1
fi
