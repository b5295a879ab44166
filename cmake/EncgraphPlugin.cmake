# encgraph_add_plugin(<name> SOURCES <files...> [LINK <libs...>] [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
#
# Builds an encgraph plugin: a shared library named libencgraph_<name>.so with
# hidden visibility whose only exported symbol is the ABI entry point. Used both
# inside this tree and, through find_package(encgraph), by out-of-tree plugins.
set(_ENCGRAPH_PLUGIN_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})

function(encgraph_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "encgraph_add_plugin(${name}): SOURCES is required")
  endif()
  set(target encgraph_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  # The ABI header, and the header-only C++17 SDK (<encgraph/sdk/...>): include
  # paths only, so a C plugin is unaffected.
  if(TARGET encgraph::sdk)
    target_link_libraries(${target} PRIVATE encgraph::sdk)
  elseif(TARGET encgraph::plugin_api)
    target_link_libraries(${target} PRIVATE encgraph::plugin_api)
  else()
    target_link_libraries(${target} PRIVATE encgraph_plugin_api)
  endif()
  if(ARG_LINK)
    target_link_libraries(${target} PRIVATE ${ARG_LINK})
  endif()
  set(version_script ${_ENCGRAPH_PLUGIN_CMAKE_DIR}/encgraph_plugin.map)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME encgraph_${name}
    PREFIX lib
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${version_script})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${version_script}")
  # Every symbol resolved at link time, except in the sanitizer build: there
  # the runtime's symbols come from the executable that loads the plugin
  # (cmake/EncgraphSanitize.cmake).
  if(NOT ENCGRAPH_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED ENCGRAPH_BUILD_PLUGIN_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ENCGRAPH_BUILD_PLUGIN_DIR})
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED ENCGRAPH_INSTALL_PLUGIN_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ENCGRAPH_INSTALL_PLUGIN_DIR})
  endif()
endfunction()
