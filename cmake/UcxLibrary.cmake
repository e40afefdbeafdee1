# Which UCX the build links, in this order:
#   1. RINGREDUCE_UCX_ROOT (this cache variable, else the environment
#      variable): a standard prefix (ROOT/include, ROOT/lib or lib64: HPC-X,
#      site builds, pip's libucx folder) or Debian's packages unpacked
#      (ROOT/usr/include, ROOT/usr/lib/<multiarch>, scripts/gpu_prepare.sh);
#   2. where torch is a CUDA build, a pip-installed libucx-cu<N> for torch's
#      CUDA major N (RAPIDS' UCX, with CUDA transports);
#   3. pkg-config's ucx (Debian's libucx-dev; its ucx-config.cmake hard-codes
#      paths and breaks on a second find_package, fixed upstream in 1.16).
# Defines the target ringreduce_ucx, and RINGREDUCE_UCX_VERSION,
# RINGREDUCE_UCX_ORIGIN and RINGREDUCE_UCX_LIBRARY_DIR for the info command.
# A UCX outside the loader's paths is linked with DT_RPATH, not RUNPATH: only
# DT_RPATH also resolves libucp's own dependencies (libuct, libucs, libucm).

set(RINGREDUCE_UCX_ROOT "" CACHE PATH
    "UCX to build against: a prefix (include/, lib/) or unpacked Debian packages (usr/)")
set(ucx_root "${RINGREDUCE_UCX_ROOT}")
if(NOT ucx_root)
  set(ucx_root "$ENV{RINGREDUCE_UCX_ROOT}")
endif()
add_library(ringreduce_ucx INTERFACE)

# The include and library folders of a UCX under ROOT, or a fatal error that
# names every place looked at.
function(ringreduce_ucx_layout root out_include out_libdir)
  set(multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT multiarch)
    set(multiarch "${CMAKE_SYSTEM_PROCESSOR}-linux-gnu")
  endif()
  set(looked "")
  foreach(layout "include:lib" "include:lib64" "usr/include:usr/lib/${multiarch}")
    string(REPLACE ":" ";" layout "${layout}")
    list(GET layout 0 include)
    list(GET layout 1 libdir)
    list(APPEND looked "${include}/ucp/api/ucp.h with ${libdir}/libucp.so")
    if(EXISTS "${root}/${include}/ucp/api/ucp.h" AND EXISTS "${root}/${libdir}/libucp.so")
      set(${out_include} "${root}/${include}" PARENT_SCOPE)
      set(${out_libdir} "${root}/${libdir}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  string(REPLACE ";" "\n  " looked "${looked}")
  message(FATAL_ERROR "ringreduce: RINGREDUCE_UCX_ROOT=${root} holds no UCX. Looked for\n  "
          "${looked}\n(a prefix such as HPC-X, a site build or pip's libucx folder; or "
          "Debian's libucx0 and libucx-dev unpacked with dpkg -x).")
endfunction()

# UCX's release: its pkg-config file when there is one, else the API version
# its header states.
function(ringreduce_ucx_version include libdir out_var)
  if(EXISTS "${libdir}/pkgconfig/ucx.pc")
    file(STRINGS "${libdir}/pkgconfig/ucx.pc" line REGEX "^Version:")
    string(REGEX REPLACE "^Version: *" "" version "${line}")
  else()
    file(STRINGS "${include}/ucp/api/ucp_version.h" lines REGEX "define UCP_API_M(AJOR|INOR)")
    string(REGEX REPLACE "[^0-9;]" "" version "${lines}")
    string(REPLACE ";" "." version "${version}")
  endif()
  set(${out_var} "${version}" PARENT_SCOPE)
endfunction()

# A pip-installed libucx-cu<major> (RAPIDS' wheels all install the folder
# `libucx`): "<distribution>;<version>;<folder>", or empty.
function(ringreduce_pip_ucx cuda_major out_var)
  set(query [=[
import importlib.metadata as metadata, importlib.util, sys
name = "libucx-cu" + sys.argv[1]
try:
    version = metadata.version(name)
except metadata.PackageNotFoundError:
    sys.exit(0)
spec = importlib.util.find_spec("libucx")
if spec and spec.submodule_search_locations:
    print(";".join([name, version, list(spec.submodule_search_locations)[0]]))
]=])
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "${query}" ${cuda_major}
                  OUTPUT_VARIABLE found OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

if(ucx_root)
  set(RINGREDUCE_UCX_ORIGIN "RINGREDUCE_UCX_ROOT")
elseif(TORCH_CUDA_VERSION)
  string(REGEX MATCH "^[0-9]+" cuda_major "${TORCH_CUDA_VERSION}")
  ringreduce_pip_ucx(${cuda_major} pip_ucx)
  if(pip_ucx)
    list(GET pip_ucx 0 distribution)
    list(GET pip_ucx 2 ucx_root)
    set(RINGREDUCE_UCX_ORIGIN "${distribution} (pip)")
  else()
    message(STATUS "ringreduce: no libucx-cu${cuda_major} installed for torch's CUDA "
                   "${TORCH_CUDA_VERSION}: UCX from pkg-config, without CUDA transports unless "
                   "that one has them (pip install libucx-cu${cuda_major} for RAPIDS' UCX)")
  endif()
endif()

if(ucx_root)
  get_filename_component(ucx_root "${ucx_root}" ABSOLUTE)
  ringreduce_ucx_layout("${ucx_root}" ucx_include RINGREDUCE_UCX_LIBRARY_DIR)
  ringreduce_ucx_version("${ucx_include}" "${RINGREDUCE_UCX_LIBRARY_DIR}" RINGREDUCE_UCX_VERSION)
  set(ucx_libdir "${RINGREDUCE_UCX_LIBRARY_DIR}")
  target_include_directories(ringreduce_ucx INTERFACE "${ucx_include}")
  target_link_libraries(ringreduce_ucx INTERFACE
    "${ucx_libdir}/libucp.so" "${ucx_libdir}/libuct.so" "${ucx_libdir}/libucs.so"
    "${ucx_libdir}/libucm.so" "-Wl,--disable-new-dtags,-rpath,${ucx_libdir}")
else()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
  target_link_libraries(ringreduce_ucx INTERFACE PkgConfig::UCX)
  pkg_get_variable(RINGREDUCE_UCX_LIBRARY_DIR ucx libdir)
  set(RINGREDUCE_UCX_VERSION "${UCX_VERSION}")
  pkg_get_variable(RINGREDUCE_UCX_INCLUDE_DIR ucx includedir)
  set(RINGREDUCE_UCX_ORIGIN "pkg-config")
  if(EXISTS /usr/share/doc/libucx-dev AND RINGREDUCE_UCX_LIBRARY_DIR MATCHES "^/usr/lib")
    set(RINGREDUCE_UCX_ORIGIN "Debian's libucx-dev")
  endif()
endif()
message(STATUS "ringreduce: UCX ${RINGREDUCE_UCX_VERSION} from ${RINGREDUCE_UCX_ORIGIN} "
               "(${RINGREDUCE_UCX_LIBRARY_DIR})")
