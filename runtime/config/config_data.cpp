// The data section: its rows of the field table, and the dataset lists data.train and data.val take.
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {
namespace {

constexpr const char* kListExample =
    "[{ path: data/web/, weight: 0.7 }, { path: data/code/*.bin, weight: 0.3 }]";

// One entry of a dataset list: a path, or a map of path and weight. "" or the problem line.
std::string parse_entry(const Rule& rule, size_t index, const YAML::Node& node, DatasetSource& out) {
  const std::string name = rule.name + "[" + std::to_string(index) + "]";
  const Rule path_rule{name + ".path", {}, "data/web/"};
  if (node.IsScalar()) return parse(path_rule, node, out.path);
  if (!node.IsMap())
    return "config: " + name + " = " + quoted(node) + " is neither a path nor { path, weight }; write e.g. " +
           rule.name + ": " + kListExample;
  for (const auto& item : node) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : quoted(item.first);
    if (key != "path" && key != "weight")
      return "config: " + name + " has an unknown key '" + key + "'; a dataset has path and weight";
  }
  if (!node["path"])
    return "config: " + name + " = " + quoted(node) +
           " has no path; write e.g. { path: data/web/, weight: 0.3 }";
  if (std::string problem = parse(path_rule, node["path"], out.path); !problem.empty()) return problem;
  if (!node["weight"]) return "";
  // A dataset's share is its weight over the sum of the weights: it must be above 0.
  return parse(Rule{name + ".weight", above(0), "0.3"}, node["weight"], out.weight);
}

}  // namespace

std::string show_datasets(const DatasetList& datasets) {
  if (datasets.size() == 1 && datasets[0].weight == 1.0) return yaml_value(datasets[0].path);
  std::vector<std::string> entries;
  for (const DatasetSource& d : datasets)
    entries.push_back("{path: " + yaml_value(d.path) + ", weight: " + yaml_value(d.weight) + "}");
  return "[" + text::joined(entries, ", ") + "]";
}

std::string parse(const Rule& rule, const YAML::Node& node, DatasetList& out) {
  if (node.IsScalar()) {
    DatasetSource single;
    if (std::string problem = parse(rule, node, single.path); !problem.empty()) return problem;
    out = {single};
    return "";
  }
  if (!node.IsSequence() || node.size() == 0)
    return problem(rule, quoted(node),
                   "is neither a path nor a list of datasets; write e.g. " + rule.name + ": " + kListExample);
  DatasetList datasets(node.size());
  for (size_t i = 0; i < node.size(); ++i)
    if (std::string problem = parse_entry(rule, i, node[i], datasets[i]); !problem.empty()) return problem;
  out = std::move(datasets);
  return "";
}

std::vector<Field> data_fields() {
  const SectionFields<DataConfig> data{"data", &Config::data};
  return {
      data("train", &DataConfig::train,
           "What to train on: a token shard (llm.c's .bin, or Megatron's .bin beside its .idx), a directory "
           "(its train*.bin, else every shard in it), a glob, or a list of { path, weight } blended by "
           "weight (each sequence from the dataset furthest behind its share)."),
      data("val", &DataConfig::val,
           "The validation loss's data, as data.train (a directory gives its val*.bin); read in order, "
           "blended by weight."),
      data("tokenizer", &DataConfig::tokenizer,
           "What the ids mean: bytes, or the tokenizer the shards were encoded with: a SentencePiece model, "
           "Llama 3's tokenizer.model or a Hugging Face tokenizer.json (told apart by content)."),
  };
}

}  // namespace atl::runtime::config_detail
