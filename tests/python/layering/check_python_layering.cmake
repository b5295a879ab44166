# The Python module is a front end of the embedding API, like the encgraph
# command, not a user of the command: it may use core and the front-end
# library (frontend/), never the CLI library (host/, encgraph_cli_lib).
# Run with cmake -P and
#   LINKS       a file listing every target and include folder the module is
#               built with, direct and transitive (written by tests/python),
#   SOURCES     the module's source folder (python/src),
#   CLI_SOURCES the CLI library's source folder (host/src),
#   MODULE      the built module, whose defined symbols are read with NM.
# Each finding names the file and the fix; any finding fails the check.
cmake_minimum_required(VERSION 3.20)

foreach(var LINKS SOURCES CLI_SOURCES MODULE NM)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_python_layering: -D${var}=... is required")
  endif()
endforeach()
set(findings "")

# 1. Linked targets and include folders.
file(STRINGS ${LINKS} entries)
foreach(entry ${entries})
  if(entry STREQUAL "encgraph_cli_lib" OR entry STREQUAL "${CLI_SOURCES}")
    string(APPEND findings "${LINKS}: the module is built with '${entry}' (the CLI library); "
      "link encgraph_frontend and move what it needs from host/ into frontend/\n")
  endif()
endforeach()

# 2. Includes of the CLI's headers (by their path under host/src).
file(GLOB_RECURSE cli_headers RELATIVE ${CLI_SOURCES} ${CLI_SOURCES}/*.hpp)
file(GLOB sources ${SOURCES}/*.cpp ${SOURCES}/*.hpp)
foreach(source ${sources})
  file(STRINGS ${source} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line ${includes})
    string(REGEX REPLACE "^[^<\"]*[<\"]([^>\"]+)[>\"].*$" "\\1" header "${line}")
    if(header IN_LIST cli_headers AND NOT EXISTS ${SOURCES}/${header})
      string(APPEND findings "${source}: includes the CLI header '${header}' "
        "(${CLI_SOURCES}/${header}); use the front-end library's headers instead\n")
    endif()
  endforeach()
endforeach()

# 3. Code of the CLI in the module: symbols only the CLI library defines.
execute_process(COMMAND ${NM} -C --defined-only ${MODULE} OUTPUT_VARIABLE symbols
  RESULT_VARIABLE nm_failed)
if(nm_failed)
  string(APPEND findings "${MODULE}: ${NM} could not read its symbols\n")
endif()
foreach(name run_subcommand parse_command_line load_command_config join_job)
  if(symbols MATCHES "encgraph::host::${name}\\(")
    string(APPEND findings "${MODULE}: defines encgraph::host::${name}, the CLI's; "
      "the module must not hold CLI code\n")
  endif()
endforeach()

if(findings)
  # NOTICE prints the lines as they are (an error's text is rewrapped).
  message(NOTICE "${findings}")
  message(FATAL_ERROR "the Python module depends on the CLI (the lines above)")
endif()
message(STATUS "the Python module uses core and encgraph_frontend only")
