// Using a trained model in one process (runtime/inference/, runtime/tokenizer/): the KV-cache decoder
// against the training model's forward, sampling, the model description and Hugging Face config
// round trips, the SentencePiece tokenizer and subword shards.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/data/data_prepare.h"
#include "runtime/data/token_shard.h"
#include "runtime/inference/cached_decoder.h"
#include "runtime/inference/local_model.h"
#include "runtime/inference/sampling.h"
#include "runtime/model/hugging_face.h"
#include "runtime/model/llama.h"
#include "runtime/model/model_description.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_training.h"
#include "tests/temp_dir_test.h"

namespace {

using namespace atl::runtime;

ModelConfig small_model(bool tied, int kv_heads) {
  ModelConfig m;
  m.vocab = 100;
  m.dim = 32;
  m.layers = 2;
  m.heads = 4;
  m.kv_heads = kv_heads;
  m.ffn = 48;
  m.seq = 24;
  m.tie_embeddings = tied;
  return m;
}

// A model with the layout-invariant random initialisation, as canonical weights.
TrainedModel random_model(const ModelConfig& config, int64_t seed = 7) {
  atl::parallel::FlatParameters params(LlamaModel::param_infos(config), at::kFloat);
  initialize_parameters(config, seed, params);
  TrainedModel trained;
  trained.config = config;
  for (const auto& e : params.entries()) {
    at::Tensor full = e.value.clone();
    if (e.info.name == "model.embed_tokens.weight" || e.info.name == "lm_head.weight")
      full = full.narrow(0, 0, config.vocab).clone();  // unpad the vocabulary rows
    trained.weights[e.info.name] = full;
  }
  trained.tokenizer = byte_tokenizer();
  return trained;
}

std::vector<int64_t> some_tokens(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % vocab);
  return ids;
}

TEST(CachedDecoder, EqualsTheTrainingForwardAtEveryPosition) {
  for (bool tied : {false, true})
    for (int kv_heads : {4, 2}) {  // multi-head and grouped-query attention
      const TrainedModel trained = random_model(small_model(tied, kv_heads));
      const std::vector<int64_t> ids = some_tokens(trained.config.seq, trained.config.vocab);
      const at::Tensor expected =
          LocalModel(trained).logits(at::tensor(ids, at::TensorOptions().dtype(at::kLong)).unsqueeze(0))[0];
      CachedDecoder decoder(trained);
      // The prompt in one piece, then a token at a time: both paths of the cache.
      const int64_t prompt = 5;
      at::Tensor last = decoder.feed(std::vector<int64_t>(ids.begin(), ids.begin() + prompt));
      EXPECT_LT((last - expected[prompt - 1]).abs().max().item<double>(), 1e-5);
      for (int64_t p = prompt; p < trained.config.seq; ++p) {
        last = decoder.feed({ids[p]});
        EXPECT_LT((last - expected[p]).abs().max().item<double>(), 1e-5)
            << "position " << p << " tied " << tied << " kv_heads " << kv_heads;
      }
      EXPECT_THROW(decoder.feed({1}), std::invalid_argument) << "the cache ends at model.seq";
    }
}

TEST(Sampling, GreedyIsTheArgmaxAndASeedRepeatsItsDraw) {
  const TrainedModel trained = random_model(small_model(false, 2));
  CachedDecoder decoder(trained);
  const std::vector<int64_t> prompt = some_tokens(4, trained.config.vocab);
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 6;
  const std::vector<int64_t> tokens = generate(decoder, prompt, greedy);
  ASSERT_EQ(tokens.size(), 6u);
  // Each greedy token is the argmax of the full forward over what came before it.
  std::vector<int64_t> sequence = prompt;
  const LocalModel local(trained);
  for (int64_t token : tokens) {
    const at::Tensor logits =
        local.logits(at::tensor(sequence, at::TensorOptions().dtype(at::kLong)).unsqueeze(0))[0][-1];
    EXPECT_EQ(token, logits.argmax().item<int64_t>());
    sequence.push_back(token);
  }
  SamplingOptions top1 = greedy;
  top1.temperature = 1.5;
  top1.top_k = 1;
  EXPECT_EQ(generate(decoder, prompt, top1), tokens) << "top-k 1 samples the argmax";
  SamplingOptions sampled;
  sampled.max_tokens = 12;
  sampled.seed = 3;
  const std::vector<int64_t> first = generate(decoder, prompt, sampled);
  EXPECT_EQ(generate(decoder, prompt, sampled), first) << "the same seed draws the same tokens";
  sampled.seed = 4;
  EXPECT_NE(generate(decoder, prompt, sampled), first) << "another seed draws others";
  SamplingOptions long_run = greedy;
  long_run.max_tokens = 100;
  EXPECT_EQ(generate(decoder, prompt, long_run).size(), static_cast<size_t>(trained.config.seq - 4 + 1))
      << "generation stops where model.seq ends";
  EXPECT_THROW(generate(decoder, some_tokens(trained.config.seq + 1, 100), greedy), std::invalid_argument);
  EXPECT_THROW(generate(decoder, {}, greedy), std::invalid_argument);
}

TEST(ModelDescription, RoundTripsEveryArchitectureField) {
  ModelConfig m = small_model(true, 2);
  m.rope_theta = 500000.0;
  m.norm_eps = 1e-6;
  const ModelConfig back = model_from_description(describe_model(m));
  EXPECT_EQ(describe_model(back), describe_model(m));
  EXPECT_EQ(back.kv_heads, 2);
  EXPECT_TRUE(back.tie_embeddings);
  EXPECT_THROW(model_from_description("vocab=256 dim=64"), std::invalid_argument);
  EXPECT_THROW(model_from_description(describe_model(m) + " layers=x"), std::invalid_argument);
}

class HuggingFaceConfig : public atl::test::TempDirTest {
 protected:
  std::string write_config(const nlohmann::json& config) {
    std::filesystem::create_directories(path("hf"));
    std::ofstream(path("hf/config.json")) << config.dump();
    return path("hf");
  }
};

TEST_F(HuggingFaceConfig, RoundTripsAndRefusesOtherArchitectures) {
  ModelConfig m = small_model(true, 2);
  m.rope_theta = 250000.0;
  const nlohmann::json written = nlohmann::json::parse(hugging_face_config_json(m));
  EXPECT_EQ(describe_model(read_hugging_face_config(write_config(written))), describe_model(m));
  // transformers 4.x spelling: rope_theta at the top level only.
  nlohmann::json old_style = written;
  old_style.erase("rope_parameters");
  EXPECT_EQ(read_hugging_face_config(write_config(old_style)).rope_theta, 250000.0);
  const auto error_of = [&](nlohmann::json config) {
    try {
      read_hugging_face_config(write_config(config));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json gpt2 = written;
  gpt2["model_type"] = "gpt2";
  EXPECT_NE(error_of(gpt2).find("of type 'gpt2'; Atoll trains Llama"), std::string::npos);
  nlohmann::json scaled = written;
  scaled["rope_parameters"]["rope_type"] = "linear";
  EXPECT_NE(error_of(scaled).find("RoPE is of type 'linear'"), std::string::npos);
  nlohmann::json biased = written;
  biased["attention_bias"] = true;
  EXPECT_NE(error_of(biased).find("biases"), std::string::npos);
  nlohmann::json no_vocab = written;
  no_vocab.erase("vocab_size");
  EXPECT_NE(error_of(no_vocab).find("has no vocab_size"), std::string::npos);
}

class SentencePiece : public atl::test::TempDirTest {};

TEST_F(SentencePiece, TrainsEncodesDecodesAndCountsBytes) {
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += "def function_" + std::to_string(i) + "(x):\n    return x * " + std::to_string(i) +
            "  # caf\xC3\xA9\n";
  const std::string corpus = write_file("corpus.txt", text);
  TokenizerTrainingOptions options;
  options.inputs = {corpus};
  options.vocab = 300;
  options.out = path("sp/tokenizer.model");
  train_tokenizer(options);
  const std::unique_ptr<Tokenizer> sp = load_tokenizer(options.out);
  EXPECT_EQ(sp->vocab_size(), 300);
  EXPECT_EQ(sp->description(), "sentencepiece (vocab 300)");
  EXPECT_EQ(sp->bos_id(), 1);
  EXPECT_EQ(sp->eos_id(), 2);
  // Byte fallback: any bytes round-trip, also ones never seen in training; no space is added.
  for (const std::string& sample :
       {std::string("    return x * 12  # caf\xC3\xA9\n"), std::string("\t\x01 \xE2\x98\x83 zzz")}) {
    const std::vector<uint32_t> ids = sp->encode(sample);
    EXPECT_EQ(sp->decode(ids), sample);
    int64_t bytes = 0;
    for (uint32_t id : ids) bytes += sp->byte_length(id);
    EXPECT_EQ(bytes, static_cast<int64_t>(sample.size())) << "byte lengths sum to the text's bytes";
  }
  EXPECT_THROW(load_tokenizer(corpus), std::invalid_argument) << "a text file is not a model";
  EXPECT_THROW(load_tokenizer(path("missing.model")), std::invalid_argument);
  options.vocab = 10;
  EXPECT_THROW(train_tokenizer(options), std::invalid_argument);

  // Subword shards: the same text split at the same byte as the byte-level shards, in fewer tokens.
  PrepareOptions prepare;
  prepare.inputs = {corpus};
  prepare.out_dir = path("shards");
  prepare.tokenizer = options.out;
  prepare.threads = 2;
  const PrepareResult result = prepare_shards(prepare);
  EXPECT_EQ(result.bytes_per_token, 2);
  EXPECT_EQ(result.val_bytes, static_cast<int64_t>(static_cast<double>(text.size()) * 0.05));
  EXPECT_LT(result.train_tokens + result.val_tokens, static_cast<int64_t>(text.size()));
  const TokenShard val(result.val_path);
  std::vector<int64_t> ids(static_cast<size_t>(val.size()));
  val.read(0, val.size(), ids.data());
  EXPECT_EQ(sp->decode(std::vector<uint32_t>(ids.begin(), ids.end())),
            text.substr(text.size() - result.val_bytes));
  EXPECT_EQ(load_tokenizer(result.tokenizer_path)->serialized(), sp->serialized());
}

}  // namespace
