# RINGREDUCE_UCX_ROOT in each layout it accepts, built and run (ctest, see
# CMakeLists.txt): a fake root of links to the system's UCX, arranged as
#   prefix  ROOT/include, ROOT/lib      (HPC-X, site builds, pip's libucx), given with -D
#   lib64   ROOT/include, ROOT/lib64    given in the environment
#   debian  ROOT/usr/include, ROOT/usr/lib/<multiarch>   (dpkg -x of Debian's packages)
#   empty   nothing: the configure step must stop and name what it looked for
# Run: cmake -DLAYOUT=... -DSOURCE=<checkout> -DWORK=<folder> -DUCX_INCLUDE=<dir>
#      -DUCX_LIBDIR=<dir> -DMULTIARCH=<triplet> -P ucx_root_test.cmake
file(REMOVE_RECURSE "${WORK}")
set(root "${WORK}/root")
if(LAYOUT STREQUAL "debian")
  set(include "${root}/usr/include")
  set(libdir "${root}/usr/lib/${MULTIARCH}")
elseif(LAYOUT STREQUAL "lib64")
  set(include "${root}/include")
  set(libdir "${root}/lib64")
else()
  set(include "${root}/include")
  set(libdir "${root}/lib")
endif()
file(MAKE_DIRECTORY "${root}")
if(NOT LAYOUT STREQUAL "empty")
  file(MAKE_DIRECTORY "${include}" "${libdir}")
  foreach(part ucp uct ucs ucm)
    file(CREATE_LINK "${UCX_INCLUDE}/${part}" "${include}/${part}" SYMBOLIC)
    foreach(suffix .so .so.0)
      file(REAL_PATH "${UCX_LIBDIR}/lib${part}${suffix}" target)
      file(CREATE_LINK "${target}" "${libdir}/lib${part}${suffix}" SYMBOLIC)
    endforeach()
  endforeach()
endif()

set(configure ${CMAKE_COMMAND} -S "${SOURCE}/tests/cmake/ucx_root" -B "${WORK}/build"
    "-DRINGREDUCE_SOURCE_DIR=${SOURCE}")
if(LAYOUT STREQUAL "lib64")
  set(configure ${CMAKE_COMMAND} -E env "RINGREDUCE_UCX_ROOT=${root}" ${configure})
else()
  list(APPEND configure "-DRINGREDUCE_UCX_ROOT=${root}")
endif()
execute_process(COMMAND ${configure} OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE status)

if(LAYOUT STREQUAL "empty")
  string(REGEX REPLACE "[ \n]+" " " flat "${out}")  # CMake wraps the message's lines
  if(status EQUAL 0 OR NOT flat MATCHES "RINGREDUCE_UCX_ROOT=[^ ]* holds no UCX"
     OR NOT flat MATCHES "include/ucp/api/ucp.h with lib/libucp.so"
     OR NOT flat MATCHES "usr/include/ucp/api/ucp.h with usr/lib/${MULTIARCH}/libucp.so")
    message(FATAL_ERROR "an empty RINGREDUCE_UCX_ROOT was not refused clearly:\n${out}")
  endif()
  return()
endif()
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configure failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}/build"
                OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "build failed:\n${out}")
endif()
execute_process(COMMAND "${WORK}/build/ucx_loaded_from" OUTPUT_VARIABLE out ERROR_VARIABLE out
                RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR NOT out MATCHES "^1\\.[0-9]+" OR NOT out MATCHES " ${libdir}/libucp")
  message(FATAL_ERROR "expected UCX loaded from ${libdir}, got (${status}): ${out}")
endif()
message(STATUS "${LAYOUT}: ${out}")
