#!/usr/bin/env bash
# Installs the Debian packages encgraph builds and tests with, only those
# missing (idempotent). CUDA and NCCL come from /usr/local/cuda, not from apt.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libboost-dev libboost-program-options-dev
  libspdlog-dev libfmt-dev libtomlplusplus-dev doctest-dev
  libstb-dev libopenblas-dev nlohmann-json3-dev
  # image decoding as Pillow does it (libjpeg-turbo, libpng), and Pillow
  # itself for tests/host/pillow_decode (run with /usr/bin/python3)
  libjpeg62-turbo-dev libturbojpeg0-dev libpng-dev zlib1g-dev python3-pil
  # scripts/test: the hostile-input suite; the sanitizer build and libFuzzer
  # (clang 16: C++20 lambdas capturing structured bindings, which clang 14,
  # Debian 12's default, rejects); llvm-symbolizer for readable reports
  python3 clang-16 libclang-rt-16-dev llvm
  # video files: FFmpeg's libraries decode MP4/WebM/MKV, and the
  # tests encode their own small clips with them
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
  # the Python module: pybind11, and its CPU tests under pytest
  python3-dev pybind11-dev python3-pytest python3-numpy
  # multi-process data parallelism: Open MPI launches and connects
  # the ranks (mpirun), and carries rows between CPU ranks
  libopenmpi-dev openmpi-bin
  # docs/performance.md's plots (scripts/plot_benchmarks.py) and
  # their ctest entry
  python3-matplotlib
  # `encgraph serve`: xxHash keys its embedding cache (Boost.Beast, the HTTP
  # server, comes with libboost-dev); its end-to-end test drives it with
  # python3-requests and curl
  libxxhash-dev python3-requests curl
  # `encgraph serve --grpc`: gRPC and protobuf (protoc and grpc_cpp_plugin
  # generate the service from host/src/serve/inference.proto); its
  # end-to-end test is a grpcio client with protoc's Python messages
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3-grpcio python3-protobuf
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "encgraph: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || {
    "${sudo_cmd[@]}" apt-get update -q >/dev/null
    "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}"
  }
fi
