# Optional backends: each defaults to ON when found and fails clearly when forced ON
# (-DDTRAIN_WITH_X=ON) but missing. "AUTO" is the unset default.
find_package(Threads REQUIRED)

set(DTRAIN_WITH_MPI AUTO CACHE STRING "Build the Open MPI backend (AUTO, ON, OFF)")
set(DTRAIN_WITH_CUDA AUTO CACHE STRING "Build CUDA device support (AUTO, ON, OFF)")
set(DTRAIN_WITH_NCCL AUTO CACHE STRING "Build the NCCL backend (AUTO, ON, OFF)")
set(DTRAIN_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures (never 'native': build hosts may have no GPU)")
set(DTRAIN_ARCH "native" CACHE STRING "Value for -march (native, x86-64-v3, ..., or empty for the compiler default)")
set(DTRAIN_BLAS "openblas" CACHE STRING "CPU BLAS: openblas or blis (see docs/dependencies.md)")

function(dtrain_resolve_option name found what)
  if(${name} STREQUAL "AUTO")
    set(${name} ${found} PARENT_SCOPE)
    set_property(CACHE ${name} PROPERTY VALUE ${found})
  elseif(${name})
    if(NOT ${found})
      message(FATAL_ERROR "${name}=ON but ${what} was not found. Install it or pass -D${name}=OFF.")
    endif()
    set(${name} ON PARENT_SCOPE)
  else()
    set(${name} OFF PARENT_SCOPE)
  endif()
endfunction()

# ---- MPI (C bindings only: the C++ bindings are deprecated)
if(NOT DTRAIN_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
endif()
set(_mpi_found OFF)
if(MPI_C_FOUND)
  set(_mpi_found ON)
endif()
dtrain_resolve_option(DTRAIN_WITH_MPI ${_mpi_found} "MPI (Debian: libopenmpi-dev openmpi-bin)")

# ---- CUDA runtime (cudart only; never the driver library: build hosts may have no driver)
if(NOT DTRAIN_WITH_CUDA STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  # CMake 3.25's FindCUDAToolkit sets a property on CUDA::nvToolsExt without checking that
  # the target exists, and CUDA 13 ships no nvToolsExt library: configure would end in a
  # CMake internal error. An empty stand-in (never linked) keeps an unpatched CMake working.
  if(NOT TARGET CUDA::nvToolsExt)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
  endif()
  find_package(CUDAToolkit QUIET)
endif()
set(_cuda_found OFF)
if(CUDAToolkit_FOUND)
  set(_cuda_found ON)
endif()
dtrain_resolve_option(DTRAIN_WITH_CUDA ${_cuda_found} "the CUDA toolkit (nvcc, cudart)")

# ---- NCCL ships no CMake config: find the header and library beside the CUDA toolkit
set(_nccl_found OFF)
if(DTRAIN_WITH_CUDA AND NOT DTRAIN_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found ON)
  endif()
endif()
dtrain_resolve_option(DTRAIN_WITH_NCCL ${_nccl_found} "NCCL (nccl.h and libnccl.so; needs DTRAIN_WITH_CUDA)")

# ---- BLAS: one library, chosen at configure time; kernels call it single-threaded
#      and split the work over their own blocking thread pool.
find_package(PkgConfig QUIET)
add_library(dtrain_blas INTERFACE)
if(DTRAIN_BLAS STREQUAL "openblas")
  find_library(DTRAIN_BLAS_LIBRARY NAMES openblas
               PATHS /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu)
  find_path(DTRAIN_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread)
  target_compile_definitions(dtrain_blas INTERFACE DTRAIN_BLAS_OPENBLAS=1)
elseif(DTRAIN_BLAS STREQUAL "blis")
  find_library(DTRAIN_BLAS_LIBRARY NAMES blis
               PATHS /usr/lib/x86_64-linux-gnu/blis-pthread /usr/lib/x86_64-linux-gnu/blis-openmp)
  find_path(DTRAIN_CBLAS_INCLUDE cblas.h
            PATHS /usr/include/x86_64-linux-gnu/blis-pthread /usr/include/x86_64-linux-gnu/blis-openmp
            NO_DEFAULT_PATH)
  target_compile_definitions(dtrain_blas INTERFACE DTRAIN_BLAS_BLIS=1)
else()
  message(FATAL_ERROR "DTRAIN_BLAS='${DTRAIN_BLAS}': accepted values are openblas, blis")
endif()
if(NOT DTRAIN_BLAS_LIBRARY OR NOT DTRAIN_CBLAS_INCLUDE)
  message(FATAL_ERROR "DTRAIN_BLAS=${DTRAIN_BLAS} not found (Debian: libopenblas-dev or libblis-dev)")
endif()
target_link_libraries(dtrain_blas INTERFACE ${DTRAIN_BLAS_LIBRARY})
target_include_directories(dtrain_blas INTERFACE ${DTRAIN_CBLAS_INCLUDE})

set(DTRAIN_ARCH_FLAGS -fopenmp-simd)
if(DTRAIN_ARCH)
  list(APPEND DTRAIN_ARCH_FLAGS -march=${DTRAIN_ARCH})
endif()
