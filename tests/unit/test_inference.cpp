// Using a trained model in one process (runtime/inference/, runtime/tokenizer/): the KV-cache decoder
// against the training model's forward, sampling, the model description and Hugging Face config
// round trips, the SentencePiece tokenizer and subword shards.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "parallel/document_mask.h"
#include "runtime/data/data_prepare.h"
#include "runtime/data/token_shard.h"
#include "runtime/inference/cached_decoder.h"
#include "runtime/inference/evaluation.h"
#include "runtime/inference/local_model.h"
#include "runtime/inference/sampling.h"
#include "runtime/model/hugging_face.h"
#include "runtime/model/llama.h"
#include "runtime/model/model_description.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_training.h"
#include "tests/error_of.h"
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

// The byte-level tokenizer with a token that marks documents, as a subword tokenizer's BOS or EOS.
class MarkingBytes : public Tokenizer {
 public:
  explicit MarkingBytes(DocumentMarkers markers) : bytes_(byte_tokenizer()), markers_(markers) {}
  int vocab_size() const override { return bytes_->vocab_size(); }
  std::vector<uint32_t> encode(const std::string& text) const override { return bytes_->encode(text); }
  std::string decode(const std::vector<uint32_t>& ids) const override { return bytes_->decode(ids); }
  int byte_length(uint32_t id) const override { return bytes_->byte_length(id); }
  std::string description() const override { return "bytes with document markers"; }
  std::string serialized() const override { return ""; }
  std::vector<HuggingFaceFile> hugging_face_files(int) const override { return {}; }
  int bos_id() const override { return markers_.bos; }
  int eos_id() const override { return markers_.eos; }

 private:
  std::unique_ptr<Tokenizer> bytes_;
  DocumentMarkers markers_;
};

// Three documents in 24 tokens, marked by EOS 3 (starts at 7 and 16) or by BOS 5 (starts at 7 and 16).
struct MarkedDocuments {
  DocumentMarkers markers;
  std::vector<int64_t> tokens;
};

std::vector<MarkedDocuments> marked_documents(int64_t seq, int64_t vocab) {
  std::vector<int64_t> ids = some_tokens(seq, vocab);
  for (int64_t& id : ids) id = id == 3 || id == 5 ? id + 1 : id;  // no stray markers
  std::vector<int64_t> eos = ids, bos = ids;
  eos[6] = eos[15] = 3;
  bos[7] = bos[16] = 5;
  return {{{-1, 3}, eos}, {{5, -1}, bos}};
}

at::Tensor longs(const std::vector<int64_t>& ids) {
  return at::tensor(ids, at::TensorOptions().dtype(at::kLong));
}

// With model.document_mask the KV-cache decoder (atoll sample, train.sample_every) masks the documents
// its tokens mark as the training forward masks those the loader finds.
TEST(CachedDecoder, MasksDocumentsAsTrainingDoes) {
  ModelConfig config = small_model(false, 2);
  config.document_mask = true;
  const TrainedModel trained = random_model(config);
  for (const MarkedDocuments& marked : marked_documents(config.seq, config.vocab)) {
    const at::Tensor tokens = longs(marked.tokens).unsqueeze(0);
    const at::Tensor documents = atl::parallel::document_ids({{7, 16}}, config.seq);
    const LocalModel local(trained);
    const at::Tensor expected = local.logits(tokens, documents)[0];
    ASSERT_GT((expected - local.logits(tokens)[0]).abs().max().item<double>(), 1e-3)
        << "the documents change the logits: the comparison below can tell";
    CachedDecoder decoder(trained, marked.markers);
    const int64_t prompt = 9;  // past the first start: the prompt's own documents, then the fed ones'
    at::Tensor last =
        decoder.feed(std::vector<int64_t>(marked.tokens.begin(), marked.tokens.begin() + prompt));
    EXPECT_LT((last - expected[prompt - 1]).abs().max().item<double>(), 1e-5);
    for (int64_t p = prompt; p < config.seq; ++p) {
      last = decoder.feed({marked.tokens[static_cast<size_t>(p)]});
      EXPECT_LT((last - expected[p]).abs().max().item<double>(), 1e-5)
          << "position " << p << " bos " << marked.markers.bos;
    }
    decoder.reset();
    EXPECT_LT((decoder.feed(marked.tokens) - expected[-1]).abs().max().item<double>(), 1e-5)
        << "a reset decoder starts again at document 0";
  }
}

class MaskedEvaluation : public atl::test::TempDirTest {};

// atoll eval of a document-masked model: each document's tokens scored as if it were alone (a
// dense reference, document by document), and the unmasked loss without the mask.
TEST_F(MaskedEvaluation, ScoresEachDocumentAlone) {
  ModelConfig config = small_model(true, 4);
  config.document_mask = true;
  const TrainedModel trained = random_model(config);
  const LocalModel local(trained);
  const MarkedDocuments marked = marked_documents(config.seq + 1, config.vocab).front();
  const std::string shard = path("val.bin");
  write_token_shard(shard, std::vector<uint32_t>(marked.tokens.begin(), marked.tokens.end()));
  const MarkingBytes tokenizer(marked.markers);
  const EvalResult masked = evaluate(local, tokenizer, shard);
  ASSERT_EQ(masked.sequences, 1);

  const at::Tensor window = longs(marked.tokens);
  double nats = 0.0;
  const std::vector<int64_t> bounds{0, 7, 16, config.seq};
  for (size_t d = 0; d + 1 < bounds.size(); ++d) {
    const int64_t begin = bounds[d], length = bounds[d + 1] - bounds[d];
    const at::Tensor logits = local.logits(window.narrow(0, begin, length).unsqueeze(0))[0];
    nats += at::cross_entropy_loss(logits, window.narrow(0, begin + 1, length), {}, at::Reduction::Sum)
                .item<double>();
  }
  const double expected = nats / static_cast<double>(config.seq);
  EXPECT_NEAR(masked.loss, expected, 1e-5 * expected);

  TrainedModel unmasked_model = random_model(small_model(true, 4));
  const EvalResult unmasked = evaluate(LocalModel(unmasked_model), tokenizer, shard);
  EXPECT_GT(std::abs(unmasked.loss - expected), 1e-3) << "the documents change the loss: the check can tell";
  EXPECT_NEAR(
      unmasked.loss,
      local.loss(window.narrow(0, 0, config.seq).unsqueeze(0), window.narrow(0, 1, config.seq).unsqueeze(0))
          .item<double>(),
      1e-6);

  // Nothing marks the documents: the mask cannot be rebuilt, so eval refuses rather than scoring unmasked.
  const std::string refusal = atl::test::error_of([&] { evaluate(local, *byte_tokenizer(), shard); });
  EXPECT_NE(refusal.find("records no document starts"), std::string::npos) << refusal;
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

// model.document_mask travels with the checkpoint so that eval and sample mask as training did; a
// description without it (an unmasked run, or a checkpoint from before it was recorded) reads as
// unmasked; a resume may switch it, the architecture being the same.
TEST(ModelDescription, RecordsTheDocumentMaskApartFromTheArchitecture) {
  ModelConfig m = small_model(false, 2);
  const std::string unmasked = describe_model(m);
  EXPECT_EQ(unmasked.find("document_mask"), std::string::npos) << "unmasked descriptions stay as they were";
  m.document_mask = true;
  const std::string masked = describe_model(m);
  EXPECT_EQ(masked, unmasked + " document_mask=true");
  EXPECT_TRUE(model_from_description(masked).document_mask);
  EXPECT_FALSE(model_from_description(unmasked).document_mask);
  EXPECT_TRUE(same_architecture(unmasked, m));
  EXPECT_TRUE(same_architecture(masked, small_model(false, 2)));
  EXPECT_FALSE(same_architecture(masked, small_model(false, 4)));
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
