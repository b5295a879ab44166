# Scratch builds only: configure with -DCMAKE_PROJECT_INCLUDE=<this file> to
# build the CUDA kernel library, its tests and benchmark while no
# plugins/common/CMakeLists.txt adds plugins/common/cuda yet. Harmless once it
# does (the library target then exists and nothing is added twice).
function(encgraph_common_cuda_scratch)
  if(ENCGRAPH_HAVE_CUDA AND NOT TARGET encgraph_common_cuda)
    add_subdirectory(${PROJECT_SOURCE_DIR}/plugins/common/cuda
                     ${CMAKE_BINARY_DIR}/plugins/common/cuda)
  endif()
endfunction()
cmake_language(DEFER CALL encgraph_common_cuda_scratch)
