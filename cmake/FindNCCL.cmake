# Finds NCCL and the CUDA runtime it needs. Defines NCCL_FOUND and the imported target NCCL::nccl.
# First choice: the ones inside the PyTorch wheel (site-packages/nvidia/nccl and nvidia/cu*), so
# Atoll uses the very libraries libtorch_cuda loads; then NCCL_ROOT, CUDA_HOME, /usr/local/cuda.
# The wheels ship only versioned sonames (libnccl.so.2), hence the explicit names.
set(_nccl_hints)
if(ATOLL_WHEEL_NVIDIA_DIR)
  file(GLOB _wheel_cuda_dirs "${ATOLL_WHEEL_NVIDIA_DIR}/cu*" "${ATOLL_WHEEL_NVIDIA_DIR}/cuda_runtime")
  list(APPEND _nccl_hints "${ATOLL_WHEEL_NVIDIA_DIR}/nccl" ${_wheel_cuda_dirs})
endif()
list(APPEND _nccl_hints $ENV{NCCL_ROOT} $ENV{CUDA_HOME} /usr/local/cuda /usr)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu NO_DEFAULT_PATH)
find_path(CUDART_INCLUDE_DIR cuda_runtime_api.h HINTS ${_nccl_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(CUDART_LIBRARY NAMES cudart libcudart.so.13 libcudart.so.12 NAMES_PER_DIR HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu NO_DEFAULT_PATH)

# The version from nccl.h, so the configure log says which NCCL the build uses.
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*" "\\1.\\2.\\3"
         NCCL_VERSION "${_nccl_version_lines}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL DEFAULT_MSG NCCL_INCLUDE_DIR NCCL_LIBRARY CUDART_INCLUDE_DIR CUDART_LIBRARY)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl INTERFACE IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR};${CUDART_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${NCCL_LIBRARY};${CUDART_LIBRARY}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY CUDART_INCLUDE_DIR CUDART_LIBRARY)
