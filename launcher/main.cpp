// atoll: the command-line entry point. `atoll train` is what every rank runs under mpirun/srun;
// `atoll launch` computes the rank count from the config and starts mpirun for you.
#include <iostream>
#include <string>

#include "checkpoint/checkpoint_error.h"
#include "launcher/commands.h"
#include "runtime/config/config.h"
#include "runtime/process_exit.h"

namespace {

constexpr const char* kUsage = R"(atoll - distributed LLM training runtime

usage: atoll COMMAND [ARGS]

commands:
  train CONFIG [--set key=value]...                 train on this rank (run under mpirun or srun)
  launch CONFIG [--np N] [--hostfile FILE | --slurm] [--max-restarts N] [--set key=value]... [-- ARGS]
                                                    start the job (mpirun or srun) with the layout's rank
                                                    count; restart it after failures
  data prepare --out DIR [--tokenizer MODEL] FILE... tokenize text files into train/val shards (bytes,
                                                    or a SentencePiece MODEL)
  tokenizer train --vocab N [--out MODEL] FILE...   train a SentencePiece subword model
  plan CONFIG [--np N] [--memory GIB] [--set key=value]...
                                                    per-rank memory and per-group traffic of the layout
                                                    (--memory: whether it fits a device; if not, what cp does)
  config show CONFIG [--set key=value]...           the resolved, checked config as YAML (starts nothing)
  config reference [--markdown]                     every config key: type, default, allowed values, meaning
  ckpt inspect DIR                                  a checkpoint's contents, every checksum verified
  ckpt export DIR --out OUT_DIR                     a Hugging Face Llama directory (transformers loads it)
  eval MODEL --data SHARD                           loss, perplexity, bits per byte of a checkpoint or
                                                    Hugging Face directory on a token shard
  sample MODEL --prompt TEXT [--temperature T ...]  generate text from a checkpoint or HF directory
  report RUN_DIR [--out FILE.svg]                   a run's summary and its loss curve as an SVG
  rendezvous [--port P] [--secret-file F] [--state FILE]
                                                    serve the meeting point of islands run as separate
                                                    jobs (outer.rendezvous: HOST:P), until SIGINT/SIGTERM;
                                                    --state keeps its rounds across a restart

options:
  -h, --help      show this help (or `atoll COMMAND --help`)
  --version       print the versions of Atoll and of the libraries it was built with

Configs are YAML (see examples/ and `atoll config reference`); --set overrides any field, e.g.
--set optim.lr=1e-3.
)";

int run_command(int argc, char** argv) {
  const atl::launcher::Args args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") return atl::launcher::version_command();
  const std::string command = args[0];
  const atl::launcher::Args rest(args.begin() + 1, args.end());
  try {
    if (command == "train") return atl::launcher::train_command(argc - 1, argv + 1);
    if (command == "launch") return atl::launcher::launch_command(rest);
    if (command == "data") return atl::launcher::data_command(rest);
    if (command == "plan") return atl::launcher::plan_command(rest);
    if (command == "config") return atl::launcher::config_command(rest);
    if (command == "ckpt") return atl::launcher::ckpt_command(rest);
    if (command == "report") return atl::launcher::report_command(rest);
    if (command == "rendezvous") return atl::launcher::rendezvous_command(rest);
    if (command == "tokenizer") return atl::launcher::tokenizer_command(rest);
    if (command == "eval") return atl::launcher::eval_command(rest);
    if (command == "sample") return atl::launcher::sample_command(rest);
  } catch (const atl::runtime::ConfigError& e) {
    std::cerr << "atoll: " << e.what() << "\n";
    return atl::runtime::kExitBadInput;
  } catch (const atl::checkpoint::CheckpointError& e) {
    // A damaged or mismatched checkpoint is input to fix, as `atoll launch` reports it.
    std::cerr << "atoll: " << e.what() << "\n";
    return atl::runtime::kExitBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "atoll: error: " << e.what() << "\n";
    return atl::runtime::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "atoll: error: " << e.what() << "\n";
    return atl::runtime::kExitFailure;
  }
  std::cerr << "atoll: unknown command '" << command << "'; run `atoll --help` for the list\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  atl::runtime::end_process(run_command(argc, argv));
}
