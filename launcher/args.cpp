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

}  // namespace atl::launcher
