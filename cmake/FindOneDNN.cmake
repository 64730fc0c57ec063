# FindOneDNN: oneDNN's C/C++ library (libdnnl), e.g. Debian's libdnnl-dev.
# Found by header and library rather than through dnnl-config.cmake, because Debian's config
# file requires the OpenCL headers (its build has an OpenCL GPU runtime) that strata never
# uses. Looks under OneDNN_ROOT, $DNNLROOT and the system paths. Defines OneDNN_FOUND,
# OneDNN_VERSION, OneDNN_INCLUDE_DIR, OneDNN_LIBRARY and the imported target OneDNN::dnnl.
find_path(OneDNN_INCLUDE_DIR oneapi/dnnl/dnnl.h HINTS ${OneDNN_ROOT} ENV DNNLROOT PATH_SUFFIXES include)
find_library(OneDNN_LIBRARY dnnl HINTS ${OneDNN_ROOT} ENV DNNLROOT PATH_SUFFIXES lib lib64)

if(OneDNN_INCLUDE_DIR AND EXISTS ${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h)
  file(STRINGS ${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h _onednn_version_lines
       REGEX "^#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define DNNL_VERSION_${_part} ([0-9]+).*" "\\1" _onednn_${_part} "${_onednn_version_lines}")
  endforeach()
  set(OneDNN_VERSION "${_onednn_MAJOR}.${_onednn_MINOR}.${_onednn_PATCH}")
  unset(_onednn_version_lines)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OneDNN REQUIRED_VARS OneDNN_LIBRARY OneDNN_INCLUDE_DIR VERSION_VAR OneDNN_VERSION)
mark_as_advanced(OneDNN_INCLUDE_DIR OneDNN_LIBRARY)

if(OneDNN_FOUND AND NOT TARGET OneDNN::dnnl)
  add_library(OneDNN::dnnl UNKNOWN IMPORTED)
  set_target_properties(OneDNN::dnnl PROPERTIES IMPORTED_LOCATION ${OneDNN_LIBRARY}
                                                INTERFACE_INCLUDE_DIRECTORIES ${OneDNN_INCLUDE_DIR})
endif()
