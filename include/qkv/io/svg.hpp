// svg.hpp: attention heatmaps as SVG: one panel per head, token labels on both axes, a colour
// scale with its legend, each cell's value in a tooltip.
//
// Plain std::vector input, independent of the matrix types:
//
//   std::vector<std::vector<std::vector<double>>> weights = ...;  // (heads, T, S)
//   std::string svg = qkv::io::attention_svg(tokens, weights);      // self-attention: T == S
//   qkv::io::write_text_file("weights.svg", svg);
//
// The picture follows the tutorial's plt.matshow(weights, cmap='Blues'): rows are queries, columns
// are keys, darker is more weight. Output is deterministic (same input, same bytes), well-formed
// XML, and needs nothing from the network.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "file.hpp"  // write_text_file (atomic), kept reachable through this header
#include "unicode.hpp"

namespace qkv::io {

/// one panel of a heatmap: a (rows, cols) matrix, row-major
struct heatmap_panel {
  std::string title;  // "head 0"
  std::size_t rows = 0, cols = 0;
  std::vector<double> values;  // rows * cols
};

struct heatmap_options {
  std::string title;               // above the panels; empty: none
  double min = 0.0, max = 1.0;     // the colour scale; attention weights lie in [0, 1]
  bool auto_range = false;         // true: the data's own min and max instead
  int cell = 28;                   // cell size in pixels
  std::size_t panels_per_row = 4;  // panels side by side before wrapping
  std::string row_axis = "query";  // axis names, in the tooltips and under the panels
  std::string col_axis = "key";
  std::string id = "qkv";    // prefix of the SVG ids (several SVGs in one HTML page)
  std::vector<bool> masked;  // empty, or rows * cols flags shared by the panels: true is a
                             // masked entry, drawn hatched (a weight of 0 is drawn white)
};

/// the text with XML's special characters escaped (& < > " '), and what XML 1.0 cannot hold
/// (control characters other than tab, newline and return, invalid UTF-8) replaced by U+FFFD
[[nodiscard]] inline std::string xml_escape(std::string_view s) {
  std::u32string chars;
  try {
    chars = unicode::decode_utf8(s);
  } catch (const unicode::invalid_utf8&) {
    for (unsigned char c : s) chars += c < 0x80 ? static_cast<char32_t>(c) : char32_t{0xFFFD};
  }
  std::string out;
  out.reserve(s.size());
  for (char32_t c : chars) {
    switch (c) {
      case U'&': out += "&amp;"; break;
      case U'<': out += "&lt;"; break;
      case U'>': out += "&gt;"; break;
      case U'"': out += "&quot;"; break;
      case U'\'': out += "&apos;"; break;
      default:
        if ((c < 0x20 && c != U'\t' && c != U'\n' && c != U'\r') || c == 0xFFFE || c == 0xFFFF) c = 0xFFFD;
        unicode::append_utf8(c, out);
    }
  }
  return out;
}

namespace svg_detail {

struct rgb {
  int r, g, b;
};
// ColorBrewer's 9-class Blues, the anchors of matplotlib's 'Blues' colour map (light to dark)
inline constexpr rgb blues[] = {{0xf7, 0xfb, 0xff}, {0xde, 0xeb, 0xf7}, {0xc6, 0xdb, 0xef},
                                {0x9e, 0xca, 0xe1}, {0x6b, 0xae, 0xd6}, {0x42, 0x92, 0xc6},
                                {0x21, 0x71, 0xb5}, {0x08, 0x51, 0x9c}, {0x08, 0x30, 0x6b}};

inline std::string hex(const rgb& c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

// t in [0, 1] -> a colour on the Blues scale, linear between anchors
inline std::string colour(double t) {
  if (std::isnan(t)) return "#bdbdbd";
  t = std::clamp(t, 0.0, 1.0) * 8.0;
  const auto i = std::min<std::size_t>(static_cast<std::size_t>(t), 7);
  const double f = t - static_cast<double>(i);
  auto mix = [f](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
  return hex(
      {mix(blues[i].r, blues[i + 1].r), mix(blues[i].g, blues[i + 1].g), mix(blues[i].b, blues[i + 1].b)});
}

inline std::string num(double v, const char* fmt = "%.6g") {
  char buf[40];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// an estimate of a label's width in pixels: 12 px monospace is about 7.2 px per character
inline int text_width(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // code points
  return static_cast<int>(std::lround(7.2 * static_cast<double>(n)));
}

}  // namespace svg_detail

/// the SVG of one or more heatmap panels sharing the same labels (rows: row_labels, columns:
/// col_labels); throws std::invalid_argument naming the panel when a shape does not match
[[nodiscard]] inline std::string heatmap_svg(const std::vector<std::string>& row_labels,
                                             const std::vector<std::string>& col_labels,
                                             const std::vector<heatmap_panel>& panels,
                                             const heatmap_options& o = {}) {
  using namespace svg_detail;
  if (panels.empty()) throw std::invalid_argument("heatmap_svg: no panels to draw");
  const std::size_t rows = row_labels.size(), cols = col_labels.size();
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const auto& h = panels[p];
    if (h.rows != rows || h.cols != cols || h.values.size() != rows * cols) {
      throw std::invalid_argument("heatmap_svg: panel " + std::to_string(p) + " ('" + h.title + "') is (" +
                                  std::to_string(h.rows) + ", " + std::to_string(h.cols) + ") with " +
                                  std::to_string(h.values.size()) + " values, but the labels are (" +
                                  std::to_string(rows) + ", " + std::to_string(cols) + ")");
    }
  }
  double lo = o.min, hi = o.max;
  if (o.auto_range) {
    lo = INFINITY, hi = -INFINITY;
    for (const auto& h : panels)
      for (double v : h.values)
        if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(lo <= hi)) lo = 0, hi = 1;  // no numbers at all
  }
  const double span = hi > lo ? hi - lo : 1.0;

  // layout: [row labels | grid] per panel; column labels rotated under the grid
  const int c = o.cell;
  int row_w = 0, col_h = 0;
  for (const auto& s : row_labels) row_w = std::max(row_w, text_width(s));
  for (const auto& s : col_labels) col_h = std::max(col_h, text_width(s));
  const int label_gap = 6, margin = 10;
  const int grid_w = c * static_cast<int>(cols), grid_h = c * static_cast<int>(rows);
  const int title_h = o.title.empty() ? 0 : 24;
  // a panel: title line (18), grid, rotated column labels (60 degrees: height ~ 0.87 width + 10),
  // the axis caption (18)
  const int col_label_h = static_cast<int>(std::lround(0.87 * col_h)) + 14;
  const std::string caption = "rows: " + o.row_axis + ", columns: " + o.col_axis;
  const int panel_w = row_w + label_gap + 2 * margin +
                      std::max(grid_w + static_cast<int>(std::lround(0.5 * col_h)), text_width(caption));
  const int panel_h = 18 + grid_h + label_gap + col_label_h + 18 + margin;
  const std::size_t per_row = std::max<std::size_t>(1, std::min(o.panels_per_row, panels.size()));
  const std::size_t panel_rows = (panels.size() + per_row - 1) / per_row;
  const int legend_w = 90;
  // wide enough for the title (15 px bold: about 9 px per character), so it is never clipped
  const int width = std::max(margin + static_cast<int>(per_row) * panel_w + legend_w,
                             2 * margin + (text_width(o.title) * 5 + 3) / 4);
  const int height = std::max<int>(margin + title_h + static_cast<int>(panel_rows) * panel_h, title_h + 220);

  std::string s;
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
       std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
       "\" font-family=\"monospace\" font-size=\"12\">\n";
  const std::string grad = xml_escape(o.id) + "-scale";
  s += "<defs><linearGradient id=\"" + grad + "\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (std::size_t i = 0; i < std::size(blues); ++i)
    s += "<stop offset=\"" + num(static_cast<double>(i) / 8.0, "%.3f") + "\" stop-color=\"" + hex(blues[i]) +
         "\"/>";
  s += "</linearGradient>";
  const bool any_masked = !o.masked.empty();
  if (any_masked && o.masked.size() != rows * cols)
    throw std::invalid_argument("heatmap_svg: " + std::to_string(o.masked.size()) + " mask flags for (" +
                                std::to_string(rows) + ", " + std::to_string(cols) + ")");
  const std::string hatch = xml_escape(o.id) + "-masked";
  if (any_masked)
    s += "<pattern id=\"" + hatch +
         "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffffff\"/><line x1=\"0\" "
         "y1=\"0\" "
         "x2=\"0\" y2=\"6\" stroke=\"#9a9a9a\" stroke-width=\"2.5\"/></pattern>";
  s += "</defs>\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  if (!o.title.empty())
    s += "<text x=\"" + std::to_string(margin) + "\" y=\"18\" font-size=\"15\" font-weight=\"bold\">" +
         xml_escape(o.title) + "</text>\n";

  for (std::size_t p = 0; p < panels.size(); ++p) {
    const auto& h = panels[p];
    const int x0 = margin + static_cast<int>(p % per_row) * panel_w;
    const int y0 = margin + title_h + static_cast<int>(p / per_row) * panel_h;
    const int gx = x0 + row_w + label_gap, gy = y0 + 18;
    s += "<g class=\"panel\">\n";
    s += "<text x=\"" + std::to_string(gx) + "\" y=\"" + std::to_string(y0 + 12) +
         "\" font-weight=\"bold\">" + xml_escape(h.title) + "</text>\n";
    for (std::size_t i = 0; i < rows; ++i) {
      s += "<text x=\"" + std::to_string(gx - label_gap) + "\" y=\"" +
           std::to_string(gy + static_cast<int>(i) * c + c / 2 + 4) + "\" text-anchor=\"end\">" +
           xml_escape(row_labels[i]) + "</text>\n";
    }
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {
        const double v = h.values[i * cols + j];
        const bool masked = any_masked && o.masked[i * cols + j];
        s += "<rect x=\"" + std::to_string(gx + static_cast<int>(j) * c) + "\" y=\"" +
             std::to_string(gy + static_cast<int>(i) * c) + "\" width=\"" + std::to_string(c) +
             "\" height=\"" + std::to_string(c) + "\" fill=\"" +
             (masked ? "url(#" + hatch + ")" : colour((v - lo) / span)) +
             "\" stroke=\"#ffffff\" stroke-opacity=\"0.5\">";
        s += "<title>" +
             xml_escape(h.title + ": " + o.row_axis + " " + std::to_string(i) + " \"" + row_labels[i] +
                        "\", " + o.col_axis + " " + std::to_string(j) + " \"" + col_labels[j] +
                        "\" = " + (masked ? "masked" : num(v))) +
             "</title></rect>\n";
      }
    }
    for (std::size_t j = 0; j < cols; ++j) {
      const int x = gx + static_cast<int>(j) * c + c / 2, y = gy + grid_h + label_gap + 4;
      s += "<text x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" transform=\"rotate(60 " +
           std::to_string(x) + " " + std::to_string(y) + ")\">" + xml_escape(col_labels[j]) + "</text>\n";
    }
    s += "<text x=\"" + std::to_string(gx) + "\" y=\"" +
         std::to_string(gy + grid_h + label_gap + col_label_h + 12) + "\" fill=\"#555555\">" +
         xml_escape(caption) + "</text>\n";
    s += "</g>\n";
  }

  // legend: the colour scale, with its range
  const int lx = width - legend_w + 10, ly = margin + title_h + 18, lh = 160;
  s += "<g class=\"legend\">\n";
  s += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(ly) + "\" width=\"16\" height=\"" +
       std::to_string(lh) + "\" fill=\"url(#" + grad + ")\" stroke=\"#999999\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    const int y = ly + lh - lh * k / 4;
    s += "<line x1=\"" + std::to_string(lx + 16) + "\" y1=\"" + std::to_string(y) + "\" x2=\"" +
         std::to_string(lx + 20) + "\" y2=\"" + std::to_string(y) + "\" stroke=\"#555555\"/>";
    s += "<text x=\"" + std::to_string(lx + 23) + "\" y=\"" + std::to_string(y + 4) + "\">" +
         num(lo + span * k / 4.0, "%.3g") + "</text>\n";
  }
  if (any_masked)
    s += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(ly + lh + 14) +
         "\" width=\"16\" height=\"16\" fill=\"url(#" + hatch + ")\" stroke=\"#999999\"/><text x=\"" +
         std::to_string(lx + 23) + "\" y=\"" + std::to_string(ly + lh + 26) + "\">masked</text>\n";
  s += "</g>\n</svg>\n";
  return s;
}

/// the heatmaps of attention weights, one panel per head ("head 0", "head 1", ...):
/// weights[h][i][j] is head h's weight of query i (row_labels[i]) on key j (col_labels[j]).
/// Throws std::invalid_argument naming the head and row when a shape does not match.
[[nodiscard]] inline std::string attention_svg(const std::vector<std::string>& row_labels,
                                               const std::vector<std::string>& col_labels,
                                               const std::vector<std::vector<std::vector<double>>>& weights,
                                               const heatmap_options& o = {}) {
  std::vector<heatmap_panel> panels;
  for (std::size_t h = 0; h < weights.size(); ++h) {
    if (weights[h].size() != row_labels.size()) {
      throw std::invalid_argument("attention_svg: head " + std::to_string(h) + " has " +
                                  std::to_string(weights[h].size()) + " rows for " +
                                  std::to_string(row_labels.size()) + " query labels");
    }
    heatmap_panel p{"head " + std::to_string(h), row_labels.size(), col_labels.size(), {}};
    for (std::size_t i = 0; i < weights[h].size(); ++i) {
      if (weights[h][i].size() != col_labels.size()) {
        throw std::invalid_argument("attention_svg: head " + std::to_string(h) + " row " + std::to_string(i) +
                                    " has " + std::to_string(weights[h][i].size()) + " weights for " +
                                    std::to_string(col_labels.size()) + " key labels");
      }
      p.values.insert(p.values.end(), weights[h][i].begin(), weights[h][i].end());
    }
    panels.push_back(std::move(p));
  }
  return heatmap_svg(row_labels, col_labels, panels, o);
}

/// self-attention: the same labels on both axes
[[nodiscard]] inline std::string attention_svg(const std::vector<std::string>& labels,
                                               const std::vector<std::vector<std::vector<double>>>& weights,
                                               const heatmap_options& o = {}) {
  return attention_svg(labels, labels, weights, o);
}

}  // namespace qkv::io
