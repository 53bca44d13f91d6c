// `atoll config reference [--markdown]`: every key the parser accepts, from the parser's own table
// (docs/configuration.md holds the Markdown form; a test compares them). `atoll config show CONFIG
// [--set k=v]...`: the resolved config as YAML, every check but the launched rank count applied,
// without starting anything.
#include <iostream>

#include "launcher/commands.h"
#include "runtime/config/config.h"

namespace atl::launcher {
namespace {

constexpr const char* kConfigUsage =
    "atoll config reference [--markdown] | atoll config show CONFIG [--set key=value]...";

// Text for a Markdown table cell: the column separator escaped, and outside backticks HTML's
// brackets too ("<run.dir>").
std::string escaped(const std::string& text, bool html) {
  std::string out;
  for (char c : text)
    out += c == '|' ? "\\|" : html && c == '<' ? "&lt;" : html && c == '>' ? "&gt;" : std::string(1, c);
  return out;
}
// A plain cell (an empty one shows a dash) and a code cell.
std::string cell(const std::string& text) {
  return text.empty() ? "-" : escaped(text, true);
}
std::string code(const std::string& text) {
  return "`" + escaped(text, false) + "`";
}

void print_markdown(const std::vector<runtime::ConfigKeyReference>& keys) {
  std::string section;
  for (const runtime::ConfigKeyReference& k : keys) {
    if (k.section != section) {
      section = k.section;
      std::cout << (keys.front().section == section ? "" : "\n") << "### " << section << "\n\n"
                << "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
    }
    std::cout << "| `" << k.section << "." << k.key << "` | " << k.type << " | " << code(k.default_value)
              << " | " << cell(k.allowed) << " | " << cell(k.meaning) << " |\n";
  }
}

void print_text(const std::vector<runtime::ConfigKeyReference>& keys) {
  for (const runtime::ConfigKeyReference& k : keys) {
    std::cout << k.section << "." << k.key << ": " << k.type << ", default " << k.default_value;
    if (!k.allowed.empty()) std::cout << "; " << k.allowed;
    std::cout << "\n    " << k.meaning << "\n";
  }
}

int reference(const Args& args) {
  bool markdown = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] != "--markdown")
      throw std::invalid_argument("unknown option '" + args[i] + "'; usage: " + kConfigUsage);
    markdown = true;
  }
  const std::vector<runtime::ConfigKeyReference> keys = runtime::config_reference();
  if (markdown)
    print_markdown(keys);
  else
    print_text(keys);
  return 0;
}

int show(const Args& args) {
  const ConfigArgs parsed = parse_config_args(Args(args.begin() + 1, args.end()), kConfigUsage);
  if (!parsed.rest.empty())
    throw std::invalid_argument("unknown option '" + parsed.rest.front() + "'; usage: " + kConfigUsage);
  const runtime::Config config = runtime::load_config(parsed.config_path, parsed.overrides);
  // The layout's own rank count: every cross-field check runs, none about how many ranks started.
  const std::vector<std::string> problems = runtime::validate_layout(config, config.job_ranks());
  if (!problems.empty()) throw runtime::ConfigError(problems);
  std::cout << "# " << parsed.config_path << " resolved (" << config.job_ranks()
            << " ranks); atoll train reads this back unchanged\n"
            << runtime::config_to_yaml(config);
  return 0;
}

}  // namespace

int config_command(const Args& args) {
  if (args.empty() || wants_help(args)) {
    std::cout
        << "usage: " << kConfigUsage << "\n\n"
        << "reference  every config key: type, default, allowed values and meaning (--markdown: as "
           "docs/configuration.md has it)\n"
        << "show       the resolved config of CONFIG with its overrides, checked, as YAML; starts nothing\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "reference") return reference(args);
  if (args[0] == "show") return show(args);
  throw std::invalid_argument("unknown config command '" + args[0] + "'; usage: " + kConfigUsage);
}

}  // namespace atl::launcher
