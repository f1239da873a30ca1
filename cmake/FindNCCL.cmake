# FindNCCL
# --------
# Finds NVIDIA's NCCL: the header nccl.h and the library libnccl. The one
# place the build looks for NCCL (the GREENSHARD_CUDA build, the GPU
# compile check of the default build, bench/gpu's standalone build).
#
# Where it looks, first to last: NCCL_ROOT (CMake variable, then
# environment), NCCL_HOME (environment), the CUDA toolkit of
# find_package(CUDAToolkit) when it ran (CUDAToolkit_INCLUDE_DIRS,
# CUDAToolkit_LIBRARY_DIR), then CUDAToolkit_ROOT (variable, environment),
# CUDA_HOME, CUDA_PATH and /usr/local/cuda, each with include/ or lib/,
# lib64/ under it; then CMake's default paths. pip wheels of PyTorch ship
# NCCL under site-packages/nvidia/nccl: set NCCL_ROOT to it.
#
# Result variables:
#   NCCL_FOUND          nccl.h and libnccl both found
#   NCCL_INCLUDE_DIR    the directory holding nccl.h (cached; set even when
#                       the library is not found: a compile-only check needs
#                       just the header)
#   NCCL_LIBRARY        libnccl (cached)
#   NCCL_INCLUDE_DIRS   NCCL_INCLUDE_DIR, when NCCL_FOUND
#   NCCL_LIBRARIES      NCCL_LIBRARY, when NCCL_FOUND
#   NCCL_VERSION        "major.minor.patch" read from nccl.h (when it is found)
#
# Imported target (when the library is found):
#   NCCL::NCCL          libnccl with nccl.h's directory as its include path

set(_nccl_hints
  ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME}
  ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR}
  ${CUDAToolkit_ROOT} $ENV{CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda)

find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
unset(_nccl_hints)

unset(NCCL_VERSION)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_defines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    set(_nccl_${_part} "")
    foreach(_line IN LISTS _nccl_defines)
      if(_line MATCHES "^#define NCCL_${_part} +([0-9]+)")
        set(_nccl_${_part} "${CMAKE_MATCH_1}")
      endif()
    endforeach()
  endforeach()
  if(NOT _nccl_MAJOR STREQUAL "" AND NOT _nccl_MINOR STREQUAL "" AND NOT _nccl_PATCH STREQUAL "")
    set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
  endif()
  unset(_nccl_defines)
  unset(_nccl_MAJOR)
  unset(_nccl_MINOR)
  unset(_nccl_PATCH)
  unset(_part)
  unset(_line)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)

if(NCCL_FOUND)
  set(NCCL_INCLUDE_DIRS ${NCCL_INCLUDE_DIR})
  set(NCCL_LIBRARIES ${NCCL_LIBRARY})
  if(NOT TARGET NCCL::NCCL)
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
endif()
