# The shared library's ABI and `cmake --install`: headers, libctrainer.a and
# libctrainer.so (SONAME libctrainer.so.<major>, exporting only the functions
# declared in include/ctrainer/*.h), the CMake package (ctrainer::ctrainer,
# ctrainer::static) and ctrainer.pc. The `ctrainer` tool installs itself
# (tools/CMakeLists.txt).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# ---------------------------------------------------------------- exports
file(GLOB CTRAINER_PUBLIC_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/ctrainer/*.h)
# Internal functions to export as well: set CTRAINER_EXTRA_EXPORTS before
# this file is included (a run-time loaded module calling back into the
# library needs its entry points visible).
set(CTRAINER_EXPORT_MAP ${PROJECT_BINARY_DIR}/ctrainer.map)
add_custom_command(OUTPUT ${CTRAINER_EXPORT_MAP}
  COMMAND ${CMAKE_COMMAND} "-DHEADERS=${CTRAINER_PUBLIC_HEADERS}"
    "-DEXTRA=${CTRAINER_EXTRA_EXPORTS}" -DOUT=${CTRAINER_EXPORT_MAP}
    -P ${PROJECT_SOURCE_DIR}/cmake/ExportMap.cmake
  DEPENDS ${CTRAINER_PUBLIC_HEADERS} ${PROJECT_SOURCE_DIR}/cmake/ExportMap.cmake
  COMMENT "Listing the public API for the shared library's version script"
  VERBATIM)
add_custom_target(ctrainer_export_map DEPENDS ${CTRAINER_EXPORT_MAP})
add_dependencies(ctrainer_shared ctrainer_export_map)
target_link_options(ctrainer_shared PRIVATE -Wl,--version-script=${CTRAINER_EXPORT_MAP})
set_property(TARGET ctrainer_shared APPEND PROPERTY LINK_DEPENDS ${CTRAINER_EXPORT_MAP})
set_target_properties(ctrainer_shared PROPERTIES VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR} EXPORT_NAME ctrainer)
set_target_properties(ctrainer_static PROPERTIES EXPORT_NAME static)
set_target_properties(ctrainer_deps PROPERTIES EXPORT_NAME deps)
foreach(t ctrainer_static ctrainer_shared)
  target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()

# ---------------------------------------------------------------- install
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ctrainer
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
# ------------------------------------------------------- dependencies
# What ctrainer_deps links, described for the package config (which finds
# it again) and for pkg-config. A pkg-config module is named by the prefix
# given to pkg_check_modules (cmake/Dependencies.cmake): a new one must be
# added to this table, or configuring stops here.
set(CTRAINER_PC_MODULE_OPENBLAS openblas)
set(CTRAINER_PC_MODULE_JANSSON jansson)
set(CTRAINER_PC_MODULE_CRYPTO libcrypto)
set(CTRAINER_PC_MODULE_PNG libpng)
set(CTRAINER_PC_MODULE_JPEG libjpeg)
set(CTRAINER_PC_MODULE_CYAML libcyaml)
set(CTRAINER_PC_MODULE_YAML yaml-0.1)
set(CTRAINER_PC_MODULE_DEFLATE libdeflate)
set(CTRAINER_PKG_MODULES "")      # VAR:module, for the package config
set(CTRAINER_PC_REQUIRES "zlib")  # pkg-config Requires.private
set(CTRAINER_PC_LIBS_PRIVATE "")  # pkg-config Libs.private
get_target_property(deps ctrainer_deps INTERFACE_LINK_LIBRARIES)
foreach(dep IN LISTS deps)
  if(dep MATCHES "^PkgConfig::(.+)$")
    set(module "${CTRAINER_PC_MODULE_${CMAKE_MATCH_1}}")
    if(NOT module)
      message(FATAL_ERROR "cmake/Install.cmake: add the pkg-config module of ${dep} "
        "(set(CTRAINER_PC_MODULE_${CMAKE_MATCH_1} <module>))")
    endif()
    list(APPEND CTRAINER_PKG_MODULES "${CMAKE_MATCH_1}:${module}")
    string(APPEND CTRAINER_PC_REQUIRES " ${module}")
  elseif(dep STREQUAL "OpenMP::OpenMP_C")
    string(APPEND CTRAINER_PC_LIBS_PRIVATE " ${OpenMP_C_FLAGS}")
  elseif(dep STREQUAL "Threads::Threads")
    string(APPEND CTRAINER_PC_LIBS_PRIVATE " -lpthread")
  elseif(dep STREQUAL "MPI::MPI_C")
    foreach(lib IN LISTS MPI_C_LIBRARIES)
      string(APPEND CTRAINER_PC_LIBS_PRIVATE " ${lib}")
    endforeach()
  elseif(dep MATCHES "^CUDA::(.+)$")
    string(APPEND CTRAINER_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -l${CMAKE_MATCH_1}")
  elseif(dep STREQUAL "m" OR dep STREQUAL "dl")
    string(APPEND CTRAINER_PC_LIBS_PRIVATE " -l${dep}")
  elseif(IS_ABSOLUTE "${dep}") # e.g. libnccl
    string(APPEND CTRAINER_PC_LIBS_PRIVATE " ${dep}")
  elseif(NOT dep STREQUAL "ZLIB::ZLIB")
    message(FATAL_ERROR "cmake/Install.cmake: describe the dependency ${dep} for the "
      "installed package")
  endif()
endforeach()
# compile definitions consumers see (CTRAINER_HAVE_CUDA, ...)
set(CTRAINER_PC_CFLAGS "")
get_target_property(defs ctrainer_deps INTERFACE_COMPILE_DEFINITIONS)
foreach(def IN LISTS defs)
  if(def)
    string(APPEND CTRAINER_PC_CFLAGS " -D${def}")
  endif()
endforeach()

install(TARGETS ctrainer_static ctrainer_shared ctrainer_deps EXPORT ctrainerTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(CTRAINER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ctrainer)
install(EXPORT ctrainerTargets NAMESPACE ctrainer:: DESTINATION ${CTRAINER_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ctrainerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ctrainerConfig.cmake INSTALL_DESTINATION ${CTRAINER_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ctrainerConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ctrainerConfig.cmake
  ${PROJECT_BINARY_DIR}/ctrainerConfigVersion.cmake DESTINATION ${CTRAINER_CMAKE_DIR})

# pkg-config: relocatable (paths relative to the .pc file)
file(RELATIVE_PATH CTRAINER_PC_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" CTRAINER_PC_PREFIX "${CTRAINER_PC_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ctrainer.pc.in ${PROJECT_BINARY_DIR}/ctrainer.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ctrainer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
