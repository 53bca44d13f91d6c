# Shared compile settings and the precompiled header.
#
# atoll_flags: Atoll's include paths, warnings and sanitizers, for every target (atoll-supervise,
# which links neither LibTorch nor MPI, uses these alone).
# atoll_common: every target that uses LibTorch links it, so all of them compile with identical flags
# and definitions -- the condition for reusing one precompiled <torch/torch.h> (about 20 s per
# translation unit without it).
add_library(atoll_flags INTERFACE)
target_include_directories(atoll_flags INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
target_compile_options(atoll_flags INTERFACE -Wall -Wextra -Werror -Wno-unused-parameter)
add_library(atoll_common INTERFACE)
target_link_libraries(atoll_common INTERFACE atoll_flags ${TORCH_LIBRARIES} MPI::MPI_CXX Threads::Threads)
# Torch's imported include dirs are not all marked SYSTEM; mark them so -Werror covers only our code.
target_include_directories(atoll_common SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
# GCC at -O3 under C++20 flags reports overflows and out-of-bounds accesses inside inlined standard
# library code: std::string appends (GCC 12; bugs 105329, 105651) and std::vector<bool>::reserve as
# inlined from torch's autograd Function::apply (still in GCC 13.3, Ubuntu 24.04). False positives in
# library code, so those checks stay off under GCC.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(atoll_flags INTERFACE -Wno-stringop-overflow -Wno-array-bounds)
  if(CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(atoll_flags INTERFACE -Wno-restrict)
  endif()
endif()

# The torch wheels' libraries export standard-library symbols as compiled by their own toolchain
# (libtorch_cpu 2.14: 142 of std::filesystem). Needed before libstdc++, they take the calls Atoll
# compiled against its own libstdc++'s headers: on an H100 node with torch 2.11, checkpoint pruning's
# std::filesystem::remove_all went to libtorch's copy and jumped to a null address, and preloading
# the system libstdc++ cured it. So where libstdc++ is a shared library it comes first among the
# libraries each binary needs (a toolchain that links it statically is unaffected by this line;
# checkpoint/remove_tree.h avoids the call that failed there).
target_link_options(atoll_common INTERFACE "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")

if(ATOLL_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    atoll_configure_error("ATOLL_FUZZ=ON needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}; configure with -DCMAKE_CXX_COMPILER=clang++-16 or run: bash tests/fuzz/run.sh")
  endif()
  if(ATOLL_SANITIZE STREQUAL "none")
    set(ATOLL_SANITIZE address)
  endif()
  target_compile_options(atoll_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()
if(ATOLL_SANITIZE STREQUAL "address")
  set(_sanitize -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(ATOLL_SANITIZE STREQUAL "thread")
  set(_sanitize -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT ATOLL_SANITIZE STREQUAL "none")
  atoll_configure_error("ATOLL_SANITIZE=${ATOLL_SANITIZE} is not one of none, address, thread")
endif()
if(_sanitize)
  # GCC's flow analysis under instrumentation reports uninitialised members inside libstdc++'s
  # std::regex and std::function (GCC documents that -fsanitize can cause such false warnings).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND _sanitize -Wno-maybe-uninitialized)
  endif()
  target_compile_options(atoll_flags INTERFACE ${_sanitize})
  target_link_options(atoll_flags INTERFACE ${_sanitize})
endif()

configure_file(${PROJECT_SOURCE_DIR}/cmake/build_config.h.in ${PROJECT_BINARY_DIR}/generated/atoll/build_config.h)

add_library(atoll_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
target_link_libraries(atoll_pch PUBLIC atoll_common)
target_precompile_headers(atoll_pch PUBLIC ${PROJECT_SOURCE_DIR}/cmake/atoll_pch.h)

# Unity builds: a target's sources compile ATOLL_UNITY_BATCH at a time, as one translation unit. A
# GCC translation unit spends about 5 s of CPU loading the precompiled <torch/torch.h> (a 726 MB
# .gch) before it reads a line of its own, so a batch of 8 pays that once instead of 8 times.
option(ATOLL_UNITY_BUILD "Compile each target's sources in batches (unity build)" ON)
set(ATOLL_UNITY_BATCH 8 CACHE STRING "Sources per unity translation unit")

# atoll_use_shared_settings(NAME): the precompiled header and the unity batches.
function(atoll_use_shared_settings name)
  target_precompile_headers(${name} REUSE_FROM atoll_pch)
  set_target_properties(${name} PROPERTIES UNITY_BUILD ${ATOLL_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE ${ATOLL_UNITY_BATCH})
endfunction()

# atoll_add_library(NAME DIR DEPS...): a static library from every .cpp in DIR (non-recursive
# unless listed), reusing the precompiled header.
function(atoll_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC atoll_common ${ARG_DEPS})
  atoll_use_shared_settings(${name})
endfunction()

function(atoll_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE atoll_common ${ARG_DEPS})
  atoll_use_shared_settings(${name})
endfunction()
