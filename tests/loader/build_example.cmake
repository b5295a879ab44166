# ctest fixture (cmake -P): installs the encgraph build ENCGRAPH_BUILD_DIR into
# WORK_DIR/prefix, then configures and builds the examples against it with
# find_package(encgraph), warnings as errors: EXAMPLE_SOURCE_DIR
# (examples/minimal_plugin) in WORK_DIR/build and its siblings two_path_plugin,
# capture_axis_plugin and two_path_newcomer in WORK_DIR/build-<name>, the last
# two also with their deliberately broken variant (a compile definition) in
# WORK_DIR/build-<name>-broken. Then builds the minimal example against the BUILD
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
set(newcomer_examples capture_axis_plugin two_path_newcomer)
set(broken_definition_capture_axis_plugin CAPTURE_AXIS_FIRST_ITEM_ONLY)
set(broken_definition_two_path_newcomer TWO_PATH_NEWCOMER_ZERO_OFFSETS)
set(newcomer_builds "")
foreach(example ${newcomer_examples})
  list(APPEND newcomer_builds ${WORK_DIR}/build-${example} ${WORK_DIR}/build-${example}-broken)
endforeach()
file(REMOVE_RECURSE ${prefix} ${build} ${two_path_build} ${tree_build} ${WORK_DIR}/plugin-prefix
  ${newcomer_builds})

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
# An extra argument is added to the compile flags (a -D for a broken variant).
function(build_example what source dir package_prefix expect_dir plugin)
  set(flags "${strict}")
  if(ARGN)
    set(flags "${strict} ${ARGN}")
  endif()
  run("configure ${what}" ${CMAKE_COMMAND} -S ${source} -B ${dir} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${package_prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${flags})
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
# The examples written from the docs alone, and their broken variants
# (tests/loader/check_*.py run them).
foreach(example ${newcomer_examples})
  string(REGEX REPLACE "_plugin$" "" plugin ${example})
  set(source ${EXAMPLE_SOURCE_DIR}/../${example})
  build_example("examples/${example}" ${source} ${WORK_DIR}/build-${example} ${prefix} ${prefix}/
    ${plugin})
  build_example("examples/${example} (broken)" ${source} ${WORK_DIR}/build-${example}-broken
    ${prefix} ${prefix}/ ${plugin} -D${broken_definition_${example}})
endforeach()

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
