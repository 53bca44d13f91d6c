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
# Atoll's protobuf code links protobuf-lite statically, its symbols kept out of the dynamic table:
# Debian's libsentencepiece.so carries a protobuf of its own and exports all of it, so a shared
# libprotobuf in the same process has its calls bound to that copy (or the reverse) and crashes
# (seen: in static initialisation with libprotobuf.so, in SerializeAsString with libprotobuf-lite.so).
find_library(ATOLL_PROTOBUF_LITE_STATIC NAMES libprotobuf-lite.a)
if(NOT ATOLL_PROTOBUF_LITE_STATIC)
  atoll_configure_error("libprotobuf-lite.a was not found; run: bash scripts/install-deps.sh (Debian package libprotobuf-dev)")
endif()
add_library(atoll_protobuf_lite INTERFACE)
target_link_libraries(atoll_protobuf_lite INTERFACE ${ATOLL_PROTOBUF_LITE_STATIC} Threads::Threads)
target_link_options(atoll_protobuf_lite INTERFACE "LINKER:--exclude-libs,libprotobuf-lite.a")
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
# Subword tokenizers (runtime/tokenizer/): Debian's SentencePiece, its processor and trainer.
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE IMPORTED_TARGET sentencepiece)
if(NOT SENTENCEPIECE_FOUND)
  atoll_configure_error("SentencePiece was not found (pkg-config sentencepiece); run: bash scripts/install-deps.sh (Debian package libsentencepiece-dev)")
endif()
# Compressed JSONL input of `atoll data prepare` (runtime/data/gzip_stream.cpp, zstd_stream.cpp):
# Debian's zlib and libzstd; Parquet input: Arrow's C++ libraries from the pyarrow wheel.
find_package(ZLIB)
if(NOT ZLIB_FOUND)
  atoll_configure_error("zlib's headers were not found; run: bash scripts/install-deps.sh (Debian package zlib1g-dev)")
endif()
pkg_check_modules(ZSTD IMPORTED_TARGET libzstd)
if(NOT ZSTD_FOUND)
  atoll_configure_error("libzstd was not found (pkg-config libzstd); run: bash scripts/install-deps.sh (Debian package libzstd-dev)")
endif()
include(AtollArrow)
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
