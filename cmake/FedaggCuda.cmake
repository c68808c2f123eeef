# Decides whether the CUDA backend is built. FEDAGG_WITH_CUDA defaults to ON when
# nvcc is found; when ON, the CUDA toolkit, cuSPARSE and NCCL must all be present,
# and a broken CUDA build fails the configure or the build (never silently skipped).
# Independently, FEDAGG_WITH_THRUST_OMP (ON when the toolkit's Thrust headers and OpenMP
# are found) builds the portable reduction for Thrust's OpenMP system with the host
# compiler, so its conformance tests run on machines without nvcc or a GPU too.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_fedagg_cuda_default ON)
else()
  set(_fedagg_cuda_default OFF)
endif()
option(FEDAGG_WITH_CUDA "Build the CUDA backend (needs nvcc, cuSPARSE, NCCL)" ${_fedagg_cuda_default})

if(FEDAGG_WITH_CUDA)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    # sm_80 (A100) and sm_90 (H100/H200); keep this list short, every entry costs build time.
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 cannot pass C++20 to nvcc 13
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit 12.0 REQUIRED)
  if(NOT TARGET CUDA::cusparse)
    message(FATAL_ERROR "cuSPARSE not found in the CUDA toolkit at ${CUDAToolkit_LIBRARY_DIR}.")
  endif()
  find_library(FEDAGG_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(FEDAGG_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(NOT FEDAGG_NCCL_LIBRARY OR NOT FEDAGG_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR "NCCL not found beside the CUDA toolkit; install NCCL or "
                        "configure with -DFEDAGG_WITH_CUDA=OFF.")
  endif()
  add_library(fedagg_nccl INTERFACE)
  target_link_libraries(fedagg_nccl INTERFACE ${FEDAGG_NCCL_LIBRARY})
  target_include_directories(fedagg_nccl INTERFACE ${FEDAGG_NCCL_INCLUDE_DIR})
  message(STATUS "fedagg: CUDA backend ON (CUDA ${CUDAToolkit_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "fedagg: CUDA backend OFF (no nvcc, or FEDAGG_WITH_CUDA=OFF)")
endif()

find_package(CUDAToolkit QUIET)
find_package(OpenMP QUIET COMPONENTS CXX)
find_path(FEDAGG_THRUST_INCLUDE_DIR thrust/version.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS}/cccl ${CUDAToolkit_INCLUDE_DIRS})
if(FEDAGG_THRUST_INCLUDE_DIR AND OpenMP_CXX_FOUND)
  set(_fedagg_thrust_omp_default ON)
else()
  set(_fedagg_thrust_omp_default OFF)
endif()
option(FEDAGG_WITH_THRUST_OMP "Build the portable reduction for Thrust's OpenMP system"
       ${_fedagg_thrust_omp_default})
if(FEDAGG_WITH_THRUST_OMP)
  if(NOT FEDAGG_THRUST_INCLUDE_DIR OR NOT OpenMP_CXX_FOUND)
    message(FATAL_ERROR "FEDAGG_WITH_THRUST_OMP needs Thrust headers (the CUDA toolkit's "
                        "include/cccl) and OpenMP for the C++ compiler.")
  endif()
  # Thrust's headers, as system headers: fedagg's warning flags are not theirs to meet.
  add_library(fedagg_thrust_headers INTERFACE)
  target_include_directories(fedagg_thrust_headers SYSTEM INTERFACE
                             ${FEDAGG_THRUST_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  message(STATUS "fedagg: thrust-omp backend ON (Thrust from ${FEDAGG_THRUST_INCLUDE_DIR})")
else()
  message(STATUS "fedagg: thrust-omp backend OFF (FEDAGG_WITH_THRUST_OMP=OFF, or no Thrust headers or OpenMP)")
endif()
