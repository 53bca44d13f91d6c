// `atoll sample MODEL --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K] [--seed S]`:
// text generated with a KV cache from a checkpoint (any layout, loaded into this one process) or a
// Hugging Face directory, decoded with the model's own tokenizer; the prompt begins as a prepared
// document does (the tokenizer's BOS, where `atoll data prepare` puts one before each document).
#include <iostream>
#include <string_view>

#include "launcher/commands.h"
#include "runtime/inference/sampling.h"

namespace atl::launcher {
namespace {
constexpr const char* kSampleUsage =
    "atoll sample MODEL --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K] [--seed S] [--ids]";
}

int sample_command(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout
        << "usage: " << kSampleUsage
        << "\n\nMODEL: a checkpoint (run/checkpoints, or a step-N in it; any layout) or a Hugging Face "
           "Llama\ndirectory. Prints TEXT and what the model writes after it, token by token: up to N "
           "tokens\n(default 128, fewer where model.seq ends). T 0 is greedy; otherwise softmax(logits / "
           "T)\nover the K most likely tokens (default T 1, K 0: all), drawn with seed S (default 0).\n"
           "--ids yes: print the generated token ids instead of text.\n";
    return args.empty() ? 2 : 0;
  }
  const Options o = parse_options(
      args, 0, {"--prompt", "--max-tokens", "--temperature", "--top-k", "--seed", "--ids"}, kSampleUsage);
  if (o.positional.size() != 1 || !o.has("--prompt"))
    throw std::invalid_argument(std::string("expected MODEL and --prompt TEXT; usage: ") + kSampleUsage);
  runtime::SamplingOptions options;
  options.max_tokens = static_cast<int>(o.integer("--max-tokens", options.max_tokens));
  options.temperature = o.real("--temperature", options.temperature);
  options.top_k = static_cast<int>(o.integer("--top-k", options.top_k));
  options.seed = static_cast<uint64_t>(o.integer("--seed", 0));
  if (options.max_tokens < 1 || options.temperature < 0 || options.top_k < 0)
    throw std::invalid_argument("--max-tokens must be at least 1, --temperature and --top-k at least 0");
  const bool ids = o.get("--ids", "no") == "yes";

  const runtime::TrainedModel trained = runtime::load_trained_model(o.positional[0]);
  const runtime::Tokenizer& tokenizer = *trained.tokenizer;
  // On stderr, so that the text on stdout stays only the text.
  std::cerr << "sample: " << trained.source << ", tokenizer " << tokenizer.description() << "\n";
  const std::string prompt = o.get("--prompt", "");
  // Begun as training documents were (Llama 3: <|begin_of_text|> first); printed without it.
  const std::vector<uint32_t> encoded = runtime::encode_prompt(tokenizer, prompt);
  if (static_cast<int64_t>(encoded.size()) > trained.config.seq)
    throw std::invalid_argument("--prompt is " + std::to_string(encoded.size()) +
                                " tokens, longer than model.seq = " + std::to_string(trained.config.seq) +
                                "; shorten it");
  if (prompt.empty() || encoded.empty()) throw std::invalid_argument("--prompt is empty; pass some text");
  options.stop_token = tokenizer.eos_id();
  runtime::CachedDecoder decoder(trained, {tokenizer.bos_id(), tokenizer.eos_id()});
  std::vector<uint32_t> generated;
  std::string printed;  // decoded so far: pieces decode in context, so print what the whole adds
  // Prints what the decoding of every generated token adds. A subword decoding that ends in U+FFFD
  // (a character whose byte-fallback pieces have not all come) waits for the rest, unless `last`.
  const auto show = [&](bool last) {
    static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
    const std::string text = tokenizer.decode(generated);
    const bool partial =
        text.size() >= kReplacement.size() &&
        text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
    if ((last || !partial) && text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
      std::cout << text.substr(printed.size()) << std::flush;
      printed = text;
    }
  };
  if (!ids) std::cout << prompt << std::flush;
  const std::vector<int64_t> tokens = runtime::generate(
      decoder, std::vector<int64_t>(encoded.begin(), encoded.end()), options, [&](int64_t token) {
        generated.push_back(static_cast<uint32_t>(token));
        if (!ids) show(false);
      });
  if (!ids) show(true);
  if (ids)
    for (size_t i = 0; i < tokens.size(); ++i) std::cout << (i ? " " : "") << tokens[i];
  std::cout << "\n";
  return 0;
}

}  // namespace atl::launcher
