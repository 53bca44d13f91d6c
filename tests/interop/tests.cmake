# Interoperability tests: Atoll's files read by the real tools (the packages of scripts/requirements.txt
# in the venv that ATOLL_TORCH_PYTHON names).

# TensorBoard's own event reader against a 2-rank run's tb/ and metrics.jsonl.
add_test(NAME interop_tensorboard
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interop/tensorboard.sh $<TARGET_FILE:atoll> ${ATOLL_TORCH_PYTHON})
set_tests_properties(interop_tensorboard PROPERTIES TIMEOUT 300 PROCESSORS 2
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMP_NUM_THREADS=1")

# transformers both ways. models: exports of TP x PP, tied and GQA models load in LlamaForCausalLM
# with the same logits; save_pretrained directories (sharded, bf16 and fp32) start an Atoll run with
# the same first loss; greedy sampling equals generate(). tokenizers: a subword tokenizer and Llama 3's,
# exported with the model, load in AutoTokenizer and encode to the same ids.
atoll_add_executable(atoll_logits SOURCES interop/atoll_logits.cpp DEPS atoll_inference)
foreach(part models tokenizers)
  add_test(NAME interop_transformers_${part}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interop/transformers.sh ${part} $<TARGET_FILE:atoll>
                   $<TARGET_FILE:atoll_logits> ${ATOLL_TORCH_PYTHON})
  set_tests_properties(interop_transformers_${part} PROPERTIES TIMEOUT 900 PROCESSORS 2
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMP_NUM_THREADS=1;HF_HUB_OFFLINE=1;TRANSFORMERS_VERBOSITY=warning")
endforeach()

# Llama 3's tokenizer (runtime/tokenizer/tiktoken_bpe.h) id for id against tiktoken with Meta's own
# tokenizer.model, split pattern and special tokens (the llama-models package), on hard cases, every
# code point and ~1.7 MB of English; decoding round-trips; text that is not UTF-8 is refused.
atoll_add_executable(atoll_tokenize SOURCES interop/atoll_tokenize.cpp DEPS atoll_tokenizer)
add_test(NAME interop_tiktoken
         COMMAND ${ATOLL_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/interop/tiktoken_check.py
                 $<TARGET_FILE:atoll_tokenize>)
set_tests_properties(interop_tiktoken PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")

# A Hugging Face tokenizer.json (runtime/tokenizer/tokenizer_json_bpe.h), written by transformers'
# converter from the same Llama 3 file, id for id against the tokenizers package on the same corpus.
add_test(NAME interop_tokenizer_json
         COMMAND ${ATOLL_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/interop/tokenizer_json_check.py
                 $<TARGET_FILE:atoll_tokenize>)
set_tests_properties(interop_tokenizer_json PROPERTIES TIMEOUT 300
  ENVIRONMENT "OMP_NUM_THREADS=1;RAYON_NUM_THREADS=1;HF_HUB_OFFLINE=1;TRANSFORMERS_VERBOSITY=warning")

# Megatron's .bin/.idx (runtime/data/megatron_shard.h): files megatron-core's own builder writes (uint16
# and int32 tokens, documents of several items, an empty document) read by Atoll as megatron-core's
# IndexedDataset reads them -- the same tokens, and document starts where its document index says.
atoll_add_executable(atoll_read_shard SOURCES interop/atoll_read_shard.cpp DEPS atoll_data)
add_test(NAME interop_megatron
         COMMAND ${ATOLL_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/interop/megatron_check.py
                 $<TARGET_FILE:atoll_read_shard>)
set_tests_properties(interop_megatron PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
