# The torch the extension builds against, and a toolchain that matches it.
#
# An extension built with a mismatched C++ toolchain can load and then crash
# (a newer GCC than the libstdc++ torch runs with segfaulted inside
# `std::ostream << long`), so the configure step refuses such a toolchain
# with a message that names the compiler, the runtime and the fix, instead of
# producing a binary. setup.py picks a compatible compiler before this runs
# (cmake/toolchain_check.py pick); here it is verified whatever the caller.

find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
# Headers, libraries and flags from torch itself (cmake/torch_query.py says
# why not through torch's CMake package: it demands CUDA pieces we never use).
set(torch_facts "${CMAKE_CURRENT_BINARY_DIR}/torch_facts.cmake")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0 ${Python3_EXECUTABLE}
          "${PROJECT_SOURCE_DIR}/cmake/torch_query.py" "${torch_facts}"
  RESULT_VARIABLE status ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${err}")
endif()
include("${torch_facts}")
if(TORCH_CUDA_VERSION)
  set(torch_kind "a CUDA ${TORCH_CUDA_VERSION} build; none of its CUDA libraries is linked")
else()
  set(torch_kind "a CPU build")
endif()
message(STATUS "ringreduce: building against torch ${TORCH_VERSION_STRING} (${torch_kind}, "
               "_GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI}) from ${Python3_EXECUTABLE}")

# What the extension compiles and links against: c10, torch, torch_cpu and
# torch_python with the definitions torch.utils.cpp_extension adds, so our
# pybind11 types and std::string ABI match torch's own.
add_library(ringreduce_torch INTERFACE)
target_include_directories(ringreduce_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_compile_definitions(ringreduce_torch INTERFACE ${TORCH_COMPILE_DEFINITIONS}
                           TORCH_API_INCLUDE_EXTENSION_H _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
target_link_libraries(ringreduce_torch INTERFACE ${TORCH_LIBRARY_FILES})
# torch 2.14's headers refuse anything older than C++20 (ATen/ATen.h), and
# torch.utils.cpp_extension compiles extensions as C++20 since 2.13: the
# torch-facing code does too; the torch-free layers stay C++17.
target_compile_features(ringreduce_torch INTERFACE cxx_std_20)

# Each compiler's libstdc++ must be no newer than the one the Python process
# loads with torch, and must be libstdc++ at all.
function(ringreduce_check_compilers)
  set(args "")
  foreach(compiler ${ARGN})
    list(APPEND args --cxx "${compiler}")
  endforeach()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0 ${Python3_EXECUTABLE}
            "${PROJECT_SOURCE_DIR}/cmake/toolchain_check.py" check ${args}
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${out}\n${err}")
  endif()
  string(REGEX REPLACE "^runtime libstdc\\+\\+ " "" runtime "${out}")
  set(RINGREDUCE_LIBSTDCXX_RUNTIME "${runtime}" PARENT_SCOPE)
endfunction()
ringreduce_check_compilers("${CMAKE_CXX_COMPILER}")

# The string ABI with the flags the build really uses: CXXFLAGS come after
# our definitions on the command line, so a -D_GLIBCXX_USE_CXX11_ABI there
# would silently win.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_DEFINITIONS -D_GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
set(CMAKE_REQUIRED_QUIET ON)
unset(RINGREDUCE_STRING_ABI_MATCHES_TORCH CACHE)
check_cxx_source_compiles("
#include <string>
static_assert(_GLIBCXX_USE_CXX11_ABI == ${TORCH_CXX11_ABI}, \"string ABI differs from torch's\");
int main() { return 0; }" RINGREDUCE_STRING_ABI_MATCHES_TORCH)
if(NOT RINGREDUCE_STRING_ABI_MATCHES_TORCH)
  message(FATAL_ERROR
    "ringreduce: incompatible compiler flags. torch ${TORCH_VERSION_STRING} was built with "
    "_GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI}, but ${CMAKE_CXX_COMPILER} with "
    "CMAKE_CXX_FLAGS='${CMAKE_CXX_FLAGS}' (from CXXFLAGS) compiles with another value; the "
    "extension would pass std::string across that boundary and crash.\n"
    "Fix: remove -D_GLIBCXX_USE_CXX11_ABI from CXXFLAGS / CMAKE_CXX_FLAGS (the build sets "
    "torch's value itself).")
endif()
set(RINGREDUCE_CXX_DESCRIPTION
    "${CMAKE_CXX_COMPILER} (${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION})")
