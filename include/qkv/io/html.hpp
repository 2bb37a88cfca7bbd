// html.hpp: one self-contained HTML page with the walkthrough of a case: text, every matrix as a
// table with its shape, and the heatmaps (inline SVG). No script, no font, no link: it opens
// offline.
//
//   qkv::io::html_page page("BERT self-attention, head 0");
//   page.heading("Inputs").matrix("x", 9, 768, x_values, tokens);
//   page.heading("Weights").svg(qkv::io::attention_svg(tokens, weights));
//   page.write("walkthrough.html");
//
// The markup is XHTML-compatible (every element closed), so an XML parser reads it too.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "svg.hpp"

namespace qkv::io {

class html_page {
 public:
  explicit html_page(std::string title) : title_(std::move(title)) {}

  /// a section heading (level 2 to 4)
  html_page& heading(std::string_view text, int level = 2) {
    level = level < 2 ? 2 : (level > 4 ? 4 : level);
    const std::string tag = "h" + std::to_string(level);
    body_ += "<" + tag + ">" + xml_escape(text) + "</" + tag + ">\n";
    return *this;
  }

  /// a paragraph of plain text (escaped)
  html_page& paragraph(std::string_view text) {
    body_ += "<p>" + xml_escape(text) + "</p>\n";
    return *this;
  }

  /// preformatted text (a trace, a printed tensor), escaped
  html_page& preformatted(std::string_view text) {
    body_ += "<pre>" + xml_escape(text) + "</pre>\n";
    return *this;
  }

  /// a (rows, cols) matrix, row-major, as a table captioned with its name and shape; optional
  /// labels for the rows and the columns (their sizes must match); numbers with `digits`
  /// significant digits. Throws std::invalid_argument naming the matrix on a size mismatch.
  html_page& matrix(std::string_view name, std::size_t rows, std::size_t cols,
                    const std::vector<double>& values, const std::vector<std::string>& row_labels = {},
                    const std::vector<std::string>& col_labels = {}, int digits = 6) {
    const std::string shape = "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
    if (values.size() != rows * cols)
      throw std::invalid_argument("html_page::matrix '" + std::string(name) + "' is " + shape + " but has " +
                                  std::to_string(values.size()) + " values");
    if (!row_labels.empty() && row_labels.size() != rows)
      throw std::invalid_argument("html_page::matrix '" + std::string(name) + "' is " + shape + " but has " +
                                  std::to_string(row_labels.size()) + " row labels");
    if (!col_labels.empty() && col_labels.size() != cols)
      throw std::invalid_argument("html_page::matrix '" + std::string(name) + "' is " + shape + " but has " +
                                  std::to_string(col_labels.size()) + " column labels");
    body_ += "<div class=\"matrix\"><table>\n<caption><code>" + xml_escape(name) + "</code> " + shape +
             "</caption>\n";
    body_ += "<tr><th></th>";
    for (std::size_t j = 0; j < cols; ++j)
      body_ += "<th>" + (col_labels.empty() ? std::to_string(j) : xml_escape(col_labels[j])) + "</th>";
    body_ += "</tr>\n";
    for (std::size_t i = 0; i < rows; ++i) {
      body_ += "<tr><th>" + (row_labels.empty() ? std::to_string(i) : xml_escape(row_labels[i])) + "</th>";
      for (std::size_t j = 0; j < cols; ++j) body_ += "<td>" + number(values[i * cols + j], digits) + "</td>";
      body_ += "</tr>\n";
    }
    body_ += "</table></div>\n";
    return *this;
  }

  /// the same from nested rows (all of the same length)
  html_page& matrix(std::string_view name, const std::vector<std::vector<double>>& m,
                    const std::vector<std::string>& row_labels = {},
                    const std::vector<std::string>& col_labels = {}, int digits = 6) {
    const std::size_t cols = m.empty() ? 0 : m[0].size();
    std::vector<double> flat;
    flat.reserve(m.size() * cols);
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (m[i].size() != cols)
        throw std::invalid_argument("html_page::matrix '" + std::string(name) + "': row " +
                                    std::to_string(i) + " has " + std::to_string(m[i].size()) +
                                    " values, row 0 has " + std::to_string(cols));
      flat.insert(flat.end(), m[i].begin(), m[i].end());
    }
    return matrix(name, m.size(), cols, flat, row_labels, col_labels, digits);
  }

  /// SVG markup (from heatmap_svg / attention_svg), inserted as it is
  html_page& svg(std::string_view markup) {
    body_ += "<div class=\"figure\">\n";
    body_ += markup;
    body_ += "</div>\n";
    return *this;
  }

  /// the whole page
  [[nodiscard]] std::string str() const {
    std::string s =
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
        "<meta charset=\"utf-8\"/>\n<title>" +
        xml_escape(title_) + "</title>\n<style>\n" + style() + "</style>\n</head>\n<body>\n<h1>" +
        xml_escape(title_) + "</h1>\n";
    s += body_;
    s += "<p class=\"footer\">Written by qkv.</p>\n</body>\n</html>\n";
    return s;
  }

  /// writes the page; throws std::runtime_error naming the file if it cannot
  void write(const std::string& path) const { write_text_file(path, str()); }

 private:
  std::string title_;
  std::string body_;

  static std::string number(double v, int digits) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
  }

  static std::string style() {
    return "body{font-family:sans-serif;margin:2em;color:#222;max-width:110em}\n"
           "h1{font-size:1.5em}h2{font-size:1.25em;margin-top:1.6em}\n"
           "pre{background:#f6f8fa;padding:.6em;overflow-x:auto}\n"
           ".matrix{overflow-x:auto;margin:.8em 0}\n"
           "table{border-collapse:collapse;font-family:monospace;font-size:12px}\n"
           "caption{text-align:left;font-family:sans-serif;font-size:14px;padding:.3em 0}\n"
           "th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}th{background:#f0f4f8}\n"
           ".figure{overflow-x:auto;margin:1em 0}.footer{color:#888;font-size:.8em;margin-top:3em}\n";
  }
};

}  // namespace qkv::io
