// `atoll report`, the drawing half: a run's loss curve as a self-contained SVG file.
#pragma once

#include <string>

#include "launcher/run_summary.h"

namespace atl::launcher {

// Training loss (and validation loss, in another colour) against step, with axes, tick labels, a
// legend and dashed markers where the job was restarted or preempted. Starts with "<svg".
std::string loss_curve_svg(const RunSummary& summary);

}  // namespace atl::launcher
