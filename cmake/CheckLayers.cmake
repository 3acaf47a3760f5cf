# Fails when a layer includes a header of a layer above it, or a private
# header of another folder. Run as `cmake -DROOT=<source dir> -P
# CheckLayers.cmake` (the build runs it on every build, before the library).
#
# The layers, bottom-up (DESIGN.md): each may include the public headers of
# the layers listed for it, and private headers inside its own folder only.
# Calls are checked by the link: every layer also links alone as a shared
# library with --no-undefined (CMakeLists.txt, CTRAINER_LAYER_CHECK).

cmake_minimum_required(VERSION 3.22)

# public header (include/ctrainer/<name>.h) -> the layer that owns it
set(owner_status tensor)
set(owner_tensor tensor)
set(owner_tensor_optim tensor)
set(owner_io tensor)
set(owner_table tensor)
set(owner_nn nn)
set(owner_optim optim)
set(owner_data data)
set(owner_runtime runtime)
set(owner_metrics metrics)
set(owner_callback trainer)
set(owner_trainer trainer)
set(owner_callbacks callbacks)
set(owner_ctrainer tools) # the umbrella: programs only

# layer -> the layers whose public headers it may include
set(uses_tensor tensor)
set(uses_nn tensor nn)
set(uses_data tensor data)
set(uses_optim tensor nn optim)
set(uses_runtime tensor nn optim data runtime)
set(uses_metrics ${uses_runtime} metrics)
set(uses_trainer ${uses_metrics} trainer)
set(uses_callbacks ${uses_trainer} callbacks)
set(uses_tools ${uses_callbacks} tools)

set(layer_dirs tensor nn optim data runtime metrics trainer callbacks tools)
set(errors "")

# Checks every quoted include of file (which belongs to layer, rooted at dir).
function(check_file file layer dir)
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  get_filename_component(here ${file} DIRECTORY)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    if(inc MATCHES "^ctrainer/([a-z_]+)\\.h$")
      set(h ${CMAKE_MATCH_1})
      set(o ${owner_${h}})
      if(NOT o)
        list(APPEND errors "${file}: includes ${inc}, a public header no layer owns (cmake/CheckLayers.cmake)")
      elseif(NOT o IN_LIST uses_${layer})
        list(APPEND errors "${file}: layer ${layer} includes ${inc} of layer ${o}, which is not below it")
      endif()
    else()
      get_filename_component(target ${here}/${inc} ABSOLUTE)
      string(FIND "${target}" "${dir}/" at)
      if(NOT at EQUAL 0)
        list(APPEND errors "${file}: includes \"${inc}\", a private header outside ${dir}")
      endif()
    endif()
  endforeach()
  set(errors ${errors} PARENT_SCOPE)
endfunction()

foreach(layer IN LISTS layer_dirs)
  set(dir ${ROOT}/${layer})
  file(GLOB_RECURSE sources ${dir}/*.c ${dir}/*.h ${dir}/*.cu ${dir}/*.cuh)
  foreach(f IN LISTS sources)
    check_file(${f} ${layer} ${dir})
  endforeach()
endforeach()

# the public headers themselves
file(GLOB headers ${ROOT}/include/ctrainer/*.h)
foreach(f IN LISTS headers)
  get_filename_component(h ${f} NAME_WE)
  set(layer ${owner_${h}})
  if(NOT layer)
    list(APPEND errors "${f}: no layer owns this header (add it to cmake/CheckLayers.cmake)")
  else()
    check_file(${f} ${layer} ${ROOT}/include/ctrainer)
  endif()
endforeach()

if(errors)
  list(JOIN errors "\n  " msg)
  message(FATAL_ERROR "layer violations:\n  ${msg}")
endif()
