# Optional backends: each defaults to ON when found and fails clearly when forced ON
# (-DDTRAIN_WITH_X=ON) but missing. "AUTO" is the unset default.
find_package(Threads REQUIRED)

set(DTRAIN_WITH_MPI AUTO CACHE STRING "Build the Open MPI backend (AUTO, ON, OFF)")
set(DTRAIN_WITH_CUDA AUTO CACHE STRING "Build CUDA device support (AUTO, ON, OFF)")
set(DTRAIN_WITH_NCCL AUTO CACHE STRING "Build the NCCL backend (AUTO, ON, OFF)")
set(DTRAIN_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures (never 'native': build hosts may have no GPU)")
set(DTRAIN_ARCH "native" CACHE STRING "Value for -march (native, x86-64-v3, ..., or empty for the compiler default)")
set(DTRAIN_BLAS "onednn" CACHE STRING "CPU GEMM backend: onednn, openblas or blis (see docs/dependencies.md)")

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

# ---- GEMM backend: one library, chosen at configure time (bench_blas_choice measured the
#      default); kernels call it single-threaded and split the work over their own blocking
#      thread pool. kernels/cpu/blas/ holds one source file per backend.
find_package(PkgConfig QUIET)
add_library(dtrain_blas INTERFACE)
if(DTRAIN_BLAS STREQUAL "onednn")
  # Debian's libdnnl is built on OpenMP: libgomp is linked too, so that every pool thread can
  # set its own OpenMP team size to 1 (kernels/cpu/blas/onednn.cc says why).
  find_library(DTRAIN_ONEDNN_LIBRARY NAMES dnnl)
  find_path(DTRAIN_ONEDNN_INCLUDE oneapi/dnnl/dnnl.h)
  find_library(DTRAIN_GOMP_LIBRARY NAMES gomp libgomp.so.1
               PATHS /usr/lib/gcc/x86_64-linux-gnu/12 /usr/lib/x86_64-linux-gnu)
  if(NOT DTRAIN_GOMP_LIBRARY)
    message(FATAL_ERROR "DTRAIN_BLAS=onednn needs libgomp (Debian: libgomp1)")
  endif()
  target_link_libraries(dtrain_blas INTERFACE ${DTRAIN_GOMP_LIBRARY})
  target_compile_definitions(dtrain_blas INTERFACE DTRAIN_BLAS_ONEDNN=1)
  set(DTRAIN_BLAS_SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/blas/onednn.cc)
  set(_blas_package libdnnl-dev)
  set(_blas_library ${DTRAIN_ONEDNN_LIBRARY})
  set(_blas_include ${DTRAIN_ONEDNN_INCLUDE})
elseif(DTRAIN_BLAS STREQUAL "openblas")
  find_library(DTRAIN_OPENBLAS_LIBRARY NAMES openblas
               PATHS /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu)
  find_path(DTRAIN_OPENBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread)
  target_compile_definitions(dtrain_blas INTERFACE DTRAIN_BLAS_OPENBLAS=1)
  set(DTRAIN_BLAS_SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/blas/cblas.cc)
  set(_blas_package libopenblas-dev)
  set(_blas_library ${DTRAIN_OPENBLAS_LIBRARY})
  set(_blas_include ${DTRAIN_OPENBLAS_INCLUDE})
elseif(DTRAIN_BLAS STREQUAL "blis")
  find_library(DTRAIN_BLIS_LIBRARY NAMES blis
               PATHS /usr/lib/x86_64-linux-gnu/blis-pthread /usr/lib/x86_64-linux-gnu/blis-openmp)
  find_path(DTRAIN_BLIS_INCLUDE cblas.h
            PATHS /usr/include/x86_64-linux-gnu/blis-pthread /usr/include/x86_64-linux-gnu/blis-openmp
            NO_DEFAULT_PATH)
  target_compile_definitions(dtrain_blas INTERFACE DTRAIN_BLAS_BLIS=1)
  set(DTRAIN_BLAS_SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/blas/cblas.cc)
  set(_blas_package libblis-dev)
  set(_blas_library ${DTRAIN_BLIS_LIBRARY})
  set(_blas_include ${DTRAIN_BLIS_INCLUDE})
else()
  message(FATAL_ERROR "DTRAIN_BLAS='${DTRAIN_BLAS}': accepted values are onednn, openblas, blis")
endif()
if(NOT _blas_library OR NOT _blas_include)
  message(FATAL_ERROR "DTRAIN_BLAS=${DTRAIN_BLAS} not found (Debian: ${_blas_package})")
endif()
target_link_libraries(dtrain_blas INTERFACE ${_blas_library})
target_include_directories(dtrain_blas INTERFACE ${_blas_include})

# -fno-math-errno: without it, every sqrtf in a loop keeps a branch to libm for errno's sake
# and GCC gives up vectorizing the loop (AdamW ran one element at a time). Nothing in the
# library reads errno after a math call.
set(DTRAIN_ARCH_FLAGS -fopenmp-simd -fno-math-errno)
if(DTRAIN_ARCH)
  list(APPEND DTRAIN_ARCH_FLAGS -march=${DTRAIN_ARCH})
  # GCC's tuning for recent Intel cores vectorizes loops 256 bits wide even where AVX-512 is
  # there; the element-wise kernels (GELU, softmax, AdamW, casts) ran ~1.5x faster at 512
  # (docs/performance.md). A no-op on CPUs without AVX-512.
  list(APPEND DTRAIN_ARCH_FLAGS -mprefer-vector-width=512)
endif()
