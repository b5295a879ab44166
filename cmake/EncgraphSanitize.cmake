# ENCGRAPH_SANITIZE: the CPU build under AddressSanitizer and
# UndefinedBehaviorSanitizer (plus float-cast-overflow), every report fatal.
# ENCGRAPH_FUZZ: the same flags, plus the libFuzzer targets of fuzz/ (clang
# only). docs/testing.md says how CI uses both.
#
# The runtime: clang links it statically into executables, which export its
# symbols to what they dlopen; shared libraries (libencgraph.so, the plugins)
# are instrumented but carry no runtime of their own, so every process has
# exactly one. (gcc links libasan.so into both: one runtime too.)
set(_ENCGRAPH_SANITIZE_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})

# Gives every executable of this tree the runtime options of
# sanitizer_defaults.c (allocator_may_return_null=1, ...), so that ctest, the
# hostile suite and a developer's own runs agree without exporting anything.
# Called once at the end of the top-level CMakeLists, when all targets exist.
function(encgraph_sanitizer_defaults)
  if(NOT ENCGRAPH_SANITIZE)
    return()
  endif()
  set(dirs ${CMAKE_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target ${targets})
      get_target_property(type ${target} TYPE)
      if(type STREQUAL "EXECUTABLE")
        target_sources(${target} PRIVATE ${_ENCGRAPH_SANITIZE_CMAKE_DIR}/sanitizer_defaults.c)
      endif()
    endforeach()
  endwhile()
endfunction()

if(ENCGRAPH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ENCGRAPH_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16")
  endif()
  set(ENCGRAPH_SANITIZE ON CACHE BOOL "" FORCE)  # the fuzzed libraries need the sanitizers
endif()
if(NOT ENCGRAPH_SANITIZE)
  return()
endif()

if(ENCGRAPH_WITH_CUDA)
  message(FATAL_ERROR "ENCGRAPH_SANITIZE builds the CPU path only: add -DENCGRAPH_WITH_CUDA=OFF "
                      "(the sanitizers do not see into CUDA kernels)")
endif()
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "^(Clang|GNU)$")
  message(FATAL_ERROR "ENCGRAPH_SANITIZE needs clang or gcc, not ${CMAKE_CXX_COMPILER_ID}")
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 16)
  # The sources capture structured bindings in lambdas (C++20), which gcc and
  # clang 16 accept and clang 14 (Debian 12's default) rejects.
  message(FATAL_ERROR "clang ${CMAKE_CXX_COMPILER_VERSION} cannot build encgraph (C++20 lambdas "
                      "capturing structured bindings need clang 16): install clang-16 and "
                      "libclang-rt-16-dev (scripts/setup-deps.sh) and configure with "
                      "-DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16")
endif()

# -DCMAKE_BUILD_TYPE=Sanitize: -O1 (ASan's advice: fast enough, exact
# stacks) with line tables only (symbolized reports without full debug info,
# which would double the build), assertions on.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(_encgraph_sanitize_opt "-O1 -gline-tables-only")
else()
  set(_encgraph_sanitize_opt "-O1 -g1")
endif()
foreach(lang C CXX)  # project() leaves them empty for a build type it does not know
  if(NOT CMAKE_${lang}_FLAGS_SANITIZE)
    set(CMAKE_${lang}_FLAGS_SANITIZE "${_encgraph_sanitize_opt}" CACHE STRING
      "${lang} flags of the Sanitize build type" FORCE)
  endif()
endforeach()

set(ENCGRAPH_SANITIZE_FLAGS
  -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
  -fno-omit-frame-pointer)
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${ENCGRAPH_SANITIZE_FLAGS}>")
add_link_options("$<$<LINK_LANGUAGE:C,CXX>:${ENCGRAPH_SANITIZE_FLAGS}>")
message(STATUS "encgraph: sanitizers on (${ENCGRAPH_SANITIZE_FLAGS})")
