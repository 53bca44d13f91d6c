#include "launcher/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/metrics/console_lines.h"

namespace atl::launcher {
namespace {

using runtime::formatted;

// ---------------------------------------------------------------------------------------------
// The SVG plot

std::string xml_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// An axis over [lo, hi] widened to multiples of a 1-2-5 tick spacing, about five ticks.
struct Axis {
  double lo = 0.0, hi = 1.0, tick = 0.2;

  Axis(double data_lo, double data_hi, bool integral) {
    if (!(data_hi > data_lo)) {  // one value (or none): centre it in a range of its own size
      const double half = integral ? 1.0 : std::max(0.5, 0.1 * std::abs(data_lo));
      data_lo -= half;
      data_hi += half;
    } else if (!integral) {  // keep the extreme values off the frame
      const double margin = 0.03 * (data_hi - data_lo);
      data_lo -= margin;
      data_hi += margin;
    }
    const double raw = (data_hi - data_lo) / 5.0;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double r = raw / magnitude;
    tick = magnitude * (r < 1.5 ? 1.0 : r < 3.0 ? 2.0 : r < 7.0 ? 5.0 : 10.0);
    if (integral) tick = std::max(tick, 1.0);
    lo = std::floor(data_lo / tick) * tick;
    hi = std::ceil(data_hi / tick) * tick;
  }
  std::vector<double> ticks() const {
    std::vector<double> values;
    for (int64_t k = std::llround(lo / tick); k * tick <= hi + 1e-9 * tick; ++k) values.push_back(k * tick);
    return values;
  }
};

// Pixel geometry of the plot area inside the SVG canvas.
struct Frame {
  static constexpr double kWidth = 800, kHeight = 450;
  static constexpr double kLeft = 70, kRight = 780, kTop = 40, kBottom = 395;
  Axis x, y;
  double px(double step) const { return kLeft + (step - x.lo) / (x.hi - x.lo) * (kRight - kLeft); }
  double py(double loss) const { return kBottom - (loss - y.lo) / (y.hi - y.lo) * (kBottom - kTop); }
};

constexpr const char* kTrainColour = "#1f77b4";
constexpr const char* kValColour = "#d62728";
constexpr const char* kOuterColour = "#2ca02c";
constexpr const char* kRestartColour = "#7f7f7f";
constexpr const char* kPreemptColour = "#ff7f0e";
constexpr const char* kSkipColour = "#9467bd";

std::vector<LossPoint> finite(const std::vector<LossPoint>& points) {
  std::vector<LossPoint> kept;
  std::copy_if(points.begin(), points.end(), std::back_inserter(kept),
               [](const LossPoint& p) { return std::isfinite(p.loss); });
  return kept;
}

Frame frame_for(const RunSummary& s, const std::vector<std::vector<LossPoint>>& series) {
  double step_lo = INFINITY, step_hi = -INFINITY, loss_lo = INFINITY, loss_hi = -INFINITY;
  for (const std::vector<LossPoint>& points : series)
    for (const LossPoint& p : points) {
      step_lo = std::min(step_lo, static_cast<double>(p.step));
      step_hi = std::max(step_hi, static_cast<double>(p.step));
      loss_lo = std::min(loss_lo, p.loss);
      loss_hi = std::max(loss_hi, p.loss);
    }
  if (step_lo > step_hi) step_lo = step_hi = static_cast<double>(s.steps);  // nothing finite to plot
  if (loss_lo > loss_hi) loss_lo = loss_hi = 0.0;
  return Frame{Axis(std::min(step_lo, 0.0), step_hi, true), Axis(loss_lo, loss_hi, false)};
}

std::string axes(const Frame& f) {
  std::string svg;
  for (double t : f.x.ticks()) {
    svg += formatted("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", f.px(t),
                     Frame::kTop, f.px(t), Frame::kBottom);
    svg += formatted("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", f.px(t),
                     Frame::kBottom + 16, t);
  }
  for (double t : f.y.ticks()) {
    svg += formatted("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n",
                     Frame::kLeft, f.py(t), Frame::kRight, f.py(t));
    svg += formatted("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", Frame::kLeft - 6,
                     f.py(t) + 4, t);
  }
  svg += formatted(
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
      Frame::kLeft, Frame::kTop, Frame::kRight - Frame::kLeft, Frame::kBottom - Frame::kTop);
  svg += formatted("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n",
                   (Frame::kLeft + Frame::kRight) / 2, Frame::kHeight - 18);
  svg += formatted(
      "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">loss</text>\n",
      (Frame::kTop + Frame::kBottom) / 2, (Frame::kTop + Frame::kBottom) / 2);
  return svg;
}

// `name` becomes the element's class, so that readers (and tests) can tell the series apart.
std::string polyline(const Frame& f, const std::vector<LossPoint>& points, const char* name,
                     const char* colour, const char* extra) {
  if (points.empty()) return "";
  std::string coords;
  for (const LossPoint& p : points)
    coords +=
        formatted("%s%.1f,%.1f", coords.empty() ? "" : " ", f.px(static_cast<double>(p.step)), f.py(p.loss));
  return formatted(
      "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"%s\"/>\n", name,
      colour, extra, coords.c_str());
}

std::string dots(const Frame& f, const std::vector<LossPoint>& points, const char* colour) {
  std::string svg;
  for (const LossPoint& p : points)
    svg += formatted("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                     f.px(static_cast<double>(p.step)), f.py(p.loss), colour);
  return svg;
}

std::string marker(const Frame& f, int64_t step, const char* colour, const char* label) {
  const double x = f.px(static_cast<double>(step));
  if (x < Frame::kLeft || x > Frame::kRight) return "";
  const bool right_half = x > (Frame::kLeft + Frame::kRight) / 2;  // label inside the frame
  return formatted(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"5,4\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-size=\"10\" text-anchor=\"%s\">%s</text>\n",
      x, Frame::kTop, x, Frame::kBottom, colour, right_half ? x - 3 : x + 3, Frame::kBottom - 6, colour,
      right_half ? "end" : "start", label);
}

struct LegendEntry {
  const char* colour;
  const char* label;
  const char* dash;  // "" for a solid line
  bool dot = false;  // a dot instead of a line
};

std::string legend(const std::vector<LegendEntry>& entries) {
  const double width = 190, row = 18, x = Frame::kRight - width - 8, y = Frame::kTop + 8;
  std::string svg = formatted(
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" fill-opacity=\"0.9\" "
      "stroke=\"#999\"/>\n",
      x, y, width, row * static_cast<double>(entries.size()) + 8);
  for (size_t i = 0; i < entries.size(); ++i) {
    const double cy = y + 4 + row * (static_cast<double>(i) + 0.5);
    if (entries[i].dot)
      svg +=
          formatted("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x + 20, cy, entries[i].colour);
    else
      svg += formatted(
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
          x + 8, cy, x + 32, cy, entries[i].colour,
          *entries[i].dash ? formatted(" stroke-dasharray=\"%s\"", entries[i].dash).c_str() : "");
    svg += formatted("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 40, cy + 4, entries[i].label);
  }
  return svg;
}

}  // namespace

std::string loss_curve_svg(const RunSummary& s) {
  const std::vector<LossPoint> train = finite(s.train_loss), val = finite(s.val_loss),
                               outer = finite(s.val_loss_outer);
  const Frame f = frame_for(s, {train, val, outer});
  std::string svg = formatted(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">loss: %s</text>\n",
      Frame::kWidth, Frame::kHeight, Frame::kWidth, Frame::kHeight, (Frame::kLeft + Frame::kRight) / 2,
      xml_escaped(s.run_dir.empty() ? "run" : s.run_dir).c_str());
  svg += axes(f);

  std::vector<LegendEntry> entries{{kTrainColour, "training loss", ""}};
  bool restarted = false;
  for (const RestartRecord& r : s.restarts)
    if (r.resumed_step) {
      svg += marker(f, *r.resumed_step, kRestartColour, "restart");
      restarted = true;
    }
  for (int64_t step : s.preemptions) svg += marker(f, step, kPreemptColour, "preempted");

  svg += polyline(f, train, "train-loss", kTrainColour, "");
  if (train.size() == 1) svg += dots(f, train, kTrainColour);  // a one-point polyline draws nothing
  if (!val.empty()) {
    svg += polyline(f, val, "val-loss", kValColour, "") + dots(f, val, kValColour);
    entries.push_back({kValColour, "validation loss", ""});
  }
  if (!outer.empty()) {
    svg += polyline(f, outer, "val-loss-outer", kOuterColour, " stroke-dasharray=\"6,3\"") +
           dots(f, outer, kOuterColour);
    entries.push_back({kOuterColour, "validation loss (outer)", "6,3"});
  }
  if (!s.skipped_steps.empty()) {
    std::vector<LossPoint> skipped;  // on the curve where the loss is finite, else along the top edge
    for (int64_t step : s.skipped_steps) {
      const auto at =
          std::find_if(train.begin(), train.end(), [&](const LossPoint& p) { return p.step == step; });
      skipped.push_back({step, at != train.end() ? at->loss : f.y.hi});
    }
    svg += dots(f, skipped, kSkipColour);
    entries.push_back({kSkipColour, "skipped update", "", true});
  }
  if (restarted) entries.push_back({kRestartColour, "restart (resumed step)", "5,4"});
  if (!s.preemptions.empty()) entries.push_back({kPreemptColour, "preempted", "5,4"});
  if (train.empty())
    svg += formatted(
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">no finite training loss to plot</text>\n",
        (Frame::kLeft + Frame::kRight) / 2, (Frame::kTop + Frame::kBottom) / 2);
  svg += legend(entries);
  return svg + "</svg>\n";
}

}  // namespace atl::launcher
