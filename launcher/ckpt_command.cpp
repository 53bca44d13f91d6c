// `atoll ckpt inspect DIR` and `atoll ckpt export DIR --out OUT` (runtime/inference/trained_model.h).
// inspect: what a checkpoint holds -- step, tokens, the layout it was saved under,
// the model, and per tensor its role, global shape, chunks and bytes -- with every chunk's CRC-32C
// verified. DIR is a checkpoint (step-N) or a directory of them (its LATEST is inspected). No MPI.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/shard_header.h"
#include "launcher/commands.h"
#include "runtime/inference/trained_model.h"
#include "runtime/metrics/metrics.h"
#include "runtime/process_exit.h"
#include "text/joined.h"

namespace atl::launcher {
namespace {

constexpr const char* kCkptUsage =
    "atoll ckpt inspect DIR | atoll ckpt export DIR --out OUT_DIR|FILE.safetensors";

std::string shape_of(const checkpoint::proto::Tensor& t) {
  return text::joined(t.global_shape(), " x ", [](int64_t d) { return std::to_string(d); });
}

// A path that is not a directory is bad input (exit 2), as a missing checkpoint.resume is; so is a
// directory without a committed checkpoint in it (the store's message) and damage: one code per
// cause across commands.
void require_directory(const std::string& dir) {
  if (!std::filesystem::is_directory(dir))
    throw std::invalid_argument(
        "ckpt: " + dir + " is not a directory; pass a checkpoint (run.dir/checkpoints or a step-N in it)");
}

int inspect(const std::string& dir_arg) {
  const std::string dir = runtime::checkpoint_in(dir_arg);
  const checkpoint::proto::Manifest m = checkpoint::read_manifest(dir);
  std::printf(
      "checkpoint %s\nstep %lld, %lld tokens, seed %lld, saved by islands %d x pp %d x dp %d x tp %d, ZeRO "
      "%d\n",
      dir.c_str(), static_cast<long long>(m.step()), static_cast<long long>(m.tokens()),
      static_cast<long long>(m.seed()), m.mesh().islands(), m.mesh().pp(), m.mesh().dp(), m.mesh().tp(),
      m.mesh().zero());
  std::printf("model %s\n\n%-45s %-17s %-14s %6s %10s  %s\n", m.model_config().c_str(), "tensor", "role",
              "shape", "chunks", "bytes", "checksums");
  int bad = 0;
  uint64_t total = 0, chunks = 0;
  for (const checkpoint::proto::Tensor& t : m.tensors()) {
    uint64_t bytes = 0;
    std::string problem;
    for (const checkpoint::proto::Chunk& c : t.chunks()) {
      bytes += c.length();
      try {
        checkpoint::read_chunk(dir, t, c);
      } catch (const checkpoint::CheckpointError& e) {
        if (problem.empty()) problem = e.what();
      }
    }
    total += bytes;
    chunks += static_cast<uint64_t>(t.chunks_size());
    bad += problem.empty() ? 0 : 1;
    const std::string role = checkpoint::role_name(t.role()) +
                             (t.island() > 0 ? "@" + std::to_string(t.island()) : std::string());  // islands
    std::printf("%-45s %-17s %-14s %6d %10s  %s\n", t.name().c_str(), role.c_str(), shape_of(t).c_str(),
                t.chunks_size(), runtime::format_bytes(static_cast<double>(bytes)).c_str(),
                problem.empty() ? "ok" : problem.c_str());
  }
  std::string header_problem;
  try {
    checkpoint::verify_shard_headers(dir, m);
  } catch (const checkpoint::CheckpointError& e) {
    header_problem = e.what();
    std::printf("\n%s\n", header_problem.c_str());
  }
  const std::string verdict = bad > 0                   ? std::to_string(bad) + " tensors damaged"
                              : !header_problem.empty() ? "a shard header is damaged"
                                                        : "every checksum verified";
  std::printf("\n%d tensors, %llu chunks, %d shard headers, %s: %s\n", m.tensors_size(),
              static_cast<unsigned long long>(chunks), m.shard_headers_size(),
              runtime::format_bytes(static_cast<double>(total)).c_str(), verdict.c_str());
  return bad == 0 && header_problem.empty() ? 0 : runtime::kExitBadInput;
}

}  // namespace

int ckpt_command(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout
        << "usage: " << kCkptUsage
        << "\n\nPrints what a checkpoint holds and verifies every chunk's checksum (exit 2 if any is "
           "damaged,\nas for every command given a damaged checkpoint, or if DIR is not one).\n"
        << "export: a Hugging Face Llama directory OUT_DIR -- model.safetensors (fp32), config.json and, for "
           "a\n"
        << "subword model, tokenizer.model or tokenizer.json + tokenizer_config.json -- that transformers' "
           "from_pretrained loads\n"
        << "(and model.init_from starts a run from); or one FILE.safetensors with config.json beside it.\n"
        << "DIR: a checkpoint (.../step-N) or a checkpoint directory (its LATEST).\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "inspect" && args.size() == 2) {
    require_directory(args[1]);
    return inspect(args[1]);
  }
  if (args[0] == "export" && args.size() == 4 && args[2] == "--out") {
    require_directory(args[1]);
    const int n = runtime::export_hugging_face(args[1], args[3]);
    std::cout << "exported " << n << " tensors to " << args[3] << "\n";
    return 0;
  }
  throw std::invalid_argument("expected `" + std::string(kCkptUsage) + "`");
}

}  // namespace atl::launcher
