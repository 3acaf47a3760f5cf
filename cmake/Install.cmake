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
set(CTRAINER_PC_REQUIRES "openblas jansson libpng libjpeg zlib libcyaml yaml-0.1")
if(CTRAINER_HAVE_MPI)
  string(APPEND CTRAINER_PC_REQUIRES " ompi-c")
endif()
file(RELATIVE_PATH CTRAINER_PC_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" CTRAINER_PC_PREFIX "${CTRAINER_PC_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ctrainer.pc.in ${PROJECT_BINARY_DIR}/ctrainer.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ctrainer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
