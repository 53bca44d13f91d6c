#include "runtime/metrics/data_lines.h"

#include "runtime/metrics/console_lines.h"
#include "text/joined.h"

namespace atl::runtime {
namespace {

std::string shards_and_tokens(const DatasetUse& use) {
  return with_commas(use.tokens) + " tokens in " + std::to_string(use.shards) +
         (use.shards == 1 ? " shard" : " shards");
}

}  // namespace

std::vector<std::string> data_lines(const std::vector<DatasetUse>& train, int seq,
                                    const std::string& suffix) {
  int64_t sequences = 0;
  for (const DatasetUse& use : train) sequences += use.sequences;
  const std::string counted = with_commas(sequences) + " sequences of " + std::to_string(seq) + " tokens";
  std::vector<std::string> lines;
  if (train.size() == 1) {
    lines.push_back("data: " + train[0].name + " (" + counted + ", " + shards_and_tokens(train[0]) + ")" +
                    suffix);
  } else {
    lines.push_back("data: " + std::to_string(train.size()) + " datasets blended by weight (" + counted +
                    ")" + suffix);
    for (const DatasetUse& use : train)
      lines.push_back(formatted("  %s: %s, weight %.3g (%.1f%% of sequences), %.2f epochs in this run",
                                use.name.c_str(), shards_and_tokens(use).c_str(), use.weight, 100 * use.share,
                                use.epochs));
  }
  std::vector<std::string> repeated;
  for (const DatasetUse& use : train)
    if (use.epochs > 1) repeated.push_back(use.name + formatted(" %.2f times", use.epochs));
  if (!repeated.empty())
    lines.push_back("data: read more than once in this run: " + text::joined(repeated, ", ") +
                    " (repeats weigh less than new tokens; more data or fewer steps avoid them)");
  return lines;
}

}  // namespace atl::runtime
