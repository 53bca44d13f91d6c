#include "runtime/config/config.h"

#include <yaml-cpp/yaml.h>

#include "runtime/config/config_fields.h"
#include "text/one_line.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

namespace atl::runtime::config_detail {

// ---- Formatting ------------------------------------------------------------------------------------

std::string shortest(double v) {
  const bool positional = v == 0 || (std::fabs(v) >= 1e-4 && std::fabs(v) < 1e15);
  char buffer[400];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, v,
                                 positional ? std::chars_format::fixed : std::chars_format::scientific)
                       .ptr;
  return std::string(buffer, end);
}

std::string quoted(const YAML::Node& node) {
  if (node.IsNull()) return "null";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// ---- Field descriptors -----------------------------------------------------------------------------

std::string problem(const Rule& rule, const std::string& value, const std::string& what) {
  return "config: " + rule.name + " = " + value + " " + what;
}
std::string write_example(const Rule& rule) {
  return "write e.g. " + rule.name + ": " + rule.example;
}

std::string parse(const Rule& rule, const YAML::Node& node, bool& out) {
  try {
    if (node.IsScalar()) {
      out = node.as<bool>();
      return "";
    }
  } catch (const YAML::Exception&) {
  }
  return problem(rule, quoted(node), "is not a boolean; write " + rule.name + ": true or false");
}

// Numbers are read at the widest type, so that 1e12 for an int reads as "too large", not "not an integer".
template <typename Wide, typename T>
std::string parse_number(const Rule& rule, const YAML::Node& node, T& out, const std::string& kind) {
  Wide wide{};
  try {
    if (!node.IsScalar()) throw YAML::Exception(YAML::Mark(), "not a scalar");
    wide = node.as<Wide>();
  } catch (const YAML::Exception&) {
    return problem(rule, quoted(node), "is not " + kind + "; " + write_example(rule));
  }
  if (!std::isfinite(static_cast<double>(wide)))
    return problem(rule, node.Scalar(), "is not a finite number; " + write_example(rule));
  if (!rule.range.contains(static_cast<double>(wide)))
    return problem(rule, node.Scalar(),
                   "must be " + rule.range.describe() + "; set " + rule.name + " to " +
                       rule.range.advice(std::is_integral_v<T>) + ", e.g. " + rule.example);
  if (wide > static_cast<Wide>(std::numeric_limits<T>::max()))
    return problem(rule, node.Scalar(),
                   "does not fit in " + kind + "; use at most " + show_value(std::numeric_limits<T>::max()));
  out = static_cast<T>(wide);
  return "";
}

std::string parse(const Rule& rule, const YAML::Node& node, double& out) {
  return parse_number<double>(rule, node, out, "a number");
}
std::string parse(const Rule& rule, const YAML::Node& node, int& out) {
  return parse_number<long long>(rule, node, out, "an integer");
}
std::string parse(const Rule& rule, const YAML::Node& node, int64_t& out) {
  return parse_number<long long>(rule, node, out, "an integer");
}

std::string parse(const Rule& rule, const YAML::Node& node, std::string& out) {
  if (!node.IsScalar()) return problem(rule, quoted(node), "is not a string; " + write_example(rule));
  const std::string value = node.Scalar();
  if (value.empty()) return problem(rule, "''", "is empty; " + write_example(rule));
  out = value;
  return "";
}

// The sections' rows, one after the other in the order of the YAML contract.
const std::vector<Field>& fields() {
  static const std::vector<Field> table = [] {
    std::vector<Field> all;
    for (std::vector<Field> (*section)() :
         {run_fields, model_fields, parallel_fields, train_fields, optim_fields, kernels_fields, data_fields,
          checkpoint_fields, outer_fields, comm_fields})
      for (Field& f : section()) all.push_back(std::move(f));
    return all;
  }();
  return table;
}

void require_divisible(Problems& problems, const std::string& a_name, int64_t a, const std::string& b_name,
                       int64_t b, const std::string& fix) {
  if (b > 0 && a % b != 0)
    problems.push_back("config: " + a_name + " = " + std::to_string(a) + " is not divisible by " + b_name +
                       " = " + std::to_string(b) + "; " + fix);
}

}  // namespace atl::runtime::config_detail

namespace atl::runtime {
namespace {

using namespace config_detail;

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const Field& f : fields())
    if (std::find(names.begin(), names.end(), f.section) == names.end()) names.push_back(f.section);
  return names;
}

bool is_section(const std::string& section) {
  const std::vector<std::string> names = section_names();
  return std::find(names.begin(), names.end(), section) != names.end();
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

// ---- Did you mean ----------------------------------------------------------------------------------

// Edit distance counting a swap of neighbours as one edit ("modle" -> "model" is 1).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The candidate closest to `wrong` within about a third of its length in edits, or "".
std::string closest(const std::string& wrong, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, wrong.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(wrong, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

// The known 'section.key' a mistyped one most likely meant: a close key in the (closest) section, or
// the same key in another section ("model.lr" -> "optim.lr"); "" when nothing is close.
std::string closest_field(const std::string& section, const std::string& key) {
  const std::string s = is_section(section) ? section : closest(section, section_names());
  if (!s.empty()) {
    if (find_field(s, key)) return s + "." + key;
    const std::string k = closest(key, keys_of(s));
    if (!k.empty()) return s + "." + k;
  }
  for (const Field& f : fields())
    if (f.key == key) return f.name();
  return "";
}

std::string unknown_key_problem(const std::string& section, const std::string& key) {
  const std::string guess = closest_field(section, key);
  const std::string fix = !guess.empty() ? " (did you mean '" + guess + "'?)"
                          : is_section(section)
                              ? "; " + section + " has " + text::joined(keys_of(section), ", ")
                              : "; the sections are " + text::joined(section_names(), ", ");
  return "unknown key '" + section + "." + key + "'" + fix;
}

// ---- Parsing ---------------------------------------------------------------------------------------

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// A map key as text (keys are normally plain words; anything else is shown as YAML).
std::string key_text(const YAML::Node& key) {
  return key.IsScalar() ? key.Scalar() : quoted(key);
}

// Applies "section.key=value" to the YAML tree, creating the section if the file has none.
void apply_override(YAML::Node& root, const std::string& text, Problems& problems) {
  const std::string prefix = "config: --set " + text + ": ";
  const size_t eq = text.find('=');
  const size_t dot = text.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    problems.push_back(prefix + "expected section.key=value, e.g. --set optim.lr=1e-3");
    return;
  }
  const std::string section = trimmed(text.substr(0, dot)), key = trimmed(text.substr(dot + 1, eq - dot - 1));
  if (!find_field(section, key)) {
    problems.push_back(prefix + unknown_key_problem(section, key));
    return;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    problems.push_back(prefix + "the value is not valid YAML (" + e.msg + "); quote it or fix its brackets");
    return;
  }
  // A section given as something other than a map is reported when the sections are read.
  if (!root[section].IsDefined() || root[section].IsNull()) root[section] = YAML::Node(YAML::NodeType::Map);
  if (root[section].IsMap()) root[section][key] = value;
}

// Reads one section's map into the config; the names of fields with a bad value go to `rejected`.
void read_section(const std::string& section, const YAML::Node& body, Config& config,
                  std::set<std::string>& rejected, Problems& problems) {
  if (body.IsNull()) return;  // "model:" with nothing under it: all defaults
  if (!body.IsMap()) {
    problems.push_back("config: section '" + section + "' = " + quoted(body) + " is not a map; write it as " +
                       section + ": { key: value, ... }");
    return;
  }
  std::set<std::string> seen;
  for (const auto& entry : body) {
    const std::string key = key_text(entry.first);
    const Field* field = find_field(section, key);
    if (!field) {
      problems.push_back("config: " + unknown_key_problem(section, key));
    } else if (!seen.insert(key).second) {
      problems.push_back("config: " + field->name() + " is given twice; keep one");
    } else if (std::string problem = field->read(config, entry.second); !problem.empty()) {
      problems.push_back(problem);
      rejected.insert(field->name());
    }
  }
}

// A problem quotes what the user wrote (an override, a key, a value), which may hold line breaks:
// each problem stays one line.
std::vector<std::string> one_line_each(const std::vector<std::string>& problems) {
  std::vector<std::string> lines;
  for (const std::string& problem : problems) lines.push_back(text::one_line(problem));
  return lines;
}

}  // namespace

ConfigError::ConfigError(const std::vector<std::string>& problems)
    : ConfigError(one_line_each(problems), 0) {}

ConfigError::ConfigError(std::vector<std::string> lines, int)
    : std::runtime_error(text::joined(lines, "\n")), problems_(std::move(lines)) {}

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError({"config: not valid YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                       std::to_string(e.mark.column + 1) + ": " + e.msg + "; fix the syntax there"});
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    throw ConfigError({"config: the top level is " + quoted(root) + ", not a map of sections; write " +
                       text::joined(section_names(), ":, ") + ": as top-level keys"});

  Problems problems;
  for (const std::string& o : overrides) apply_override(root, o, problems);

  Config config;
  std::set<std::string> sections_seen, rejected;
  for (const auto& entry : root) {
    const std::string section = key_text(entry.first);
    if (!is_section(section)) {
      const std::string guess = closest(section, section_names());
      problems.push_back("config: unknown section '" + section + "'" +
                         (guess.empty() ? "; the sections are " + text::joined(section_names(), ", ")
                                        : " (did you mean '" + guess + "'?)"));
    } else if (!sections_seen.insert(section).second) {
      problems.push_back("config: section '" + section + "' is given twice; merge the two into one");
    } else {
      read_section(section, entry.second, config, rejected, problems);
    }
  }
  apply_outer_defaults(root, config);
  check_learning_rates(config, rejected, problems);
  if (!problems.empty()) throw ConfigError(problems);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError({"config: cannot read " + path + ": it is a directory; check the path"});
  std::ifstream in(path);
  if (!in)
    throw ConfigError({"config: cannot read " + path + ": " + std::strerror(errno) + "; check the path"});
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError({"config: cannot read " + path + ": read error; check the path"});
  return parse_config(text.str(), overrides);
}

std::vector<std::string> validate_layout(const Config& c, int world_size) {
  Problems problems;
  validate_job_size(c, world_size, problems);
  validate_outer(c, problems);
  validate_kernels(c, problems);
  validate_train(c, problems);
  validate_model(c, problems);
  validate_parallel(c, problems);
  return problems;
}

std::string config_table(const Config& config) {
  size_t name_width = std::string("setting").size(), value_width = std::string("value").size();
  for (const Field& f : fields()) {
    name_width = std::max(name_width, f.name().size());
    value_width = std::max(value_width, f.show(config).size());
  }
  const auto row = [&](const std::string& name, const std::string& value) {
    return "| " + name + std::string(name_width - name.size(), ' ') + " | " + value +
           std::string(value_width - value.size(), ' ') + " |\n";
  };
  const std::string rule =
      "+" + std::string(name_width + 2, '-') + "+" + std::string(value_width + 2, '-') + "+\n";
  std::string table = rule + row("setting", "value") + rule;
  for (const Field& f : fields()) table += row(f.name(), f.show(config));
  return table + rule;
}

std::vector<ConfigKeyReference> config_reference() {
  std::vector<ConfigKeyReference> keys;
  for (const Field& f : fields()) keys.push_back(f.reference);
  return keys;
}

std::string config_to_yaml(const Config& config) {
  std::string yaml;
  for (const std::string& section : section_names()) {
    yaml += section + ":\n";
    for (const Field& f : fields())
      if (f.section == section) yaml += "  " + f.key + ": " + f.show(config) + "\n";
  }
  return yaml;
}

}  // namespace atl::runtime
