// The comm section: its rows of the field table.
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

std::vector<Field> comm_fields() {
  const SectionFields<CommConfig> comm{"comm", &Config::comm};
  return {
      comm("timeout_s", &CommConfig::timeout_s,
           "Seconds a collective may wait before every rank aborts with a dump (exit 4).", above(0)),
      comm("flight_records", &CommConfig::flight_records,
           "Collectives kept per rank for the hang dump (<run.dir>/flight/).", at_least(1)),
  };
}

}  // namespace atl::runtime::config_detail
