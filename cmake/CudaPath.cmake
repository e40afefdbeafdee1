# Whether the device data path (csrc/cuda) is compiled, and why not.
#
# It is compiled whenever an nvcc is found that can build and link a CUDA
# program with the CUDA runtime linked statically (so CI, without a GPU,
# still compiles every kernel). What it needs of a toolkit: nvcc, the
# runtime's headers and libcudart_static.a; nothing else (NCCL is loaded with
# dlopen, NVRTC and torch's CUDA libraries are never used). A machine without
# that builds the CPU path only, and RINGREDUCE_CUDA_WHY says why, for the
# configure log and `python -m torch_ringreduce.info`.
#
# Sets RINGREDUCE_CUDA_COMPILED (ON/OFF) and RINGREDUCE_CUDA_WHY; with ON, the
# CUDA language is enabled and CUDA::cudart_static exists. Architectures:
# TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX") when set, else sm_80 and sm_90 plus PTX
# for newer GPUs.

option(RINGREDUCE_WITH_CUDA "Compile the CUDA data path when nvcc is found" ON)
set(RINGREDUCE_CUDA_COMPILED OFF)

# What a toolkit lacks of what the CUDA path links, asked of nvcc itself: its
# --dryrun names the toolkit it uses (TOP), wherever the nvcc on PATH lives.
function(ringreduce_cuda_toolkit_gaps nvcc out_var)
  execute_process(COMMAND "${nvcc}" --dryrun -x cu /dev/null -o /dev/null
                  OUTPUT_VARIABLE dry ERROR_VARIABLE dry RESULT_VARIABLE status)
  if(NOT dry MATCHES "#\\$ TOP=([^\n]*)")
    set(${out_var} "${nvcc} does not run (${status})" PARENT_SCOPE)
    return()
  endif()
  get_filename_component(top "${CMAKE_MATCH_1}" ABSOLUTE)
  set(target_dir "")
  if(dry MATCHES ".*#\\$ _TARGET_DIR_=([^\n]+)")
    set(target_dir "${top}/${CMAKE_MATCH_1}")
  endif()
  set(gaps "")
  foreach(needed cuda_runtime.h libcudart_static.a)
    if(needed MATCHES "\\.h$")
      set(folders "${target_dir}/include" "${top}/include")
    else()
      set(folders "${target_dir}/lib" "${top}/lib64" "${top}/lib")
    endif()
    set(found OFF)
    foreach(folder ${folders})
      if(EXISTS "${folder}/${needed}")
        set(found ON)
      endif()
    endforeach()
    if(NOT found)
      list(APPEND gaps "${needed}")
    endif()
  endforeach()
  string(REPLACE ";" ", " gaps "${gaps}")
  if(gaps)
    set(${out_var} "its toolkit, ${top}, lacks ${gaps}" PARENT_SCOPE)
  else()
    set(${out_var} "see the configure log for the compiler's output" PARENT_SCOPE)
  endif()
endfunction()

if(NOT RINGREDUCE_WITH_CUDA)
  set(RINGREDUCE_CUDA_WHY "RINGREDUCE_WITH_CUDA=OFF at build time")
  message(STATUS "ringreduce: CUDA data path OFF (${RINGREDUCE_CUDA_WHY})")
  return()
endif()

# check_language tests a compiler only when CMAKE_CUDA_COMPILER is not yet
# defined: a compiler named by the caller, or a failed check cached by an
# earlier configure, goes through CUDACXX so that it is tested (again).
if(DEFINED CMAKE_CUDA_COMPILER AND NOT CMAKE_CUDA_COMPILER STREQUAL RINGREDUCE_CUDA_CHECKED)
  if(CMAKE_CUDA_COMPILER)
    set(ENV{CUDACXX} "${CMAKE_CUDA_COMPILER}")
  endif()
  unset(CMAKE_CUDA_COMPILER CACHE)
  unset(CMAKE_CUDA_COMPILER)
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER)
  # CMake looks on PATH only; toolkits install to /usr/local/cuda.
  if(DEFINED ENV{CUDACXX} AND NOT "$ENV{CUDACXX}" STREQUAL "")
    set(ringreduce_nvcc "$ENV{CUDACXX}")
  else()
    find_program(ringreduce_nvcc_found nvcc PATHS /usr/local/cuda/bin)
    set(ringreduce_nvcc "${ringreduce_nvcc_found}")
    unset(ringreduce_nvcc_found CACHE)
  endif()
  if(NOT ringreduce_nvcc)
    set(RINGREDUCE_CUDA_WHY
        "no nvcc found at build time (CMAKE_CUDA_COMPILER, CUDACXX, PATH, /usr/local/cuda/bin)")
    message(STATUS "ringreduce: CUDA data path OFF (${RINGREDUCE_CUDA_WHY})")
    return()
  endif()
  set(ENV{CUDACXX} "${ringreduce_nvcc}")
  # nvcc compiles host code with its own default compiler (the first g++ on
  # PATH) unless told otherwise: use the C++ compiler checked above. CMake
  # records it when CUDA is first enabled in a build folder.
  if(NOT CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX})
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "nvcc's host compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    ringreduce_cuda_toolkit_gaps("${ringreduce_nvcc}" gaps)
    string(CONCAT RINGREDUCE_CUDA_WHY "nvcc ${ringreduce_nvcc} cannot build a CUDA program "
                  "with the CUDA runtime linked statically: ${gaps}")
    message(STATUS "ringreduce: CUDA data path OFF (${RINGREDUCE_CUDA_WHY})")
    return()
  endif()
  set(RINGREDUCE_CUDA_CHECKED "${CMAKE_CUDA_COMPILER}" CACHE INTERNAL "nvcc that passed the check")
endif()

if(NOT CMAKE_CUDA_ARCHITECTURES)
  if(DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT "$ENV{TORCH_CUDA_ARCH_LIST}" STREQUAL "")
    string(REPLACE " " ";" arch_list "$ENV{TORCH_CUDA_ARCH_LIST}")
    set(CMAKE_CUDA_ARCHITECTURES "")
    foreach(arch ${arch_list})
      string(REGEX MATCH "^[0-9]+\\.[0-9]+[a-z]?" number "${arch}")
      string(REPLACE "." "" number "${number}")
      if(number STREQUAL "")
        message(FATAL_ERROR "TORCH_CUDA_ARCH_LIST: cannot read '${arch}'")
      endif()
      list(APPEND CMAKE_CUDA_ARCHITECTURES "${number}-real")
      if(arch MATCHES "\\+PTX$")
        list(APPEND CMAKE_CUDA_ARCHITECTURES "${number}-virtual")
      endif()
    endforeach()
  else()
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
  endif()
endif()
enable_language(CUDA)
if(RINGREDUCE_BUILD_PYTHON AND NOT CMAKE_CUDA_HOST_COMPILER STREQUAL CMAKE_CXX_COMPILER)
  ringreduce_check_compilers("${CMAKE_CUDA_HOST_COMPILER}")
endif()
find_package(CUDAToolkit)
if(NOT TARGET CUDA::cudart_static)
  string(CONCAT RINGREDUCE_CUDA_WHY "nvcc ${CMAKE_CUDA_COMPILER} works, but CMake finds no "
                "libcudart_static.a in its toolkit (${CUDAToolkit_LIBRARY_DIR})")
  message(STATUS "ringreduce: CUDA data path OFF (${RINGREDUCE_CUDA_WHY})")
  return()
endif()
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
set(RINGREDUCE_CUDA_COMPILED ON)
set(RINGREDUCE_CUDA_WHY
    "nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
message(STATUS "ringreduce: CUDA data path ON (${RINGREDUCE_CUDA_WHY})")
