# ctest fixture (cmake -P): installs the encgraph build ENCGRAPH_BUILD_DIR into
# WORK_DIR/prefix, then configures and builds EXAMPLE_SOURCE_DIR against that
# prefix in WORK_DIR/build, warnings as errors. Starts from scratch every time.
foreach(var ENCGRAPH_BUILD_DIR EXAMPLE_SOURCE_DIR WORK_DIR GENERATOR C_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build_example.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${prefix} ${build} ${WORK_DIR}/plugin-prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

run("install encgraph to ${prefix}"
  ${CMAKE_COMMAND} --install ${ENCGRAPH_BUILD_DIR} --prefix ${prefix})
run("configure the example"
  ${CMAKE_COMMAND} -S ${EXAMPLE_SOURCE_DIR} -B ${build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER}
    "-DCMAKE_C_FLAGS=-Wall -Wextra -pedantic -Werror")
run("build the example" ${CMAKE_COMMAND} --build ${build})
if(NOT EXISTS ${build}/libencgraph_minimal.so)
  message(FATAL_ERROR "the example built, but ${build}/libencgraph_minimal.so is missing")
endif()

# encgraph_add_plugin's install rule: the plugin lands in the package's layout.
run("install the example"
  ${CMAKE_COMMAND} --install ${build} --prefix ${WORK_DIR}/plugin-prefix)
file(GLOB installed ${WORK_DIR}/plugin-prefix/*/encgraph/plugins/libencgraph_minimal.so)
if(NOT installed)
  message(FATAL_ERROR "the example installed, but not as <prefix>/<libdir>/encgraph/plugins/"
                      "libencgraph_minimal.so")
endif()

# find_package must have used the scratch prefix, not some other encgraph.
file(STRINGS ${build}/CMakeCache.txt found REGEX "^encgraph_DIR:")
if(NOT found MATCHES "^encgraph_DIR:PATH=${prefix}/")
  message(FATAL_ERROR "the example found encgraph outside ${prefix}: ${found}")
endif()
