# Installs an exported CMake package so out-of-tree plugins can
#   find_package(encgraph CONFIG REQUIRED)
#   encgraph_add_plugin(myplugin SOURCES myplugin.c)
include(CMakePackageConfigHelpers)
set(ENCGRAPH_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/encgraph)

install(EXPORT encgraphTargets NAMESPACE encgraph:: DESTINATION ${ENCGRAPH_CMAKE_INSTALL_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/encgraphConfig.cmake.in
  ${CMAKE_BINARY_DIR}/encgraphConfig.cmake
  INSTALL_DESTINATION ${ENCGRAPH_CMAKE_INSTALL_DIR}
  PATH_VARS ENCGRAPH_INSTALL_PLUGIN_DIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/encgraphConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${CMAKE_BINARY_DIR}/encgraphConfig.cmake
  ${CMAKE_BINARY_DIR}/encgraphConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/EncgraphPlugin.cmake
  ${CMAKE_CURRENT_LIST_DIR}/encgraph_plugin.map
  DESTINATION ${ENCGRAPH_CMAKE_INSTALL_DIR})
