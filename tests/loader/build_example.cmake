# ctest fixture (cmake -P): installs the encgraph build ENCGRAPH_BUILD_DIR into
# WORK_DIR/prefix, then configures and builds the examples against it with
# find_package(encgraph), warnings as errors: EXAMPLE_SOURCE_DIR
# (examples/minimal_plugin) in WORK_DIR/build and its sibling two_path_plugin in
# WORK_DIR/build-two_path. Then builds the minimal example against the BUILD
# tree's package (WORK_DIR/build-from-tree), which must work without installing.
# Starts from scratch every time.
foreach(var ENCGRAPH_BUILD_DIR EXAMPLE_SOURCE_DIR WORK_DIR GENERATOR C_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build_example.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)
set(two_path_source ${EXAMPLE_SOURCE_DIR}/../two_path_plugin)
set(two_path_build ${WORK_DIR}/build-two_path)
set(tree_build ${WORK_DIR}/build-from-tree)
file(REMOVE_RECURSE ${prefix} ${build} ${two_path_build} ${tree_build} ${WORK_DIR}/plugin-prefix)

# The examples are C++ (the SDK): use the compiler this build used.
file(STRINGS ${ENCGRAPH_BUILD_DIR}/CMakeCache.txt cxx REGEX "^CMAKE_CXX_COMPILER:")
string(REGEX REPLACE "^[^=]*=" "" CXX_COMPILER "${cxx}")
set(strict "-DCMAKE_CXX_FLAGS=-Wall -Wextra -pedantic -Werror")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

# Configures and builds `source` in `dir` against `package_prefix`; checks that
# find_package used `expect_dir` and that libencgraph_<plugin>.so was made.
function(build_example what source dir package_prefix expect_dir plugin)
  run("configure ${what}" ${CMAKE_COMMAND} -S ${source} -B ${dir} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${package_prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${strict})
  run("build ${what}" ${CMAKE_COMMAND} --build ${dir})
  if(NOT EXISTS ${dir}/libencgraph_${plugin}.so)
    message(FATAL_ERROR "${what} built, but ${dir}/libencgraph_${plugin}.so is missing")
  endif()
  # find_package must have used the package meant, not some other encgraph.
  file(STRINGS ${dir}/CMakeCache.txt found REGEX "^encgraph_DIR:")
  if(NOT found MATCHES "^encgraph_DIR:PATH=${expect_dir}")
    message(FATAL_ERROR "${what} found encgraph outside ${expect_dir}: ${found}")
  endif()
endfunction()

run("install encgraph to ${prefix}"
  ${CMAKE_COMMAND} --install ${ENCGRAPH_BUILD_DIR} --prefix ${prefix})
foreach(header encgraph/plugin_api.h encgraph/sdk/sdk.hpp encgraph/sdk/plugin.hpp)
  if(NOT EXISTS ${prefix}/include/${header})
    message(FATAL_ERROR "the install has no include/${header}")
  endif()
endforeach()
build_example("the minimal example" ${EXAMPLE_SOURCE_DIR} ${build} ${prefix} ${prefix}/ minimal)
build_example("the two-path example" ${two_path_source} ${two_path_build} ${prefix} ${prefix}/
  two_path)

# encgraph_add_plugin's install rule: the plugin lands in the package's layout.
run("install the example"
  ${CMAKE_COMMAND} --install ${build} --prefix ${WORK_DIR}/plugin-prefix)
file(GLOB installed ${WORK_DIR}/plugin-prefix/*/encgraph/plugins/libencgraph_minimal.so)
if(NOT installed)
  message(FATAL_ERROR "the example installed, but not as <prefix>/<libdir>/encgraph/plugins/"
                      "libencgraph_minimal.so")
endif()

# The build tree's package (no install): find_package(encgraph) and
# encgraph_add_plugin work from it (it used to fail with "Unknown CMake command
# encgraph_add_plugin").
build_example("the minimal example against the build tree" ${EXAMPLE_SOURCE_DIR} ${tree_build}
  ${ENCGRAPH_BUILD_DIR} ${ENCGRAPH_BUILD_DIR} minimal)
