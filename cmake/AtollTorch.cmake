# Finds LibTorch inside a PyTorch wheel: the interpreter of .venv (made by scripts/install-deps.sh)
# or ATOLL_TORCH_PYTHON (e.g. a machine's own python3 with torch) tells where the wheel lies, its
# version, C++ ABI and CUDA version; then find_package(Torch) loads it. Every way this can go wrong
# stops configure with one line naming what was found and the command that fixes it.
#
# Sets ATOLL_TORCH_VERSION and ATOLL_TORCH_CUDA (the wheel's CUDA version, empty for a CPU build).

set(ATOLL_TORCH_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python interpreter whose torch package supplies LibTorch")
# Oldest and newest LibTorch Atoll builds against (the pin in scripts/requirements.txt is inside).
set(_atoll_torch_min 2.11)
set(_atoll_torch_max 2.14)
set(_fix "run: bash scripts/install-deps.sh (or pass -DATOLL_TORCH_PYTHON=/path/to/python with torch ${_atoll_torch_min}-${_atoll_torch_max})")

if(NOT EXISTS "${ATOLL_TORCH_PYTHON}")
  atoll_configure_error("no Python with torch at ${ATOLL_TORCH_PYTHON}; ${_fix}")
endif()
include(AtollPythonProbe)
atoll_python_probe(_probe torch
  "import torch, torch.utils; print(torch.__version__.split('+')[0]); print(torch.utils.cmake_prefix_path); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.version.cuda or '')"
  "${_fix}")
list(GET _probe 0 ATOLL_TORCH_VERSION)
list(GET _probe 1 _torch_prefix)
list(GET _probe 2 _torch_cxx11_abi)
list(LENGTH _probe _probe_fields)
set(ATOLL_TORCH_CUDA "")
if(_probe_fields GREATER 3)
  list(GET _probe 3 ATOLL_TORCH_CUDA)
endif()

string(REGEX MATCH "^[0-9]+\\.[0-9]+" _torch_minor "${ATOLL_TORCH_VERSION}")  # 2.14.1 -> 2.14
if(_torch_minor VERSION_LESS _atoll_torch_min OR _torch_minor VERSION_GREATER _atoll_torch_max)
  atoll_configure_error("${ATOLL_TORCH_PYTHON} has torch ${ATOLL_TORCH_VERSION}, outside the supported ${_atoll_torch_min}-${_atoll_torch_max}; ${_fix}")
endif()
# Debian's MPI, protobuf and yaml-cpp use the C++11 string ABI; a pre-C++11-ABI wheel would only fail at link time.
if(NOT _torch_cxx11_abi STREQUAL "1")
  atoll_configure_error("torch ${ATOLL_TORCH_VERSION} at ${_torch_prefix} is built with the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0) but Debian's libraries use the C++11 ABI; install a wheel built with the C++11 ABI (every x86_64 wheel since 2.7): bash scripts/install-deps.sh")
endif()

if(ATOLL_TORCH_CUDA)
  # A CUDA wheel's TorchConfig needs the CUDA toolkit (nvcc, headers) at configure time, and NVRTC,
  # which the wheel ships under site-packages/nvidia/ rather than beside the toolkit.
  find_program(ATOLL_NVCC nvcc HINTS $ENV{CUDA_HOME}/bin /usr/local/cuda/bin)
  if(NOT ATOLL_NVCC)
    atoll_configure_error("torch ${ATOLL_TORCH_VERSION} is a CUDA ${ATOLL_TORCH_CUDA} build and needs nvcc to configure, and none was found; install the CUDA toolkit or set CUDA_HOME")
  endif()
  get_filename_component(_nvcc_real "${ATOLL_NVCC}" REALPATH)
  get_filename_component(_cuda_root "${_nvcc_real}" DIRECTORY)
  get_filename_component(_cuda_root "${_cuda_root}" DIRECTORY)
  set(CUDA_TOOLKIT_ROOT_DIR "${_cuda_root}" CACHE PATH "CUDA toolkit for TorchConfig")
  set(CMAKE_CUDA_COMPILER "${_nvcc_real}" CACHE FILEPATH "nvcc")
  get_filename_component(_site "${_torch_prefix}/../../.." ABSOLUTE)
  file(GLOB _nvrtc "${_site}/nvidia/cu*/lib/libnvrtc.so.*" "${_site}/nvidia/cuda_nvrtc/lib/libnvrtc.so.*"
       "${CUDA_TOOLKIT_ROOT_DIR}/lib64/libnvrtc.so")
  list(FILTER _nvrtc EXCLUDE REGEX "alt|builtins")
  if(_nvrtc)
    list(GET _nvrtc 0 _nvrtc)
    set(CUDA_nvrtc_LIBRARY "${_nvrtc}" CACHE FILEPATH "NVRTC for TorchConfig")
  endif()
  # Atoll compiles no CUDA source of its own: name one architecture so TorchConfig skips probing
  # for GPUs, and keep CUDA at C++17, the newest dialect CMake 3.25 knows for nvcc.
  set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "CUDA architectures for TorchConfig")
  set(CMAKE_CUDA_STANDARD 17)
  set(ATOLL_WHEEL_NVIDIA_DIR "${_site}/nvidia")
endif()

find_package(Torch REQUIRED PATHS "${_torch_prefix}" NO_DEFAULT_PATH)
if(ATOLL_TORCH_CUDA)
  set(_build "CUDA ${ATOLL_TORCH_CUDA}")
else()
  set(_build "CPU build")
endif()
message(STATUS "Atoll: LibTorch ${ATOLL_TORCH_VERSION} (${_build}) from ${_torch_prefix}")
