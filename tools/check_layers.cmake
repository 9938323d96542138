# The layer check: no file includes a layer above its own (docs/architecture.md, "Layers").
#
#   cmake -DROOT=<source dir> -P tools/check_layers.cmake
#
# Every build runs it (the kvsim_layer_check target in CMakeLists.txt), so an upward #include fails
# `make` with the file, the line, the header and the layers that file may include.
#
# Each top-level folder is exactly one layer, named like the folder: the layer of a file, or of an
# included header, is the first component of its path. The table below is the same one CMakeLists.txt
# links by:
#
#   core <- sim <- model <- traces, kernels <- policies <- replay <- sweep <- serve <- report <- tools (the CLI),
#                           validate (model + kernels)                                         python (the module)
#
# tests/ and fuzz/ exercise every layer, so their own includes are not checked; but they are layers
# too, at the top, so a library file that includes a test header (say, a test-only policy) fails like
# any other upward include.
cmake_minimum_required(VERSION 3.22)
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_layers: pass -DROOT=<source dir>")
endif()

set(KVSIM_LAYERS core sim model traces kernels validate policies replay sweep serve report tools python tests fuzz)

# layer -> the layers its files may include (itself included)
set(ALLOW_core     core)
set(ALLOW_sim      core sim)
set(ALLOW_model    core sim model)
set(ALLOW_traces   core sim model traces)
set(ALLOW_kernels  core kernels)
set(ALLOW_validate core sim model kernels validate)
set(ALLOW_policies core sim model traces kernels policies)
set(ALLOW_replay   core sim model traces kernels policies replay)
set(ALLOW_sweep    core sim model traces kernels policies replay sweep)
set(ALLOW_serve    core sim model traces kernels policies replay sweep serve)
set(ALLOW_report   core sim model traces kernels policies replay sweep serve report)
set(ALLOW_tools    core sim model traces kernels validate policies replay sweep serve report tools)
set(ALLOW_python   core sim model traces kernels policies replay sweep serve report python)
# tests and fuzz: not checked (see above)

# The layer of a path: its first component when that names a layer, else "" (a header beside the file,
# or not one of ours).
function(layer_of path out)
  string(REGEX MATCH "^[^/]+/" head "${path}")
  string(REGEX REPLACE "/$" "" head "${head}")
  set(layer "")
  if(head IN_LIST KVSIM_LAYERS)
    set(layer ${head})
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

set(globs "")
foreach(l ${KVSIM_LAYERS})
  if(NOT l STREQUAL "tests" AND NOT l STREQUAL "fuzz")
    list(APPEND globs "${ROOT}/${l}/*")
  endif()
endforeach()
file(GLOB_RECURSE files RELATIVE "${ROOT}" ${globs})
list(FILTER files INCLUDE REGEX "\\.(cpp|hpp|h|cu|cuh|inc)$")

set(errors "")
set(count 0)
foreach(f ${files})
  layer_of("${f}" from)
  file(STRINGS "${ROOT}/${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(inc ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" header "${inc}")
    layer_of("${header}" to)
    if(to STREQUAL "")
      continue()
    endif()
    list(FIND ALLOW_${from} ${to} ok)
    if(ok EQUAL -1)
      # Find the line number only for the offending include (file(STRINGS) does not give it).
      file(STRINGS "${ROOT}/${f}" all_lines)
      set(line 0)
      foreach(l IN LISTS all_lines)
        math(EXPR line "${line} + 1")
        if(l STREQUAL inc)
          break()
        endif()
      endforeach()
      string(REPLACE ";" ", " allowed "${ALLOW_${from}}")
      string(APPEND errors "${f}:${line}: includes \"${header}\" (layer ${to}); layer ${from} may include only: ${allowed}\n")
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
endforeach()

if(count GREATER 0)
  # One unwrapped line per include (a FATAL_ERROR message would be re-wrapped by CMake), then the failure.
  message(NOTICE "${errors}")
  message(FATAL_ERROR "kvsim layer check: ${count} include(s) point up the layers (docs/architecture.md, Layers)")
endif()
