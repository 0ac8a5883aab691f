# The CUDA backend, built when CMake finds nvcc: adds src/backend/cuda/*.cu and backend.c
# to the akunu library, defines AKUNU_CUDA (backend/stub.c then steps aside), and links
# the CUDA runtime (static) and cuBLASLt. Without nvcc nothing here is built.
# Architectures: sm_80 and sm_90a by default (override with -DCMAKE_CUDA_ARCHITECTURES).
# -DAKUNU_CUDA=OFF builds the CPU backend alone on a machine that has nvcc.
option(AKUNU_CUDA "Build the CUDA backend (when nvcc is found)" ON)
if(AKUNU_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
endif()
if(AKUNU_CUDA AND CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90a-real")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  file(GLOB AKUNU_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cu ${CMAKE_CURRENT_LIST_DIR}/*.c)
  target_sources(akunu_obj PRIVATE ${AKUNU_CUDA_SRC})
  # akunu_obj was created before CUDA was enabled, so it did not pick up the default
  set_target_properties(akunu_obj PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}" CUDA_VISIBILITY_PRESET hidden)
  target_compile_definitions(akunu_obj PUBLIC AKUNU_CUDA)
  target_include_directories(akunu_obj PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  # host code of the .cu files: the project's warnings, as errors
  target_compile_options(akunu_obj PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror --Werror=all-warnings -lineinfo>)
  # stdc++: the host side of the .cu files, for programs that link the static library as C
  list(APPEND AKUNU_LINK CUDA::cudart_static CUDA::cublasLt stdc++)
  set(AKUNU_HAVE_CUDA ON)
  message(STATUS "akunu: CUDA backend enabled (architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  set(AKUNU_HAVE_CUDA OFF)
  message(STATUS "akunu: building without the CUDA backend (AKUNU_CUDA=${AKUNU_CUDA}, nvcc: ${CMAKE_CUDA_COMPILER})")
endif()
