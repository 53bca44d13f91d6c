// The config's machinery that its per-section files share (internal to runtime/config): the
// field descriptors a section's fields are made of, the parsing and wording they use, and what each
// section's file provides -- config_<section>.cpp holds that section's rows of the field table and
// the rules that check its fields against each other and against other sections. config.cpp
// assembles the table, parses, and runs the rules.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/config/config.h"
#include "text/joined.h"

namespace atl::runtime::config_detail {

using Problems = std::vector<std::string>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Formatting ------------------------------------------------------------------------------------

// The shortest decimal that reads back as the same double (0.0003, not 0.00029999999999999997),
// positional for ordinary magnitudes and scientific (3e-05) for tiny or huge ones, as %g does.
std::string shortest(double v);

// A dataset list as YAML: its path alone when it is one dataset of weight 1 (what a single path
// reads as), else a flow list of {path, weight}.
std::string show_datasets(const DatasetList& datasets);

template <typename T>
std::string show_value(const T& v) {
  if constexpr (std::is_same_v<T, DatasetList>)
    return show_datasets(v);
  else if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, double>)
    return shortest(v);
  else if constexpr (std::is_same_v<T, std::string>)
    return v;
  else if constexpr (std::is_enum_v<T>)
    return std::string(name_of(v));
  else
    return std::to_string(v);
}

// A value as YAML. A double always has a '.' in its mantissa (25.0, 1.0e-05), which YAML 1.1
// readers such as PyYAML need to see a float; a string that would not read back as itself when
// plain ("~", "a: b", " x") is double-quoted.
template <typename T>
std::string yaml_value(const T& v) {
  std::string s = show_value(v);
  if constexpr (std::is_same_v<T, double>) {
    if (std::isfinite(v) && s.find('.') == std::string::npos) s.insert(std::min(s.find('e'), s.size()), ".0");
  } else if constexpr (std::is_same_v<T, std::string>) {
    bool plain_ok = false;
    try {
      const YAML::Node node = YAML::Load("k: " + s)["k"];
      plain_ok = node.IsScalar() && node.Scalar() == s;
    } catch (const YAML::Exception&) {
    }
    if (!plain_ok) {
      YAML::Emitter out;
      out << YAML::DoubleQuoted << s;
      s = out.c_str();
    }
  }
  return s;
}

// A YAML node as the user wrote it, on one line: 'abc', [1, 2], {a: 1}.
std::string quoted(const YAML::Node& node);

// ---- Field descriptors -----------------------------------------------------------------------------

// The values a numeric field accepts: an interval whose ends may be open ("> 0", "[0, 1)").
struct Range {
  double min = -kInf;
  double max = kInf;
  bool min_open = false;
  bool max_open = false;

  bool contains(double v) const { return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max); }
  // ">= 1", "> 0", "in [0, 3]", "in [0, 1)".
  std::string describe() const {
    if (max == kInf) return (min_open ? "> " : ">= ") + shortest(min);
    return std::string("in ") + (min_open ? "(" : "[") + shortest(min) + ", " + shortest(max) +
           (max_open ? ")" : "]");
  }
  // What to set instead: "a positive integer", "0 or more", "a value in [0, 3]".
  std::string advice(bool integer) const {
    if (max != kInf) return "a value " + describe();
    if (min == 0 && min_open) return "a positive number";
    if (min == 1 && integer) return "a positive integer";
    return min_open ? "a number above " + shortest(min) : shortest(min) + " or more";
  }
};
inline Range at_least(double min) {
  return {min, kInf, false, false};
}
inline Range above(double min) {
  return {min, kInf, true, false};
}
inline Range between(double min, double max) {
  return {min, max, false, false};
}

// What one field accepts, for checking a value and wording its problem.
struct Rule {
  std::string name;     // "model.dim"
  Range range;          // numbers
  std::string example;  // the default, shown in fixes
};

// Every value problem names the field and the value first: "config: model.dim = 'abc' <what>".
std::string problem(const Rule& rule, const std::string& value, const std::string& what);
std::string write_example(const Rule& rule);

// Each parse overload stores a valid `node` in `out` and returns "", or returns the problem line.
std::string parse(const Rule& rule, const YAML::Node& node, bool& out);
std::string parse(const Rule& rule, const YAML::Node& node, double& out);
std::string parse(const Rule& rule, const YAML::Node& node, int& out);
std::string parse(const Rule& rule, const YAML::Node& node, int64_t& out);
std::string parse(const Rule& rule, const YAML::Node& node, std::string& out);
// A path, or a list of datasets each a path or { path: P, weight: W > 0 }; every problem of the list
// on one line each, joined by newlines.
std::string parse(const Rule& rule, const YAML::Node& node, DatasetList& out);

// An enum-like field: one of the spellings its Choices<E> lists.
template <typename E>
  requires std::is_enum_v<E>
std::string parse(const Rule& rule, const YAML::Node& node, E& out) {
  std::string value;
  if (std::string problem = parse(rule, node, value); !problem.empty()) return problem;
  std::vector<std::string> names;
  for (const Choice<E>& choice : Choices<E>::list) {
    if (choice.name == value) {
      out = choice.value;
      return "";
    }
    names.emplace_back(choice.name);
  }
  return problem(rule, "'" + value + "'",
                 "is not one of " + text::joined(names, ", ") + "; set " + rule.name +
                     " to one of them, e.g. " + rule.example);
}

// One config field bound to a member of Config: how to read it from YAML, how to print it, and what
// `atoll config reference` says of it.
struct Field {
  std::string section, key;
  // Stores the value in the config and returns "", or returns the problem line.
  std::function<std::string(Config&, const YAML::Node&)> read;
  std::function<std::string(const Config&)> show;  // as YAML
  ConfigKeyReference reference;                    // its type, allowed values and meaning
  std::string name() const { return section + "." + key; }
};

// The reference's words for a field of type T: its type and the values it allows.
template <typename T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "boolean";
  else if constexpr (std::is_integral_v<T>)
    return "integer";
  else if constexpr (std::is_same_v<T, double>)
    return "number";
  else if constexpr (std::is_enum_v<T>)
    return "choice";
  else if constexpr (std::is_same_v<T, DatasetList>)
    return "datasets";
  else
    return "string";
}
template <typename T>
std::string allowed_values(const Range& range) {
  std::vector<std::string> names;
  if constexpr (std::is_same_v<T, bool>) {
    names = {"true", "false"};
  } else if constexpr (std::is_enum_v<T>) {
    for (const Choice<T>& choice : Choices<T>::list) names.emplace_back(choice.name);
  } else if constexpr (std::is_arithmetic_v<T>) {
    if (range.min != -kInf || range.max != kInf) return range.describe();
  }
  return text::joined(names, ", ");
}

// Makes the fields of one section: `model("dim", &ModelConfig::dim, at_least(1))`.
template <typename Section>
struct SectionFields {
  const char* section;
  Section Config::*member;

  // `meaning`: one line for the reference; `range`: what a number accepts. `field` may be a member
  // the section inherits (the outer optimizer's options, which OuterConfig derives from).
  template <typename T, typename Owner>
    requires std::is_base_of_v<Owner, Section>
  Field operator()(const char* key, T Owner::*field, const char* meaning, Range range = {}) const {
    const auto sec = member;
    Rule rule{std::string(section) + "." + key, range, show_value(Config{}.*sec.*field)};
    Field f{
        section,
        key,
        nullptr,
        nullptr,
        {section, key, type_name<T>(), yaml_value(Config{}.*sec.*field), allowed_values<T>(range), meaning}};
    f.read = [sec, field, rule](Config& c, const YAML::Node& node) {
      T value{};
      std::string problem = parse(rule, node, value);
      if (problem.empty()) c.*sec.*field = value;
      return problem;
    };
    f.show = [sec, field](const Config& c) { return yaml_value(c.*sec.*field); };
    return f;
  }
};

// Every field, in the order of the YAML contract; parsing, the table and the saved YAML all use it.
const std::vector<Field>& fields();

// Appends "config: A = a is not divisible by B = b; <fix>" unless b divides a.
void require_divisible(Problems& problems, const std::string& a_name, int64_t a, const std::string& b_name,
                       int64_t b, const std::string& fix);

// ---- The sections' pieces (config_<section>.cpp) ----------------------------------------------------

// Each section's rows of the field table, in the order of the YAML contract.
std::vector<Field> run_fields();
std::vector<Field> model_fields();
std::vector<Field> parallel_fields();
std::vector<Field> train_fields();
std::vector<Field> optim_fields();
std::vector<Field> kernels_fields();
std::vector<Field> data_fields();
std::vector<Field> checkpoint_fields();
std::vector<Field> outer_fields();
std::vector<Field> comm_fields();

// What parse_config checks or fills once every section is read. `root`: the YAML as written (with
// the overrides applied); `rejected`: the fields whose value was refused.
void apply_outer_defaults(const YAML::Node& root, Config& config);
void check_learning_rates(const Config& config, const std::set<std::string>& rejected, Problems& problems);

// The rules validate_layout runs, in this order, each in its section's file.
void validate_job_size(const Config& c, int world_size, Problems& problems);
void validate_outer(const Config& c, Problems& problems);
void validate_kernels(const Config& c, Problems& problems);
void validate_train(const Config& c, Problems& problems);
void validate_model(const Config& c, Problems& problems);
void validate_parallel(const Config& c, Problems& problems);

}  // namespace atl::runtime::config_detail
