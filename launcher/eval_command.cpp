// `atoll eval MODEL --data SHARD [--max-sequences N] [--batch B]`: loss, perplexity and bits per
// byte of a checkpoint (any layout, loaded into this one process) or a Hugging Face directory on a
// token shard (runtime/inference/evaluation.h). No MPI.
#include <cstdio>
#include <iostream>

#include "launcher/commands.h"
#include "runtime/inference/evaluation.h"
#include "runtime/inference/local_model.h"

namespace atl::launcher {
namespace {
constexpr const char* kEvalUsage = "atoll eval MODEL --data SHARD [--max-sequences N] [--batch B]";
}

int eval_command(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout
        << "usage: " << kEvalUsage
        << "\n\nMODEL: a checkpoint (run/checkpoints, or a step-N in it; any layout) or a Hugging Face "
           "Llama\ndirectory (atoll ckpt export, save_pretrained). Prints the mean next-token loss over "
           "SHARD's\nsequences of model.seq + 1 tokens in file order (all, or the first N), its "
           "perplexity, and bits\nper byte of the text the tokens stand for (comparable across "
           "tokenizers).\n";
    return args.empty() ? 2 : 0;
  }
  const Options o = parse_options(args, 0, {"--data", "--max-sequences", "--batch"}, kEvalUsage);
  if (o.positional.size() != 1 || !o.has("--data"))
    throw std::invalid_argument(std::string("expected MODEL and --data SHARD; usage: ") + kEvalUsage);
  const int batch = static_cast<int>(o.integer("--batch", 8));
  if (batch < 1) throw std::invalid_argument("--batch " + std::to_string(batch) + " must be at least 1");
  const runtime::TrainedModel trained = runtime::load_trained_model(o.positional[0]);
  const runtime::LocalModel model(trained);
  const runtime::EvalResult r = runtime::evaluate(model, *trained.tokenizer, o.get("--data", ""),
                                                  o.integer("--max-sequences", 0), batch);
  std::printf("eval: %s, tokenizer %s\n", trained.source.c_str(), trained.tokenizer->description().c_str());
  std::printf("eval: %s: %lld sequences, %lld tokens, %lld bytes of text\n", o.get("--data", "").c_str(),
              static_cast<long long>(r.sequences), static_cast<long long>(r.tokens),
              static_cast<long long>(r.bytes));
  std::printf("loss %.4f  perplexity %.3f  bits/byte %.4f\n", r.loss, r.perplexity, r.bits_per_byte);
  return 0;
}

}  // namespace atl::launcher
