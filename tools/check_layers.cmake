# The layer check: no file includes a layer above its own (docs/architecture.md, "Layers").
#
#   cmake -DROOT=<source dir> -P tools/check_layers.cmake
#
# Every build runs it (the kvsim_layer_check target in CMakeLists.txt), so an upward #include fails
# `make` with the file, the line, the header and the layers that file may include. tests/ and fuzz/
# are not checked: they exercise every layer. The table below is the same one CMakeLists.txt links by:
#
#   core <- sim <- model <- traces, kernels <- policies <- replay <- sweep <- serve <- tools (the CLI),
#                                                                                    python (the module)
#                            kernels/validate: model + kernels
#
# A folder maps to the layer of its longest matching prefix.
cmake_minimum_required(VERSION 3.22)
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_layers: pass -DROOT=<source dir>")
endif()

# prefix -> layer (longest prefix first)
set(KVSIM_PREFIXES
  "traces/replay/=replay"
  "kernels/validate/=validate"
  "core/=core"
  "sim/=sim"
  "model/=model"
  "traces/=traces"
  "kernels/=kernels"
  "policies/=policies"
  "sweep/=sweep"
  "serve/=serve"
  "tools/=tools"
  "python/=tools")

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
set(ALLOW_tools    core sim model traces kernels validate policies replay sweep serve tools)

function(layer_of path out)
  set(layer "")
  foreach(entry ${KVSIM_PREFIXES})
    string(REPLACE "=" ";" kv "${entry}")
    list(GET kv 0 prefix)
    list(GET kv 1 name)
    string(LENGTH "${prefix}" n)
    string(SUBSTRING "${path}" 0 ${n} head)
    if(head STREQUAL prefix)
      set(layer ${name})
      break()
    endif()
  endforeach()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${ROOT}"
     "${ROOT}/core/*" "${ROOT}/sim/*" "${ROOT}/model/*" "${ROOT}/traces/*" "${ROOT}/kernels/*"
     "${ROOT}/policies/*" "${ROOT}/sweep/*" "${ROOT}/serve/*" "${ROOT}/tools/*"
     "${ROOT}/python/*")
list(FILTER files INCLUDE REGEX "\\.(cpp|hpp|h|cu|cuh|inc)$")

set(errors "")
set(count 0)
foreach(f ${files})
  layer_of("${f}" from)
  if(from STREQUAL "")
    continue()
  endif()
  file(STRINGS "${ROOT}/${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(inc ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" header "${inc}")
    layer_of("${header}" to)
    if(to STREQUAL "")
      continue()  # a header beside the file, or not one of ours
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
