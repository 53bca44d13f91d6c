#include <charconv>
#include <stdexcept>

#include "launcher/commands.h"

namespace atl::launcher {

bool wants_help(const Args& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

ConfigArgs parse_config_args(const Args& args, const std::string& usage) {
  ConfigArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      parsed.rest.insert(parsed.rest.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    if (a == "--set") {
      if (i + 1 >= args.size()) throw std::invalid_argument("--set needs key=value; usage: " + usage);
      parsed.overrides.push_back(args[++i]);
    } else if (a.rfind("--set=", 0) == 0) {
      parsed.overrides.push_back(a.substr(6));
    } else if (a.rfind("--", 0) == 0) {
      parsed.rest.push_back(a);
      if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) parsed.rest.push_back(args[++i]);
    } else if (parsed.config_path.empty()) {
      parsed.config_path = a;
    } else {
      throw std::invalid_argument("unexpected argument '" + a + "'; usage: " + usage);
    }
  }
  if (parsed.config_path.empty()) throw std::invalid_argument("missing CONFIG; usage: " + usage);
  return parsed;
}

Options parse_options(const Args& args, size_t first, const std::set<std::string>& known,
                      const std::string& usage) {
  Options options;
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      options.positional.push_back(a);
      continue;
    }
    if (known.count(a) == 0) throw std::invalid_argument("unknown option '" + a + "'; usage: " + usage);
    if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value; usage: " + usage);
    options.values[a] = args[++i];
  }
  return options;
}

std::string Options::get(const std::string& name, const std::string& fallback) const {
  const auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

namespace {

template <typename T>
T number_of(const Options& options, const std::string& name, T fallback) {
  const auto it = options.values.find(name);
  if (it == options.values.end()) return fallback;
  const std::string& text = it->second;
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument(name + " " + text + " is not a number");
  return value;
}

}  // namespace

int64_t Options::integer(const std::string& name, int64_t fallback) const {
  return number_of(*this, name, fallback);
}

double Options::real(const std::string& name, double fallback) const {
  return number_of(*this, name, fallback);
}

int non_negative(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const int n = std::stoi(value, &used);
    if (used == value.size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(option + " " + value + " is not a non-negative integer; e.g. " + option + " 2");
}

}  // namespace atl::launcher
