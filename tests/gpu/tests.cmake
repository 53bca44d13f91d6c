# The GPU suite (CTest label gpu: `ctest -L gpu` runs it alone). Built on every run with the CUDA path;
# each test runs through with_gpus.sh: where the node has fewer GPUs than its ranks, they share them
# (a NCCL host id per rank); where it has none, it reports "skipped: ..." (exit 77, CTest's Skipped)
# and is never counted as passed. Beside these, the
# trainer-based MPI tests run again on GPUs (GPU_NP in tests/mpi/tests.cmake): parity for DP, TP+SP,
# every pipeline schedule, ZeRO-3, bf16 and islands, and bitwise checkpoint resume; context
# parallelism (gpu_test_context_parallel_np{2,4}: ring attention on the GPU against cp 1 on the GPU,
# fp32 and bf16, with document masks, with TP+SP, PP, ZeRO and recompute).
if(ATOLL_CUDA)
  atoll_mpi_test(test_nccl DIR gpu GPU_NP 1 2 8 DEPS atoll_comm)
  atoll_mpi_test(test_gpu_matches_cpu DIR gpu GPU_NP 1 TIMEOUT 600)
  atoll_mpi_test(test_fused_ops DIR gpu GPU_NP 1)
  atoll_mpi_test(test_fp8 DIR gpu GPU_NP 1)
  atoll_mpi_test(test_attention_kernels DIR gpu GPU_NP 1)
  atoll_mpi_test(test_host_syncs DIR gpu GPU_NP 1)
  add_test(NAME gpu_watchdog
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/with_gpus.sh 2 bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/watchdog.sh
                   $<TARGET_FILE:atoll>)
  set_tests_properties(gpu_watchdog PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
  add_test(NAME gpu_binding
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/with_gpus.sh 1 bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/binding.sh
                   $<TARGET_FILE:atoll>)
  set_tests_properties(gpu_binding PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
else()
  add_test(NAME gpu_suite COMMAND bash -c "echo 'skipped: this build has no CUDA path (-DATOLL_WITH_CUDA=OFF)'; exit 77")
  set_tests_properties(gpu_suite PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endif()
