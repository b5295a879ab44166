# Sourced on the GPU machine: unpacks the Open MPI runtime gpu-bundle-mpi.sh
# packed (once) and sets the environment that relocates it, then
# ENCGRAPH_MPIRUN to the mpirun command line to use (without -np):
#   source scripts/gpu/mpi_env.sh gpu-bundle && $ENCGRAPH_MPIRUN -np 2 ...
# With Open MPI installed system-wide, that one is used instead.
_eg_bundle=$(cd "${1:-gpu-bundle}" && pwd)
if command -v mpirun >/dev/null 2>&1 && [[ ! -f $_eg_bundle/mpi.tar.xz ]]; then
  ENCGRAPH_MPIRUN="mpirun --allow-run-as-root --oversubscribe"
else
  if [[ ! -x $_eg_bundle/mpi/usr/bin/orterun ]]; then
    tar -C "$_eg_bundle" -xJf "$_eg_bundle/mpi.tar.xz"
  fi
  _eg_usr=$_eg_bundle/mpi/usr
  _eg_arch=x86_64-linux-gnu
  export OPAL_PREFIX=$_eg_usr  # Open MPI finds its components, help and orted here
  export PMIX_INSTALL_PREFIX=$_eg_usr/lib/$_eg_arch/pmix2
  export PATH=$_eg_usr/bin:$PATH
  export LD_LIBRARY_PATH=$_eg_usr/lib/$_eg_arch:$_eg_usr/lib/$_eg_arch/openmpi/lib:$_eg_usr/lib/$_eg_arch/pmix2/lib:${LD_LIBRARY_PATH:-}
  # Shared memory and TCP only (the bundle leaves UCX and libfabric out), and
  # quiet about the components that therefore cannot load.
  export OMPI_MCA_pml=ob1
  export OMPI_MCA_btl=self,vader,tcp
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_mca_base_component_show_load_errors=0
  export OMPI_MCA_osc=^ucx
  export PMIX_MCA_pcompress_base_silence_warning=1
  # Root in a container: Open MPI refuses root unless told.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  ENCGRAPH_MPIRUN="$_eg_usr/bin/mpirun --oversubscribe -x LD_LIBRARY_PATH -x OPAL_PREFIX -x PMIX_INSTALL_PREFIX -x PMIX_MCA_pcompress_base_silence_warning -x ENCGRAPH_PLUGIN_PATH -x ENCGRAPH_CACHE_DIR -x NCCL_NVLS_ENABLE -x PATH"
fi
export ENCGRAPH_MPIRUN
