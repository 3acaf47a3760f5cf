# Finds the libraries ctrainer links and exposes them as the INTERFACE target
# ctrainer_deps. Sets CTRAINER_HAVE_CUDA, CTRAINER_HAVE_SBGEMM and
# CTRAINER_DEFINITIONS.
find_package(PkgConfig REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS C)
find_package(Threads REQUIRED)
# The system OpenBLAS (Debian's pthread build). Its OpenMP build was measured
# too (docs/benchmarks.md): it makes every small GEMM an OpenMP fork/join,
# which costs hundreds of microseconds on small VMs.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
set(OPENBLAS_TARGET PkgConfig::OPENBLAS)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)  # safetensors headers
pkg_check_modules(CRYPTO REQUIRED IMPORTED_TARGET libcrypto) # checkpoint SHA-256
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)       # image datasets
pkg_check_modules(JPEG REQUIRED IMPORTED_TARGET libjpeg)
find_package(ZLIB REQUIRED)                                  # gzip'd IDX files
pkg_check_modules(DEFLATE REQUIRED IMPORTED_TARGET libdeflate) # their fast path
pkg_check_modules(CYAML REQUIRED IMPORTED_TARGET libcyaml)   # config files
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)    # config error lines

add_library(ctrainer_deps INTERFACE)
target_link_libraries(ctrainer_deps INTERFACE ${OPENBLAS_TARGET} PkgConfig::JANSSON
  PkgConfig::CRYPTO PkgConfig::PNG PkgConfig::JPEG ZLIB::ZLIB PkgConfig::DEFLATE PkgConfig::CYAML PkgConfig::YAML OpenMP::OpenMP_C
  Threads::Threads m)
set(CTRAINER_DEFINITIONS "")

# Debian's OpenBLAS declares cblas_sbgemm in cblas.h but may not build it:
# only a link test tells.
include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_INCLUDES ${OPENBLAS_INCLUDE_DIRS})
set(CMAKE_REQUIRED_LINK_OPTIONS ${OPENBLAS_LDFLAGS})
set(CMAKE_REQUIRED_LIBRARIES ${OPENBLAS_LINK_LIBRARIES})
check_c_source_compiles("
#include <cblas.h>
int main(void) { bfloat16 a = 0, b = 0; float c = 0;
  cblas_sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  return (int)c; }" CTRAINER_HAVE_SBGEMM)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
unset(CMAKE_REQUIRED_LIBRARIES)
if(CTRAINER_HAVE_SBGEMM)
  list(APPEND CTRAINER_DEFINITIONS CTRAINER_HAVE_SBGEMM)
else()
  set(CTRAINER_HAVE_SBGEMM OFF)
endif()

# mpirun, which `ctrainer launch` and runtime_launch run: found on PATH at
# run time, this one when PATH has none.
find_program(CTRAINER_MPIEXEC NAMES mpirun mpiexec)
if(CTRAINER_MPIEXEC)
  list(APPEND CTRAINER_DEFINITIONS "CTRAINER_MPIEXEC=\"${CTRAINER_MPIEXEC}\"")
endif()

# MPI (multi-process training; used by the runtime layer): AUTO builds it
# when an MPI implementation is found.
set(CTRAINER_HAVE_MPI OFF)
if(NOT CTRAINER_MPI STREQUAL "OFF")
  if(CTRAINER_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    target_link_libraries(ctrainer_deps INTERFACE MPI::MPI_C)
    list(APPEND CTRAINER_DEFINITIONS CTRAINER_HAVE_MPI)
    # consumers (and the multi-process tests) can tell MPI is built in
    target_compile_definitions(ctrainer_deps INTERFACE CTRAINER_HAVE_MPI)
    set(CTRAINER_HAVE_MPI ON)
  else()
    message(STATUS "ctrainer: MPI not found, building the single-process runtime")
  endif()
endif()

# CUDA: AUTO builds the backend when nvcc is found.
set(CTRAINER_HAVE_CUDA OFF)
if(NOT CTRAINER_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # machine code for compute capability 8.x (A100, A10, RTX 30/40, L4,
      # L40) and 9.0 (H100, H200), and 9.0 PTX that newer GPUs compile when
      # loading; override on the command line (docs/cuda.md)
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    # host-side warnings of .cu files, errors with CTRAINER_WERROR
    add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>"
      "$<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${CTRAINER_WERROR}>>:-Werror=all-warnings;-Xcompiler=-Werror>")
    find_package(CUDAToolkit REQUIRED)
    # the CUDA libraries link into the backend module only; the library
    # opens it with dlopen
    target_link_libraries(ctrainer_deps INTERFACE ${CMAKE_DL_LIBS})
    list(APPEND CTRAINER_DEFINITIONS CTRAINER_HAVE_CUDA)
    # consumers (and the CUDA tests) can tell the backend is built in
    target_compile_definitions(ctrainer_deps INTERFACE CTRAINER_HAVE_CUDA)
    set(CTRAINER_HAVE_CUDA ON)
  elseif(CTRAINER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CTRAINER_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "ctrainer: nvcc not found, building without the CUDA backend")
  endif()
endif()

# NCCL: the collectives of CUDA tensors, with CUDA and MPI (the unique id
# travels over MPI). Opt-in (CTRAINER_NCCL): the module libctrainer_nccl.so
# (CMakeLists.txt) links libnccl and the CUDA runtime; libctrainer links
# neither and opens the module on the first collective of a CUDA tensor.
# Without it CUDA tensors are refused by the collectives at run time with a
# clear error.
set(CTRAINER_HAVE_NCCL OFF)
if(CTRAINER_NCCL AND NOT (CTRAINER_HAVE_CUDA AND CTRAINER_HAVE_MPI))
  message(FATAL_ERROR "CTRAINER_NCCL=ON needs the CUDA backend and MPI")
endif()
if(CTRAINER_NCCL)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib
    /usr/local/cuda/lib64 /usr/local/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    list(APPEND CTRAINER_DEFINITIONS CTRAINER_HAVE_NCCL)
    target_compile_definitions(ctrainer_deps INTERFACE CTRAINER_HAVE_NCCL)
    set(CTRAINER_HAVE_NCCL ON)
  else()
    message(FATAL_ERROR "CTRAINER_NCCL=ON but NCCL (nccl.h, libnccl) was not found; "
      "set NCCL_INCLUDE_DIR and NCCL_LIBRARY to point at it")
  endif()
endif()
