# The encgraph CMake package, in two places, so an out-of-tree plugin can
#   find_package(encgraph CONFIG REQUIRED)
#   encgraph_add_plugin(myplugin SOURCES myplugin.cpp)
# against an install prefix (cmake --install) or against this build tree
# (-Dencgraph_DIR=<build> or CMAKE_PREFIX_PATH=<build>).
include(CMakePackageConfigHelpers)
set(ENCGRAPH_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/encgraph)

# Installed package: generated outside the build tree's root, so find_package
# pointed at the build tree never finds this copy (it would include files that
# exist only once installed).
set(_encgraph_install_pkg ${CMAKE_BINARY_DIR}/cmake/install-package)
install(EXPORT encgraphTargets NAMESPACE encgraph:: DESTINATION ${ENCGRAPH_CMAKE_INSTALL_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/encgraphConfig.cmake.in
  ${_encgraph_install_pkg}/encgraphConfig.cmake
  INSTALL_DESTINATION ${ENCGRAPH_CMAKE_INSTALL_DIR}
  PATH_VARS ENCGRAPH_INSTALL_PLUGIN_DIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/encgraphConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${_encgraph_install_pkg}/encgraphConfig.cmake
  ${CMAKE_BINARY_DIR}/encgraphConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/EncgraphPlugin.cmake
  ${CMAKE_CURRENT_LIST_DIR}/encgraph_plugin.map
  DESTINATION ${ENCGRAPH_CMAKE_INSTALL_DIR})

# Build-tree package: the targets of this build, encgraph_add_plugin from the
# source tree; plugins built against it land in their own build directory.
export(EXPORT encgraphTargets NAMESPACE encgraph:: FILE ${CMAKE_BINARY_DIR}/encgraphTargets.cmake)
configure_file(${CMAKE_CURRENT_LIST_DIR}/encgraphBuildTreeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/encgraphConfig.cmake @ONLY)
