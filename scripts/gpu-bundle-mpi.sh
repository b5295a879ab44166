#!/usr/bin/env bash
# Packs Debian's Open MPI runtime (mpirun, orted, libmpi and its components,
# PMIx, hwloc, libevent) into $bundle/mpi.tar.xz for a machine without Open MPI
# (the GPU machine). The tree keeps Debian's layout under a root of its own;
# scripts/gpu/steps.sh's mpi_env unpacks it there and relocates it with OPAL_PREFIX
# and PMIX_INSTALL_PREFIX.
#   bash scripts/gpu-bundle-mpi.sh BUNDLE_DIR
set -euo pipefail
bundle=$1
command -v orterun >/dev/null || { echo "gpu-bundle-mpi: Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
arch=x86_64-linux-gnu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/mpi
mkdir -p "$root/usr/bin" "$root/usr/lib/$arch" "$root/usr/share"
cp -L /usr/bin/orterun "$root/usr/bin/orterun"
ln -s orterun "$root/usr/bin/mpirun"
cp -L /usr/bin/orted "$root/usr/bin/orted"
cp -a /usr/lib/$arch/openmpi "$root/usr/lib/$arch/"
cp -a /usr/lib/$arch/pmix2 "$root/usr/lib/$arch/"
rm -f "$root/usr/lib/$arch/pmix2/lib/libpmix.a"
rm -rf "$root/usr/lib/$arch/openmpi/include" "$root/usr/lib/$arch/pmix2/include"
cp -a /usr/share/openmpi "$root/usr/share/"
# The libraries those load that an Ubuntu machine without Open MPI lacks.
# Components whose libraries stay behind (UCX, libfabric, verbs, PSM) fail to
# load and are skipped; mpi_env picks the shared-memory and TCP transports.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libz\.|libucp|libucs|libuct|libucm|libfabric|libibverbs|librdmacm|libpsm|libefa|libnl|libcuda)'
find "$root" -type f \( -name '*.so*' -o -path '*/bin/*' \) | while read -r elf; do
  ldd "$elf" 2>/dev/null | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  [[ -e $root/usr/lib/$arch/$name ]] && continue
  case $path in */openmpi/lib/*|*/pmix2/lib/*) continue ;; esac
  cp -L "$path" "$root/usr/lib/$arch/$name"
done
tar -C "$stage" -cJf "$bundle/mpi.tar.xz" mpi
du -sh "$bundle/mpi.tar.xz"
