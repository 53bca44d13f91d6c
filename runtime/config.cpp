#include "runtime/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

namespace atl::runtime {
namespace {

// One config field: how to read it from YAML (appending problems) and how to print it.
struct Field {
  std::string section, key;
  std::function<void(Config&, const YAML::Node&, std::vector<std::string>&)> read;
  std::function<std::string(const Config&)> show;
  std::string name() const { return section + "." + key; }
};

std::string quoted(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  std::ostringstream out;
  out << YAML::Dump(node);
  return out.str();
}

// The shortest decimal that reads back as the same double (3e-4, not 0.00029999999999999997).
std::string format_double(double v) {
  std::string s;
  for (int precision = 1; precision <= 17; ++precision) {
    std::ostringstream out;
    out.precision(precision);
    out << v;
    s = out.str();
    if (std::stod(s) == v) break;
  }
  // Keep YAML typing: a whole number like 25 must stay a float when read back.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

template <typename T>
std::string show_value(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, double>)
    return format_double(v);
  else if constexpr (std::is_same_v<T, std::string>)
    return v;
  else
    return std::to_string(v);
}

const char* type_hint(const std::string& type) {
  if (type == "an integer") return "e.g. 256";
  if (type == "a number") return "e.g. 3.0e-4";
  if (type == "a boolean") return "true or false";
  return "e.g. a word or path";
}

// A numeric or string field bound to `Section Config::*section_member` / `T Section::*member`,
// with an inclusive range (numbers) or a set of allowed values (strings).
template <typename Section, typename T>
Field make_field(const char* section, const char* key, Section Config::*section_member, T Section::*member,
                 double min = -std::numeric_limits<double>::infinity(),
                 double max = std::numeric_limits<double>::infinity(),
                 std::vector<std::string> choices = {}) {
  Field f;
  f.section = section;
  f.key = key;
  const std::string name = f.name();
  f.read = [=](Config& c, const YAML::Node& node, std::vector<std::string>& problems) {
    const std::string type = std::is_same_v<T, bool>       ? "a boolean"
                             : std::is_integral_v<T>       ? "an integer"
                             : std::is_floating_point_v<T> ? "a number"
                                                           : "a string";
    T value;
    try {
      if (!node.IsScalar()) throw YAML::Exception(YAML::Mark(), "not a scalar");
      value = node.as<T>();
    } catch (const YAML::Exception&) {
      problems.push_back("config: " + name + " = " + quoted(node) + " is not " + type + "; write " + name +
                         ": " + type_hint(type));
      return;
    }
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const double v = static_cast<double>(value);
      if (v < min || v > max || std::isnan(v)) {
        std::string range =
            max == std::numeric_limits<double>::infinity()
                ? ">= " + show_value(static_cast<T>(min))
                : "in [" + show_value(static_cast<T>(min)) + ", " + show_value(static_cast<T>(max)) + "]";
        problems.push_back("config: " + name + " = " + show_value(value) + " must be " + range + "; set " +
                           name + " to a value " + range);
        return;
      }
    }
    if constexpr (std::is_same_v<T, std::string>) {
      if (!choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end()) {
        std::string list;
        for (const std::string& ch : choices) list += (list.empty() ? "" : ", ") + ch;
        problems.push_back("config: " + name + " = '" + value + "' is not one of " + list +
                           "; pick one of them");
        return;
      }
    }
    c.*section_member.*member = value;
  };
  f.show = [=](const Config& c) { return show_value(c.*section_member.*member); };
  return f;
}

// optim.betas: a two-element list mapped to beta1 / beta2.
Field betas_field() {
  Field f;
  f.section = "optim";
  f.key = "betas";
  f.read = [](Config& c, const YAML::Node& node, std::vector<std::string>& problems) {
    try {
      if (!node.IsSequence() || node.size() != 2) throw YAML::Exception(YAML::Mark(), "not a pair");
      const double b1 = node[0].as<double>(), b2 = node[1].as<double>();
      if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1)) {
        problems.push_back("config: optim.betas = [" + show_value(b1) + ", " + show_value(b2) +
                           "] must both be in [0, 1); e.g. optim.betas: [0.9, 0.95]");
        return;
      }
      c.optim.beta1 = b1;
      c.optim.beta2 = b2;
    } catch (const YAML::Exception&) {
      problems.push_back("config: optim.betas = " + quoted(node) +
                         " is not a list of two numbers; write optim.betas: [0.9, 0.95]");
    }
  };
  f.show = [](const Config& c) {
    return "[" + show_value(c.optim.beta1) + ", " + show_value(c.optim.beta2) + "]";
  };
  return f;
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = [] {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    using C = Config;
    return std::vector<Field>{
        make_field("run", "dir", &C::run, &RunConfig::dir),
        make_field("run", "seed", &C::run, &RunConfig::seed, 0),
        make_field("run", "threads", &C::run, &RunConfig::threads, 0),
        make_field("model", "vocab", &C::model, &ModelConfig::vocab, 2),
        make_field("model", "dim", &C::model, &ModelConfig::dim, 1),
        make_field("model", "layers", &C::model, &ModelConfig::layers, 1),
        make_field("model", "heads", &C::model, &ModelConfig::heads, 1),
        make_field("model", "kv_heads", &C::model, &ModelConfig::kv_heads, 1),
        make_field("model", "ffn", &C::model, &ModelConfig::ffn, 1),
        make_field("model", "seq", &C::model, &ModelConfig::seq, 1),
        make_field("model", "tie_embeddings", &C::model, &ModelConfig::tie_embeddings),
        make_field("model", "rope_theta", &C::model, &ModelConfig::rope_theta, 1.0),
        make_field("model", "norm_eps", &C::model, &ModelConfig::norm_eps, 0.0, 1.0),
        make_field("model", "init_std", &C::model, &ModelConfig::init_std, 0.0, 1.0),
        make_field("parallel", "islands", &C::parallel, &ParallelConfig::islands, 1),
        make_field("parallel", "pp", &C::parallel, &ParallelConfig::pp, 1),
        make_field("parallel", "dp", &C::parallel, &ParallelConfig::dp, 1),
        make_field("parallel", "tp", &C::parallel, &ParallelConfig::tp, 1),
        make_field("parallel", "zero", &C::parallel, &ParallelConfig::zero, 0, 3),
        make_field("parallel", "microbatches", &C::parallel, &ParallelConfig::microbatches, 1),
        make_field("parallel", "schedule", &C::parallel, &ParallelConfig::schedule, -kInf, kInf,
                   {"gpipe", "1f1b", "interleaved"}),
        make_field("parallel", "virtual_stages", &C::parallel, &ParallelConfig::virtual_stages, 1),
        make_field("parallel", "bucket_mb", &C::parallel, &ParallelConfig::bucket_mb, 1e-6),
        make_field("parallel", "sequence_parallel", &C::parallel, &ParallelConfig::sequence_parallel),
        make_field("train", "steps", &C::train, &TrainConfig::steps, 1),
        make_field("train", "global_batch", &C::train, &TrainConfig::global_batch, 1),
        make_field("train", "log_every", &C::train, &TrainConfig::log_every, 1),
        make_field("train", "eval_every", &C::train, &TrainConfig::eval_every, 0),
        make_field("train", "eval_sequences", &C::train, &TrainConfig::eval_sequences, 0),
        make_field("optim", "lr", &C::optim, &OptimConfig::lr, 1e-12),
        make_field("optim", "min_lr", &C::optim, &OptimConfig::min_lr, 0.0),
        make_field("optim", "warmup", &C::optim, &OptimConfig::warmup, 0),
        betas_field(),
        make_field("optim", "eps", &C::optim, &OptimConfig::eps, 1e-30),
        make_field("optim", "weight_decay", &C::optim, &OptimConfig::weight_decay, 0.0),
        make_field("optim", "grad_clip", &C::optim, &OptimConfig::grad_clip, 0.0),
        make_field("optim", "schedule", &C::optim, &OptimConfig::schedule, -kInf, kInf,
                   {"cosine", "constant", "wsd"}),
        make_field("data", "train", &C::data, &DataConfig::train),
        make_field("data", "val", &C::data, &DataConfig::val),
    };
  }();
  return table;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the closest candidate within a few edits, else "".
std::string suggestion(const std::string& wrong, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, wrong.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(wrong, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const Field& f : fields())
    if (std::find(names.begin(), names.end(), f.section) == names.end()) names.push_back(f.section);
  return names;
}

const Field* find_field(const std::string& section, const std::string& key) {
  for (const Field& f : fields())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> keys;
  for (const Field& f : fields())
    if (f.section == section) keys.push_back(f.key);
  return keys;
}

// Applies "section.key=value" to the YAML tree; problems go to `problems`.
void apply_override(YAML::Node& root, const std::string& text, std::vector<std::string>& problems) {
  const size_t eq = text.find('=');
  const size_t dot = text.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    problems.push_back("config: --set " + text + ": expected section.key=value, e.g. --set optim.lr=1e-3");
    return;
  }
  const std::string section = text.substr(0, dot), key = text.substr(dot + 1, eq - dot - 1);
  if (!find_field(section, key)) {
    std::vector<std::string> all;
    for (const Field& f : fields()) all.push_back(f.name());
    problems.push_back("config: --set " + text + ": unknown key '" + section + "." + key + "'" +
                       suggestion(section + "." + key, all));
    return;
  }
  try {
    root[section][key] = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    problems.push_back("config: --set " + text + ": the value is not valid YAML (" + e.msg + ")");
  }
}

}  // namespace

ConfigError::ConfigError(const std::vector<std::string>& problems)
    : std::runtime_error([&] {
        std::string joined;
        for (const std::string& p : problems) joined += (joined.empty() ? "" : "\n") + p;
        return joined;
      }()),
      problems_(problems) {}

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides) {
  std::vector<std::string> problems;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError({"config: not valid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg});
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw ConfigError({"config: the top level must be a map of sections (run, model, ...)"});
  for (const std::string& o : overrides) apply_override(root, o, problems);

  Config config;
  const std::vector<std::string> sections = section_names();
  for (const auto& section_entry : root) {
    const std::string section = section_entry.first.as<std::string>();
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
      problems.push_back("config: unknown section '" + section + "'" + suggestion(section, sections));
      continue;
    }
    const YAML::Node& body = section_entry.second;
    if (body.IsNull()) continue;
    if (!body.IsMap()) {
      problems.push_back("config: section '" + section + "' must be a map of key: value");
      continue;
    }
    for (const auto& entry : body) {
      const std::string key = entry.first.as<std::string>();
      const Field* field = find_field(section, key);
      if (!field) {
        problems.push_back("config: unknown key '" + section + "." + key + "'" +
                           suggestion(key, keys_of(section)));
        continue;
      }
      field->read(config, entry.second, problems);
    }
  }
  if (problems.empty() && config.optim.min_lr > config.optim.lr)
    problems.push_back("config: optim.min_lr = " + show_value(config.optim.min_lr) + " exceeds optim.lr = " +
                       show_value(config.optim.lr) + "; set optim.min_lr <= optim.lr");
  if (!problems.empty()) throw ConfigError(problems);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw ConfigError({"config: cannot read " + path + "; check the path"});
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), overrides);
}

std::vector<std::string> validate_layout(const Config& c, int world_size) {
  std::vector<std::string> problems;
  const ParallelConfig& p = c.parallel;
  const int layout = p.islands * p.pp * p.dp * p.tp;
  if (layout != world_size)
    problems.push_back("parallel: islands*pp*dp*tp = " + std::to_string(layout) + " but " +
                       std::to_string(world_size) + " ranks were launched; launch " + std::to_string(layout) +
                       " ranks (atoll launch does this) or change the layout");
  const int split = p.dp * p.microbatches;
  if (c.train.global_batch % split != 0)
    problems.push_back("config: train.global_batch = " + std::to_string(c.train.global_batch) +
                       " is not divisible by parallel.dp*parallel.microbatches = " + std::to_string(split) +
                       "; use a multiple of " + std::to_string(split));
  const ModelConfig& m = c.model;
  if (m.dim % m.heads != 0)
    problems.push_back("config: model.dim = " + std::to_string(m.dim) +
                       " is not divisible by model.heads = " + std::to_string(m.heads) +
                       "; pick heads that divide dim");
  else if ((m.dim / m.heads) % 2 != 0)
    problems.push_back("config: model.dim / model.heads = " + std::to_string(m.dim / m.heads) +
                       " is odd; RoPE needs an even head dimension, change dim or heads");
  if (m.heads % m.kv_heads != 0)
    problems.push_back("config: model.heads = " + std::to_string(m.heads) +
                       " is not divisible by model.kv_heads = " + std::to_string(m.kv_heads) +
                       "; kv_heads must divide heads");
  if (p.sequence_parallel && m.seq % p.tp != 0)
    problems.push_back("config: model.seq = " + std::to_string(m.seq) +
                       " is not divisible by parallel.tp = " + std::to_string(p.tp) +
                       "; sequence parallelism splits the sequence evenly, so pick a tp that divides it");
  // Tensor parallelism splits heads, kv heads and the MLP width over tp ranks.
  for (const auto& [field, value] : {std::pair<const char*, int>{"model.heads", m.heads},
                                     {"model.kv_heads", m.kv_heads},
                                     {"model.ffn", m.ffn}}) {
    if (value % p.tp != 0)
      problems.push_back("config: " + std::string(field) + " = " + std::to_string(value) +
                         " is not divisible by parallel.tp = " + std::to_string(p.tp) +
                         "; tensor parallelism splits it evenly, so pick a tp that divides it");
  }
  return problems;
}

std::string config_table(const Config& config) {
  size_t width = 0;
  for (const Field& f : fields()) width = std::max(width, f.name().size());
  size_t value_width = 0;
  for (const Field& f : fields()) value_width = std::max(value_width, f.show(config).size());
  const std::string rule =
      "+" + std::string(width + 2, '-') + "+" + std::string(value_width + 2, '-') + "+\n";
  std::string table = rule;
  for (const Field& f : fields()) {
    const std::string name = f.name(), value = f.show(config);
    table += "| " + name + std::string(width - name.size(), ' ') + " | " + value +
             std::string(value_width - value.size(), ' ') + " |\n";
  }
  return table + rule;
}

std::string config_to_yaml(const Config& config) {
  std::string yaml;
  for (const std::string& section : section_names()) {
    yaml += section + ":\n";
    for (const Field& f : fields()) {
      if (f.section != section) continue;
      std::string value = f.show(config);
      if (value.empty() || value.find_first_of(":#{}[],&*!|>'\"%@`") != std::string::npos) {
        if (f.key != "betas") value = "\"" + value + "\"";
      }
      yaml += "  " + f.key + ": " + value + "\n";
    }
  }
  return yaml;
}

}  // namespace atl::runtime
