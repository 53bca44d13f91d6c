# Multi-rank tests and the rank counts each runs with (see atoll_mpi_test in tests/CMakeLists.txt);
# GPU_NP: the rank counts the trainer-based ones run with again on GPUs (label gpu, tests/gpu).
atoll_mpi_test(test_communicator NP 2 4 DEPS atoll_comm HIDE_GPUS)  # its NCCL case checks the error without a GPU
atoll_mpi_test(test_device_mesh NP 8 DEPS atoll_comm)
atoll_mpi_test(test_layout_parity NP 2 4 GPU_NP 2 4 TIMEOUT 600)
atoll_mpi_test(test_grad_clip NP 2 DEPS atoll_optim atoll_parallel)
atoll_mpi_test(test_tensor_parallel NP 2 4 DEPS atoll_parallel)
atoll_mpi_test(test_context_parallel NP 2 4 GPU_NP 2 4 TIMEOUT 600)  # on GPUs: ring attention through SDPA's flash/efficient kernels against cp 1
atoll_mpi_test(test_pipeline_parity NP 2 4 8 GPU_NP 2 4 8 TIMEOUT 600)
atoll_mpi_test(test_zero_parity NP 2 4 GPU_NP 2 4 TIMEOUT 900)
atoll_mpi_test(test_recompute NP 2 8 GPU_NP 2 8 TIMEOUT 600)
atoll_mpi_test(test_mixed_precision NP 2 4 GPU_NP 2 4 TIMEOUT 900)
atoll_mpi_test(test_checkpoint NP 1 2 4 GPU_NP 1 2 4 TIMEOUT 600)
atoll_mpi_test(test_resharding NP 8 TIMEOUT 600)
atoll_mpi_test(test_islands NP 2 4 GPU_NP 2 4 TIMEOUT 900)
atoll_mpi_test(test_exchange_authentication NP 3 DEPS atoll_optim)
atoll_mpi_test(test_sliced_average NP 3 4 DEPS atoll_optim)
atoll_mpi_test(test_placement NP 2 HIDE_GPUS)  # the node gather of completed_placement
