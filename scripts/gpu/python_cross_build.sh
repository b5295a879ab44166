#!/usr/bin/env bash
# Builds the Python module HERE for the GPU machine's interpreter, from that
# interpreter's headers and pybind11 (the GPU machine has Python 3.12, its
# headers, g++ and pybind11, but not the front-end library's development packages,
# so scripts/gpu/python_build.sh stops there). Fetch the headers once with a
# device call:
#   tar czf $OUT/py-headers.tgz -C / usr/include/python3.12 \
#     usr/include/x86_64-linux-gnu/python3.12 \
#     opt/torch/.venv/lib/python3.12/site-packages/pybind11
# (Ubuntu's pyconfig.h includes the multiarch one beside it.)
# then, after scripts/gpu-bundle.sh (the objects of ENCGRAPH_BUILD_DIR are reused):
#   bash scripts/gpu/python_cross_build.sh py-headers.tgz [BUNDLE]
# The package lands in BUNDLE/python/encgraph (the bundle's lib/ holds
# libencgraph.so and the libraries it needs); on the GPU machine:
#   PYTHONPATH=gpu-bundle/python python3 scripts/gpu/python_integration.py ...
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
headers=$1
bundle=${2:-$root/gpu-bundle}
build=${ENCGRAPH_BUILD_DIR:-$root/build}
work=$(mktemp -d /tmp/encgraph-pyx.XXXX)
trap 'rm -rf "$work"' EXIT
tar xzf "$headers" -C "$work"
py_include=$(find "$work" -name Python.h -printf '%h\n' | head -1)
pybind_include=$(find "$work" -path '*pybind11/include' -type d | head -1)
[[ -n $py_include && -n $pybind_include ]] || {
  echo "python_cross_build.sh: $headers holds no Python.h or pybind11/include" >&2
  exit 2
}
version=$(basename "$py_include")  # python3.12
tag=${version#python}
suffix=".cpython-${tag/./}-x86_64-linux-gnu.so"
out=$bundle/python/encgraph
mkdir -p "$out"
# The module's own objects are rebuilt against these headers; the front-end
# library and libencgraph.so come from the normal build.
objects=()
for src in "$root"/python/src/*.cpp; do
  obj=$work/$(basename "$src" .cpp).o
  c++ -std=c++20 -O3 -DNDEBUG -fPIC -fvisibility=hidden -DENCGRAPH_PYTHON_VIDEO_FILES=1 \
    -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL \
    -DSPDLOG_SHARED_LIB -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 \
    -I"$pybind_include" -isystem "$py_include" -isystem "$work/usr/include" \
    -I"$root/frontend/src" -I"$root/core/include" -I"$root/plugin_api/include" \
    -c "$src" -o "$obj" &
  objects+=("$obj")
  (($(jobs -r | wc -l) >= 2)) && wait -n
done
wait
c++ -shared -o "$out/_encgraph$suffix" "${objects[@]}" "$build/frontend/libencgraph_frontend.a" \
  -L"$build/core" -lencgraph -lspdlog -lfmt -ltomlplusplus -ljpeg \
  -lpng16 -lz -ldl -Wl,-rpath,'$ORIGIN/../../lib'
cp "$root"/python/encgraph/{__init__.py,__init__.pyi,_encgraph.pyi,py.typed} "$out/"
echo "python_cross_build.sh: $out/_encgraph$suffix"
