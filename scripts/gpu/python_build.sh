#!/usr/bin/env bash
# Builds the encgraph Python module on the GPU machine against its own Python
# (3.12 there, with torch, transformers and pybind11 from pip), with the CUDA
# backend, into ${1:-build-python-gpu}; then prints the PYTHONPATH to use.
#   bash scripts/gpu/python_build.sh [BUILD_DIR]
#   PYTHONPATH=BUILD_DIR/python python3 scripts/gpu/python_integration.py --out-dir logs
# Checks first what the build needs and says what is missing: cmake, a C++20
# compiler, nvcc, the interpreter's headers, pybind11, and the host library's
# development packages (Boost.Program_options, spdlog, toml++, nlohmann-json,
# libjpeg, libpng, zlib; Debian: scripts/setup-deps.sh installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-python-gpu}
py=${PYTHON:-python3}
missing=()
command -v cmake >/dev/null || missing+=("cmake (pip install cmake, or apt-get install cmake)")
cxx=${CXX:-$(command -v g++ || command -v c++ || command -v clang++ || true)}
[[ -n $cxx ]] || missing+=("a C++20 compiler (apt-get install g++)")
command -v "$py" >/dev/null || missing+=("$py")
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x $nvcc ]] || echo "python_build.sh: note: no nvcc ($nvcc): the module is built for the CPU only"
if command -v "$py" >/dev/null; then
  include=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  [[ -f $include/Python.h ]] || missing+=("Python.h of $py (looked in $include; apt-get install python3-dev)")
  pybind11_dir=$("$py" -m pybind11 --cmakedir 2>/dev/null || true)
  [[ -n $pybind11_dir ]] || missing+=("pybind11 for $py (pip install pybind11)")
fi
if ((${#missing[@]})); then
  echo "python_build.sh: cannot build the module here; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
echo "python_build.sh: $("$py" --version) at $(command -v "$py"), pybind11 $pybind11_dir, $cxx"
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DPython3_EXECUTABLE="$(command -v "$py")" -Dpybind11_DIR="$pybind11_dir" \
    -DENCGRAPH_BUILD_TESTS=OFF -DENCGRAPH_BUILD_BENCH=OFF >"$build.configure.log" 2>&1; then
  echo "python_build.sh: cmake could not configure (a development package is missing?):" >&2
  grep -E "Could NOT find|not found|Error" "$build.configure.log" | head -20 >&2
  echo "full log: $build.configure.log" >&2
  exit 2
fi
grep -E "encgraph: (CUDA|Python)" "$build.configure.log" || true
grep -q "Python module ON" "$build.configure.log" || {
  echo "python_build.sh: cmake left the Python module off (see $build.configure.log)" >&2
  exit 2
}
targets=(encgraph encgraph_python encgraph_plugin_qwen2_5_vl encgraph_plugin_toy)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
PYTHONPATH="$build/python" "$py" -c 'import encgraph; print("built", encgraph.__file__, encgraph.__version__)'
echo "PYTHONPATH=$build/python"
