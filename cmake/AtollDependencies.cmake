# Finds every external dependency once, so the folder CMakeLists only name targets.
# LibTorch: Debian's by default; pass -DTorch_DIR=<prefix>/share/cmake/Torch for a CUDA build.
find_package(Torch REQUIRED)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(Protobuf REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Threads REQUIRED)
if(ATOLL_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# NCCL + CUDA runtime: auto-detected under /usr/local/cuda (or CUDA_HOME / NCCL_ROOT).
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
