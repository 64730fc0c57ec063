# FindCUDNN: NVIDIA cuDNN (the graph/backend API of cuDNN 9).
# Looks under CUDNN_ROOT, $CUDNN_ROOT, $CUDNN_HOME, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda and
# the system paths. Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY and the
# imported target CUDNN::CUDNN.
find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ENV CUDNN_HOME ENV CUDA_HOME ENV CUDA_PATH
  PATHS /usr/local/cuda PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
  HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ENV CUDNN_HOME ENV CUDA_HOME ENV CUDA_PATH
  PATHS /usr/local/cuda PATH_SUFFIXES lib64 lib)

# cuDNN 9 keeps its version in cudnn_version.h.
if(CUDNN_INCLUDE_DIR AND EXISTS ${CUDNN_INCLUDE_DIR}/cudnn_version.h)
  file(STRINGS ${CUDNN_INCLUDE_DIR}/cudnn_version.h _cudnn_version_lines
       REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX REPLACE ".*#define CUDNN_${_part} ([0-9]+).*" "\\1" _cudnn_${_part} "${_cudnn_version_lines}")
  endforeach()
  set(CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
  unset(_cudnn_version_lines)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION)
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)

if(CUDNN_FOUND AND NOT TARGET CUDNN::CUDNN)
  add_library(CUDNN::CUDNN UNKNOWN IMPORTED)
  set_target_properties(CUDNN::CUDNN PROPERTIES IMPORTED_LOCATION ${CUDNN_LIBRARY}
                                                INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
endif()
