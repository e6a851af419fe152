#include "certify/report/detail/html_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "certify/report/detail/html_markup.h"

namespace ncert::certify::detail {

namespace {

/// An SVG coordinate with one decimal: enough for screen pixels, and short.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

/// A value in [0, 1] with two decimals (an opacity).
std::string fraction(double v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

/// "2^k" with the exponent raised, as SVG text content.
std::string pow2_label(int k) { return "2<tspan dy=\"-4\" font-size=\"8\">" + std::to_string(k) + "</tspan>"; }
/// The same, as plain text for a <title>.
std::string pow2_text(int k) { return "2^" + std::to_string(k); }

struct Bar {
  std::string title;  ///< escaped
  std::string tick;   ///< SVG text content, or ""
  Index count = 0;
  const char* css = "bar";
  int log2 = 0;  ///< lower edge of a power-of-two bin
  bool binned = false;
};

std::string empty_plot(const std::string& css, const std::string& attributes, const std::string& caption,
                       const std::string& text) {
  return "<svg class=\"plot " + css + "\" " + attributes +
         " width=\"540\" height=\"48\" viewBox=\"0 0 540 48\" role=\"img\"><title>" + caption + "</title>" +
         "<text x=\"8\" y=\"28\" class=\"note\">" + text + "</text></svg>";
}

}  // namespace

std::string svg_histogram(const Log2Histogram& h, const HistogramPlot& p) {
  std::vector<Bar> bars;
  if (h.zero > 0) bars.push_back({"0: " + count_text(h.zero), p.zero_label, h.zero, "bar zero"});
  if (h.below > 0) {
    bars.push_back({"below " + pow2_text(h.log2_min) + ": " + count_text(h.below), "&lt;", h.below, "bar"});
  }
  // The non-empty range of binned counts, widened by one bin each way and to the marker.
  Index first = -1, last = -1;
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    if (h.counts[i] == 0) continue;
    if (first < 0) first = static_cast<Index>(i);
    last = static_cast<Index>(i);
  }
  const auto bins = static_cast<Index>(h.counts.size());
  if (first >= 0) {
    first = std::max<Index>(first - 1, 0);
    last = std::min<Index>(last + 1, bins - 1);
    if (p.marker_log2) {
      const Index m = *p.marker_log2 - h.log2_min;
      if (m >= 0 && m < bins) {
        first = std::min(first, m);
        last = std::max(last, m);
      }
    }
    const Index span = last - first + 1;
    const Index step = span <= 14 ? 1 : span <= 28 ? 2 : 4;
    for (Index i = first; i <= last; ++i) {
      const int k = h.log2_min + static_cast<int>(i);
      Bar b;
      b.count = h.counts[static_cast<std::size_t>(i)];
      // Appended, not "[" + ...: GCC 12 at -O3 -march=native on AMD EPYC (znver) reads
      // operator+(const char*, string&&) as a memcpy of 2^63 bytes (-Werror=restrict).
      b.title.append("[").append(pow2_text(k)).append(", ").append(pow2_text(k + 1));
      b.title.append("): ").append(count_text(b.count));
      b.tick = k % step == 0 ? pow2_label(k) : "";
      b.log2 = k;
      b.binned = true;
      b.css = p.warn_from_marker && p.marker_log2 && k >= *p.marker_log2 ? "bar over" : "bar";
      bars.push_back(b);
    }
  }
  if (h.above > 0) {
    bars.push_back({pow2_text(h.log2_max) + " and above: " + count_text(h.above), "&#8805;", h.above,
                    p.warn_from_marker && p.marker_log2 ? "bar over" : "bar"});
  }
  if (h.other > 0) bars.push_back({p.other_label + ": " + count_text(h.other), "?", h.other, "bar other"});
  if (bars.empty()) return empty_plot(p.css_class, p.attributes, p.caption, "no values");

  constexpr double kWidth = 540, kHeight = 170, kLeft = 52, kRight = 8, kTop = 16, kBottom = 36;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const double slot = std::min(40.0, plot_w / static_cast<double>(bars.size()));
  Index max_count = 0;
  for (const Bar& b : bars) max_count = std::max(max_count, b.count);
  const double scale = std::log10(1.0 + static_cast<double>(max_count));
  std::string s = "<svg class=\"plot " + p.css_class + "\" " + p.attributes + " width=\"540\" height=\"170\" " +
                  "viewBox=\"0 0 540 170\" role=\"img\"><title>" + p.caption + "</title>";
  const double base = kTop + plot_h;
  s += "<line class=\"axis\" x1=\"" + px(kLeft) + "\" y1=\"" + px(base) + "\" x2=\"" + px(kWidth - kRight) +
       "\" y2=\"" + px(base) + "\"/>";
  s += "<text class=\"tick\" x=\"" + px(kLeft - 4) + "\" y=\"" + px(kTop + 4) + "\" text-anchor=\"end\">" +
       count_text(max_count) + "</text>";
  s += "<text class=\"tick\" x=\"" + px(kLeft - 4) + "\" y=\"" + px(base) + "\" text-anchor=\"end\">0</text>";
  s += "<text class=\"tick\" x=\"4\" y=\"" + px(kTop + plot_h / 2) + "\">log</text>";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double x = kLeft + slot * static_cast<double>(i);
    const double height =
        b.count > 0 ? std::max(1.0, plot_h * std::log10(1.0 + static_cast<double>(b.count)) / scale) : 0;
    s += "<rect class=\"" + std::string(b.css) + "\" x=\"" + px(x + 1) + "\" y=\"" + px(base - height) + "\" width=\"" +
         px(std::max(1.0, slot - 2)) + "\" height=\"" + px(height) + "\"><title>" + b.title + "</title></rect>";
    if (!b.tick.empty()) {
      s += "<text class=\"tick\" x=\"" + px(x + slot / 2) + "\" y=\"" + px(base + 14) + "\" text-anchor=\"middle\">" +
           b.tick + "</text>";
    }
    if (b.binned && p.marker_log2 && b.log2 == *p.marker_log2) {
      s += "<line class=\"marker\" x1=\"" + px(x) + "\" y1=\"" + px(kTop - 6) + "\" x2=\"" + px(x) + "\" y2=\"" +
           px(base) + "\"/><text class=\"tick\" x=\"" + px(x + 3) + "\" y=\"" + px(kTop - 4) + "\">" + p.marker_label +
           "</text>";
    }
  }
  s += "<text class=\"caption\" x=\"" + px(kLeft + plot_w / 2) + "\" y=\"" + px(kHeight - 4) +
       "\" text-anchor=\"middle\">" + p.caption + "</text></svg>";
  return s;
}

std::string svg_series(const std::vector<double>& y, Index rows, Index rows_per_point, const SeriesPlot& p) {
  if (y.empty() || rows <= 0 || rows_per_point <= 0) return empty_plot(p.css_class, p.attributes, p.caption, "no rows");
  constexpr double kWidth = 720, kHeight = 150, kLeft = 56, kRight = 10, kTop = 12, kBottom = 30;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  // The axis: decades spanning the finite positive values (log), or [0, 1].
  double lo = 0, hi = 1;
  std::string lo_text = "0", hi_text = "1";
  if (p.log_y) {
    double vmin = HUGE_VAL, vmax = 0;
    for (double v : y) {
      if (std::isfinite(v) && v > 0) {
        vmin = std::min(vmin, v);
        vmax = std::max(vmax, v);
      }
    }
    if (vmax > 0) {
      lo = std::floor(std::log10(vmin));
      hi = std::ceil(std::log10(vmax));
      if (hi <= lo) hi = lo + 1;
    } else {
      lo = -1;
      hi = 0;
    }
    lo_text = "1e" + std::to_string(static_cast<int>(lo));
    hi_text = "1e" + std::to_string(static_cast<int>(hi));
  }
  const auto y_of = [&](double v) {
    double t = 0;
    if (p.log_y)
      t = v > 0 ? (std::log10(v) - lo) / (hi - lo) : 0;
    else
      t = v;
    return kTop + plot_h * (1 - std::clamp(t, 0.0, 1.0));
  };
  const auto x_of = [&](double row) {
    return rows > 1 ? kLeft + plot_w * row / static_cast<double>(rows - 1) : kLeft + plot_w / 2;
  };
  std::string s = "<svg class=\"plot series " + p.css_class + "\" " + p.attributes +
                  " width=\"720\" height=\"150\" viewBox=\"0 0 720 150\" role=\"img\"><title>" + p.caption + "</title>";
  const double base = kTop + plot_h;
  s += "<rect class=\"frame\" x=\"" + px(kLeft) + "\" y=\"" + px(kTop) + "\" width=\"" + px(plot_w) + "\" height=\"" +
       px(plot_h) + "\"/>";
  s += "<text class=\"tick\" x=\"" + px(kLeft - 4) + "\" y=\"" + px(kTop + 8) + "\" text-anchor=\"end\">" + hi_text +
       "</text>";
  s += "<text class=\"tick\" x=\"" + px(kLeft - 4) + "\" y=\"" + px(base) + "\" text-anchor=\"end\">" + lo_text +
       "</text>";
  s += "<text class=\"tick\" x=\"" + px(kLeft) + "\" y=\"" + px(base + 14) + "\">row 0</text>";
  s += "<text class=\"tick\" x=\"" + px(kLeft + plot_w) + "\" y=\"" + px(base + 14) + "\" text-anchor=\"end\">row " +
       std::to_string(rows - 1) + "</text>";
  for (const auto& [row, label] : p.markers) {
    const double x = x_of(static_cast<double>(row));
    s += "<line class=\"marker\" x1=\"" + px(x) + "\" y1=\"" + px(kTop) + "\" x2=\"" + px(x) + "\" y2=\"" + px(base) +
         "\"><title>" + label + "</title></line>";
  }
  std::string points, inf_marks;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double first_row = static_cast<double>(static_cast<Index>(i) * rows_per_point);
    const double row =
        first_row +
        static_cast<double>(std::min(rows_per_point, rows - static_cast<Index>(i) * rows_per_point) - 1) / 2;
    const double x = x_of(row);
    if (std::isinf(y[i]) || std::isnan(y[i])) {
      inf_marks += "<circle class=\"inf\" cx=\"" + px(x) + "\" cy=\"" + px(kTop) + "\" r=\"3\"/>";
      continue;
    }
    if (!points.empty()) points.push_back(' ');
    points += px(x) + "," + px(y_of(y[i]));
  }
  if (!points.empty()) {
    if (points.find(' ') == std::string::npos) {
      const std::size_t comma = points.find(',');
      s += "<circle class=\"point\" cx=\"" + points.substr(0, comma) + "\" cy=\"" + points.substr(comma + 1) +
           "\" r=\"3\"/>";
    } else {
      s += "<polyline class=\"line\" points=\"" + points + "\"/>";
    }
  }
  s += inf_marks;
  s += "<text class=\"caption\" x=\"" + px(kLeft + 6) + "\" y=\"" + px(kTop + 12) + "\">" + p.caption + "</text></svg>";
  return s;
}

std::string svg_failure_grid(const FailureGrid& g, const std::string& attributes) {
  if (g.counts.empty() || g.cell_rows <= 0 || g.cell_cols <= 0) {
    return empty_plot("fail-grid", attributes, "failure map", "no value outside its interval");
  }
  const double cw = std::clamp(std::floor(620.0 / static_cast<double>(g.cell_cols)), 4.0, 24.0);
  const double ch = std::min(cw, std::max(4.0, std::floor(256.0 / static_cast<double>(g.cell_rows))));
  constexpr double kLeft = 64, kTop = 8;
  const double grid_w = cw * static_cast<double>(g.cell_cols), grid_h = ch * static_cast<double>(g.cell_rows);
  const double width = kLeft + grid_w + 8, height = kTop + grid_h + 22;
  Index max_count = 0;
  for (Index c : g.counts) max_count = std::max(max_count, c);
  const double scale = std::log(1.0 + static_cast<double>(max_count));
  std::string s = "<svg class=\"plot fail-grid\" " + attributes + " width=\"" + px(width) + "\" height=\"" +
                  px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
                  "\" role=\"img\"><title>failure map: values outside their intervals by rows and columns</title>";
  s += "<rect class=\"grid-bg\" x=\"" + px(kLeft) + "\" y=\"" + px(kTop) + "\" width=\"" + px(grid_w) + "\" height=\"" +
       px(grid_h) + "\"/>";
  // The rows (columns) of cell i: r with r * cells / extent == i, i.e. ceil(i * extent / cells) ..
  const auto first_of = [](Index i, Index extent, Index cells) { return (i * extent + cells - 1) / cells; };
  for (Index r = 0; r < g.cell_rows; ++r) {
    for (Index c = 0; c < g.cell_cols; ++c) {
      const Index n = g.counts[static_cast<std::size_t>(r * g.cell_cols + c)];
      if (n == 0) continue;
      const double opacity = 0.3 + 0.7 * std::log(1.0 + static_cast<double>(n)) / scale;
      s += "<rect class=\"cell\" x=\"" + px(kLeft + cw * static_cast<double>(c)) + "\" y=\"" +
           px(kTop + ch * static_cast<double>(r)) + "\" width=\"" + px(cw) + "\" height=\"" + px(ch) +
           "\" fill-opacity=\"" + fraction(opacity) + "\"><title>rows " +
           std::to_string(first_of(r, g.rows, g.cell_rows)) + "-" +
           std::to_string(first_of(r + 1, g.rows, g.cell_rows) - 1) + ", cols " +
           std::to_string(first_of(c, g.cols, g.cell_cols)) + "-" +
           std::to_string(first_of(c + 1, g.cols, g.cell_cols) - 1) + ": " + count_text(n) + " outside</title></rect>";
    }
  }
  s += "<text class=\"tick\" x=\"" + px(kLeft - 4) + "\" y=\"" + px(kTop + 9) + "\" text-anchor=\"end\">row 0</text>";
  s += "<text class=\"tick\" x=\"" + px(kLeft - 4) + "\" y=\"" + px(kTop + grid_h) + "\" text-anchor=\"end\">row " +
       std::to_string(g.rows - 1) + "</text>";
  s += "<text class=\"tick\" x=\"" + px(kLeft) + "\" y=\"" + px(kTop + grid_h + 14) + "\">col 0</text>";
  s += "<text class=\"tick\" x=\"" + px(kLeft + grid_w) + "\" y=\"" + px(kTop + grid_h + 14) +
       "\" text-anchor=\"end\">col " + std::to_string(g.cols - 1) + "</text></svg>";
  return s;
}

}  // namespace ncert::certify::detail
