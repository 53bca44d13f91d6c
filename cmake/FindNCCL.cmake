# Finds NCCL and the CUDA runtime it needs. Defines NCCL_FOUND and the imported target NCCL::nccl.
set(_nccl_hints $ENV{NCCL_ROOT} $ENV{CUDA_HOME} /usr/local/cuda /usr)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
find_path(CUDART_INCLUDE_DIR cuda_runtime_api.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(CUDART_LIBRARY cudart HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL DEFAULT_MSG NCCL_INCLUDE_DIR NCCL_LIBRARY CUDART_INCLUDE_DIR CUDART_LIBRARY)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl INTERFACE IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR};${CUDART_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${NCCL_LIBRARY};${CUDART_LIBRARY}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY CUDART_INCLUDE_DIR CUDART_LIBRARY)
