# Finds every external dependency once, so the folder CMakeLists only name targets.
# LibTorch: from the PyTorch wheel in .venv (cmake/AtollTorch.cmake); the rest from Debian.
# Protobuf first: TorchConfig defines protobuf::libprotobuf as an empty stand-in when no such
# target exists yet, and FindProtobuf would then keep that stand-in (nothing linked).
find_package(Protobuf REQUIRED)
include(AtollTorch)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
if(ATOLL_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# NCCL + CUDA runtime: the wheel's (cmake/FindNCCL.cmake), else under NCCL_ROOT, CUDA_HOME, /usr/local/cuda.
set(ATOLL_NCCL_FOUND OFF)
if(NOT ATOLL_WITH_NCCL STREQUAL "OFF")
  find_package(NCCL)
  if(NCCL_FOUND)
    set(ATOLL_NCCL_FOUND ON)
  elseif(ATOLL_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "ATOLL_WITH_NCCL=ON but NCCL or the CUDA runtime was not found; set NCCL_ROOT/CUDA_HOME or use -DATOLL_WITH_NCCL=OFF")
  endif()
endif()
message(STATUS "Atoll: NCCL backend ${ATOLL_NCCL_FOUND}")
