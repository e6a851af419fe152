// This header defines the HTML report's plots, drawn as inline SVG (no script, no font, no
// image): a histogram of power-of-two bins (report/evidence.h Log2Histogram), a line plot of a
// per-position series, and the failure map of an output (FailureGrid). Every bar, point and
// cell carries a <title> with its exact numbers, which browsers show on hover. Every plot is an
// <svg class="plot ..."> so tests and readers can find them; labels are escaped by the caller
// (they are fixed text or markup()).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/report/evidence.h"

namespace ncert::certify::detail {

struct HistogramPlot {
  std::string css_class;           ///< added to "plot" (e.g. "bound-hist")
  std::string attributes;          ///< extra attributes, already escaped (e.g. data-output="y_packed")
  std::string caption;             ///< the x axis, escaped (e.g. "|y − y*| / B")
  std::optional<int> marker_log2;  ///< a vertical line at 2^marker_log2 (the bound: 0)
  std::string marker_label;        ///< escaped
  bool warn_from_marker = true;    ///< draw the bins from the marker up in the warning colour
  std::string zero_label;          ///< the zero bin (e.g. "exact"), escaped
  std::string other_label;         ///< the `other` bin (e.g. "no bound"), escaped
};
/// Bars of the non-empty range of bins (log-scaled heights: counts span orders of magnitude);
/// bins from the marker up are drawn in the warning colour.
std::string svg_histogram(const Log2Histogram& h, const HistogramPlot& p);

struct SeriesPlot {
  std::string css_class;                               ///< added to "plot series"
  std::string attributes;                              ///< extra attributes, already escaped
  std::string caption;                                 ///< the y axis, escaped
  bool log_y = true;                                   ///< log10 axis (zeros at the bottom); else linear over [0, 1]
  std::vector<std::pair<Index, std::string>> markers;  ///< rows to mark (escaped labels)
};
/// y[i] summarizes rows [i * rows_per_point, ...) of `rows`; +inf is drawn at the top in the
/// failure colour.
std::string svg_series(const std::vector<double>& y, Index rows, Index rows_per_point, const SeriesPlot& p);

/// The grid's cells, coloured by how many values in each lie outside their intervals.
std::string svg_failure_grid(const FailureGrid& g, const std::string& attributes);

}  // namespace ncert::certify::detail
