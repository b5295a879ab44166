# encgraph_add_kit_plugin(<folder>
#     MODEL <sources...>              # the model library (CPU path, always built)
#     CUDA <sources...>               # added when the kit's CUDA kernels are built
#     [NO_CUDA <sources...>]          # added otherwise
#     [DEFINE <macro>]                # <macro>=1 for the model and its users with CUDA
#     PLUGINS <name> <source> [...])  # one plugin module per pair
#
# The model code of a plugin on the kit is a static library,
# encgraph_<folder>_model, linked into its plugin modules and into the tests that
# check its parts. CPU path always; CUDA path when the kit's CUDA kernels
# (plugins/encoder_kit/cuda, target encgraph_encoder_kit_cuda) are built, and
# then ENCODER_KIT_HAVE_CUDA=1 for the model and its users (the kit's
# CudaIfBuilt, encoder_kit/device_backend.hpp, reads it).
function(encgraph_add_kit_plugin folder)
  cmake_parse_arguments(ARG "" "DEFINE" "MODEL;CUDA;NO_CUDA;PLUGINS" ${ARGN})
  set(model encgraph_${folder}_model)
  add_library(${model} STATIC ${ARG_MODEL})
  target_include_directories(${model} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${model} PUBLIC encgraph_encoder_kit)
  set_target_properties(${model} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  encgraph_warnings(${model})

  set(cuda OFF)
  if(ENCGRAPH_HAVE_CUDA AND TARGET encgraph_encoder_kit_cuda)
    set(cuda ON)
    target_sources(${model} PRIVATE ${ARG_CUDA})
    target_link_libraries(${model} PUBLIC encgraph_encoder_kit_cuda CUDA::cudart)
    target_compile_definitions(${model} PUBLIC ENCODER_KIT_HAVE_CUDA=1)
    if(ARG_DEFINE)
      target_compile_definitions(${model} PUBLIC ${ARG_DEFINE}=1)
    endif()
    target_compile_options(${model} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
  elseif(ARG_NO_CUDA)
    target_sources(${model} PRIVATE ${ARG_NO_CUDA})
  endif()

  list(LENGTH ARG_PLUGINS n)
  math(EXPR odd "${n} % 2")
  if(n EQUAL 0 OR odd)
    message(FATAL_ERROR "encgraph_add_kit_plugin(${folder}): PLUGINS takes <name> <source> pairs")
  endif()
  set(names "")
  while(ARG_PLUGINS)
    list(POP_FRONT ARG_PLUGINS name source)
    encgraph_add_plugin(${name} SOURCES ${source} LINK ${model})
    encgraph_warnings(encgraph_plugin_${name})
    list(APPEND names ${name})
  endwhile()
  list(JOIN names ", " names)
  message(STATUS "${folder} plugins (${names}): CUDA path ${cuda}")
endfunction()
