# Finds every external dependency once, so the folder CMakeLists only name targets.
# LibTorch: from the PyTorch wheel in .venv (cmake/AtollTorch.cmake); the rest from Debian.
# Protobuf first: TorchConfig defines protobuf::libprotobuf as an empty stand-in when no such
# target exists yet, and FindProtobuf would then keep that stand-in (nothing linked).
include(AtollConfigureError)
# Options are checked before anything is looked for, so a misspelt one is the only line printed.
if(NOT ATOLL_WITH_CUDA MATCHES "^(AUTO|ON|OFF)$")
  atoll_configure_error("ATOLL_WITH_CUDA=${ATOLL_WITH_CUDA} is not one of AUTO, ON, OFF; pass -DATOLL_WITH_CUDA=AUTO (or ON, OFF)")
endif()
find_package(Protobuf REQUIRED)
include(AtollTorch)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
# HMAC-SHA256 for the islands' job secret (comm/message_authenticator.*).
find_package(OpenSSL 3)
if(NOT OPENSSL_FOUND)
  atoll_configure_error("OpenSSL 3's headers were not found; run: bash scripts/install-deps.sh (Debian package libssl-dev)")
endif()
# The islands' TCP groups (comm/gloo_communicator.*) use c10d's ProcessGroupGloo, whose header needs
# Gloo's headers; the code is LibTorch's own (libtorch_cpu exports it), so Debian's libgloo is not linked.
find_path(ATOLL_GLOO_INCLUDE_DIR gloo/algorithm.h)
if(NOT ATOLL_GLOO_INCLUDE_DIR)
  atoll_configure_error("Gloo's headers (gloo/algorithm.h) were not found; run: bash scripts/install-deps.sh (Debian package libgloo-dev)")
endif()
if(ATOLL_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# The CUDA path (device placement, NCCL in the mesh, device-memory checkpoints, GPU metrics) needs a
# CUDA build of LibTorch and NCCL with the CUDA runtime: the wheel's (cmake/FindNCCL.cmake), else
# under NCCL_ROOT, CUDA_HOME, /usr/local/cuda. No GPU is needed to compile and link it.
set(ATOLL_CUDA OFF)
if(NOT ATOLL_WITH_CUDA STREQUAL "OFF")
  if(NOT ATOLL_TORCH_CUDA)
    set(_cuda_missing "torch ${ATOLL_TORCH_VERSION} is a CPU build")
  else()
    find_package(NCCL)
    if(NOT NCCL_FOUND)
      set(_cuda_missing "NCCL or the CUDA runtime was not found (set NCCL_ROOT or CUDA_HOME)")
    endif()
  endif()
  if(NOT _cuda_missing)
    set(ATOLL_CUDA ON)
  elseif(ATOLL_WITH_CUDA STREQUAL "ON")
    atoll_configure_error("ATOLL_WITH_CUDA=ON but ${_cuda_missing}; install the CUDA wheel (bash scripts/install-deps.sh) or pass -DATOLL_WITH_CUDA=OFF")
  endif()
endif()
if(ATOLL_CUDA)
  message(STATUS "Atoll: CUDA path ON (LibTorch CUDA ${ATOLL_TORCH_CUDA}, NCCL ${NCCL_VERSION} from ${NCCL_LIBRARY})")
else()
  message(STATUS "Atoll: CUDA path OFF ${_cuda_missing}")
endif()
