// 07_positional_encoding.cpp: the sinusoidal positional encoding of "Attention Is All You Need", proven and plotted.
//
// Self-attention ignores order: permute the tokens and its outputs are permuted the same way.
// The transformer adds a position signal to each embedding,
//   PE(pos, 2i) = sin(pos / 10000^(2i/d)),   PE(pos, 2i+1) = cos(pos / 10000^(2i/d)),
// a sine and a cosine per pair of dimensions, the wavelength growing geometrically from 2 pi to
// 10000 * 2 pi. The paper chose it because PE(pos + k) is a linear function (a rotation in each
// pair) of PE(pos), whatever pos: a fixed offset looks the same everywhere. Proven below at
// compile time, then plotted as the well-known figure (The Annotated Transformer: d_model 20,
// dimensions 4 to 7 over 100 positions) into the SVG file named as the argument, and computed at run
// time at a realistic size (2048 positions x 512 dimensions).
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <qkv/core/check.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/positional.hpp>
#include <qkv/io/print.hpp>
#include <qkv/io/svg.hpp>

#include "say.hpp"  // say(): printf-style lines through std::cout (qkv explain captures it)

namespace qkv::examples::positional_encoding {

namespace check = qkv::check;
using qkv::matrix;

// ---------------------------------------------------------------------------------------------
// a 4-dimensional encoding, by hand

constexpr auto pe4 = qkv::sinusoidal_positional_encoding<double, 16, 4>();

// position 0: sin 0 = 0 and cos 0 = 1 in every pair
static_assert(qkv::row(pe4, 0) == matrix<double, 1, 4>{{{0, 1, 0, 1}}});
// d = 4: pair 0 has frequency 10000^0 = 1, pair 1 has 10000^(-2/4) = 1/100, so position 1 is
// [sin 1, cos 1, sin 0.01, cos 0.01] = [0.8414709848078965, 0.5403023058681398, 0.009999833334166664, 0.9999500004166653]
// (within qkv::sin/cos's 1 ulp and the frequency's rounding: 2e-16)
static_assert(proven<check::near(qkv::row(pe4, 1), matrix<double, 1, 4>{{{0.8414709848078965, 0.5403023058681398,
                                                                          0.009999833334166664, 0.9999500004166653}}}, 2e-16)>);
// every value is a sine or a cosine: within [-1, 1]
static_assert(qkv::max_abs_difference(pe4, matrix<double, 16, 4>{}) <= 1.0);

// a fixed offset is a fixed rotation: in pair i, with a = pos w_i and b = k w_i,
//   [sin(a + b), cos(a + b)] = [sin a cos b + cos a sin b, cos a cos b - sin a sin b]
// so PE(pos + k) comes from PE(pos) by the same 2 x 2 rotation for every pos. Here k = 3, pair 0
// (w = 1): from position 5 to 8 and from position 11 to 14 by the same rotation (cos 3, sin 3).
// Tolerance: each side within a few roundings of 1: 4 ulp of 1 = 9e-16, 2e-15 in all
constexpr check::verdict rotation_holds(std::size_t pos, std::size_t k, std::size_t pair) {
  const double w = qkv::positional_frequency(pair, 4);
  const double cb = qkv::cos(double(k) * w), sb = qkv::sin(double(k) * w);
  const double s = pe4(pos, 2 * pair), c = pe4(pos, 2 * pair + 1);
  return check::near(pe4(pos + k, 2 * pair), s * cb + c * sb, 2e-15) &&
         check::near(pe4(pos + k, 2 * pair + 1), c * cb - s * sb, 2e-15);
}
static_assert(proven<rotation_holds(5, 3, 0) && rotation_holds(11, 3, 0) && rotation_holds(2, 7, 1) && rotation_holds(8, 7, 1)>);

// so the dot product of two encodings depends only on their distance:
//   PE(p) . PE(p + k) = sum_i [sin a sin(a + b) + cos a cos(a + b)] = sum_i cos(k w_i)
// for k = 2, d = 4: cos 2 + cos 0.02 = -0.4161468365471424 + 0.9998000066665778 = 0.5836531701194354
static_assert(proven<check::near(qkv::dot(qkv::row(pe4, 3), qkv::row(pe4, 5)), 0.5836531701194354, 1e-15)>);
static_assert(proven<check::near(qkv::dot(qkv::row(pe4, 10), qkv::row(pe4, 12)), 0.5836531701194354, 1e-15)>);
// and every encoding has the same length: |PE(p)|^2 = sum_i (sin^2 + cos^2) = d / 2 = 2
static_assert(proven<check::near(qkv::dot(qkv::row(pe4, 9), qkv::row(pe4, 9)), 2.0, 1e-15)>);

// ---------------------------------------------------------------------------------------------
// the figure: d_model = 20, dimensions 4 to 7, positions 0 to 99, float32 as PyTorch would hold it

constexpr std::size_t figure_positions = 100, figure_d = 20;
constexpr auto figure = qkv::sinusoidal_positional_encoding<float, figure_positions, figure_d>();

// dimensions 4 and 5 are pair 2: frequency 10000^(-4/20) = 0.15848931924611132, a wavelength of
// 2 pi / w = 39.6 positions; dimensions 6 and 7 are pair 3: 10000^(-6/20) = 0.06309573444801932,
// a wavelength of 99.6 positions (one full period across the figure)
static_assert(proven<check::near(qkv::positional_frequency(2, figure_d), 0.15848931924611132, 1e-17)>);
static_assert(proven<check::near(qkv::positional_frequency(3, figure_d), 0.06309573444801932, 1e-17)>);
// position 10, dimension 4: sin(10 w_2) = sin(1.5848931924611132) = 0.9999006408346118 (near its
// peak at pi/2 = 1.5708); dimension 5: cos(1.5849) = -0.014096398778854784. Position 50,
// dimensions 6, 7: sin(3.1548) = -0.013193686002997633, cos(3.1548) = -0.999912959536806.
// float32: the double value rounded once, within half a float ulp (3e-8 near 1, 1e-9 near 0.014)
static_assert(proven<check::near(figure(10, 4), 0.9999006408346118f, 3e-8f) && check::near(figure(10, 5), -0.014096398778854784f, 1e-9f)>);
static_assert(proven<check::near(figure(50, 6), -0.013193686002997633f, 1e-9f) && check::near(figure(50, 7), -0.999912959536806f, 6e-8f)>);

// ---------------------------------------------------------------------------------------------
// the SVG: one line per dimension, positions across, values -1..1 up

/// a number for an SVG attribute
inline std::string num(double v, const char* fmt = "%.6g") {
  char buf[40];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

/// appends printf-style text to s: one call per SVG element (a chain of std::string + would
/// cost more to compile than the rest of this example's run-time code together)
[[gnu::format(printf, 2, 3)]] inline void add(std::string& s, const char* format, ...) {
  char buf[256];
  std::va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  if (n >= 0 && std::size_t(n) < sizeof buf) {
    s += buf;
  } else if (n > 0) {  // longer than the buffer: format again in place
    const std::size_t at = s.size();
    s.resize(at + std::size_t(n) + 1);
    std::vsnprintf(s.data() + at, std::size_t(n) + 1, format, again);
    s.resize(at + std::size_t(n));
  }
  va_end(again);
  va_end(args);
}

/// a small self-contained line plot: series[s][x] over x = 0 .. n-1
inline std::string line_plot_svg(const std::vector<std::vector<double>>& series, const std::vector<std::string>& names,
                                 const std::string& title) {
  const double w = 720, h = 360, left = 60, right = 130, top = 40, bottom = 50;
  const double pw = w - left - right, ph = h - top - bottom;
  const std::size_t n = series.empty() ? 0 : series[0].size();
  const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
  auto px = [&](double x) { return left + pw * x / double(n > 1 ? n - 1 : 1); };
  auto py = [&](double y) { return top + ph * (1.0 - (y + 1.0) / 2.0); };  // y in [-1, 1]
  std::string s;
  add(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.6g\" height=\"%.6g\" viewBox=\"0 0 %.6g %.6g\" "
         "font-family=\"sans-serif\" font-size=\"12\">\n", w, h, w, h);
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  add(s, "<text x=\"%.6g\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n", left + pw / 2,
      qkv::io::xml_escape(title).c_str());
  // axes, grid and ticks
  for (double y : {-1.0, -0.5, 0.0, 0.5, 1.0}) {
    add(s, "<line x1=\"%.6g\" y1=\"%.6g\" x2=\"%.6g\" y2=\"%.6g\" stroke=\"#dddddd\"/>\n", left, py(y), left + pw, py(y));
    add(s, "<text x=\"%.6g\" y=\"%.6g\" text-anchor=\"end\">%.6g</text>\n", left - 8, py(y) + 4, y);
  }
  for (std::size_t x = 0; x < n; x += 10) {
    add(s, "<line x1=\"%.6g\" y1=\"%.6g\" x2=\"%.6g\" y2=\"%.6g\" stroke=\"black\"/>\n", px(double(x)), top + ph,
        px(double(x)), top + ph + 5);
    add(s, "<text x=\"%.6g\" y=\"%.6g\" text-anchor=\"middle\">%zu</text>\n", px(double(x)), top + ph + 20, x);
  }
  add(s, "<rect x=\"%.6g\" y=\"%.6g\" width=\"%.6g\" height=\"%.6g\" fill=\"none\" stroke=\"black\"/>\n", left, top, pw, ph);
  add(s, "<text x=\"%.6g\" y=\"%.6g\" text-anchor=\"middle\">position</text>\n", left + pw / 2, h - 10);
  // one polyline per series, and its legend entry
  for (std::size_t k = 0; k < series.size(); ++k) {
    const char* c = colours[k % 6];
    add(s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", c);
    for (std::size_t x = 0; x < n; ++x) add(s, "%s%.2f,%.2f", x ? " " : "", px(double(x)), py(series[k][x]));
    s += "\"/>\n";
    const double ly = top + 10 + 20 * double(k);
    add(s, "<line x1=\"%.6g\" y1=\"%.6g\" x2=\"%.6g\" y2=\"%.6g\" stroke=\"%s\" stroke-width=\"2\"/>\n", left + pw + 15, ly,
        left + pw + 40, ly, c);
    add(s, "<text x=\"%.6g\" y=\"%.6g\">%s</text>\n", left + pw + 46, ly + 4, qkv::io::xml_escape(names[k]).c_str());
  }
  return s + "</svg>\n";
}

/// the figure's four curves, from the compile-time table
inline std::string figure_svg() {
  std::vector<std::vector<double>> series;
  std::vector<std::string> names;
  for (std::size_t dim = 4; dim < 8; ++dim) {
    std::vector<double> y(figure_positions);
    for (std::size_t p = 0; p < figure_positions; ++p) y[p] = double(figure(p, dim));
    series.push_back(y);
    names.push_back("dim " + std::to_string(dim));
  }
  return line_plot_svg(series, names, "Sinusoidal positional encoding, d_model = 20: dimensions 4 to 7");
}

// ---------------------------------------------------------------------------------------------
// a realistic size at run time: 2048 positions x 512 dimensions

namespace realistic {

constexpr std::size_t positions = 2048, d = 512;

inline void walkthrough() {
  // the same scalar formula as the constexpr table, with run-time arguments (a constexpr
  // table of 1M elements would need raised compiler limits)
  std::vector<double> pe(positions * d);
  std::vector<float> pe32(positions * d);
  for (std::size_t p = 0; p < positions; ++p)
    for (std::size_t j = 0; j < d; ++j) {
      pe[p * d + j] = qkv::positional_encoding_value(p, j, d);
      pe32[p * d + j] = static_cast<float>(pe[p * d + j]);
    }
  // |PE(p)|^2 = d/2 for every p; PE(p) . PE(p + k) = sum_i cos(k w_i) for every p
  double worst_norm = 0, worst_shift = 0, worst_libm = 0;
  for (std::size_t p = 0; p < positions; ++p) {
    double n2 = 0;
    for (std::size_t j = 0; j < d; ++j) {
      n2 += pe[p * d + j] * pe[p * d + j];
      const double angle = double(p) * qkv::positional_frequency(j / 2, d);
      worst_libm = std::max(worst_libm, std::abs(pe[p * d + j] - (j % 2 ? std::cos(angle) : std::sin(angle))));
    }
    worst_norm = std::max(worst_norm, std::abs(n2 - double(d) / 2));
  }
  const std::size_t k = 7;
  double expected = 0;
  for (std::size_t i = 0; i < d / 2; ++i) expected += std::cos(double(k) * qkv::positional_frequency(i, d));
  for (std::size_t p = 0; p + k < positions; p += 97) {
    double dotp = 0;
    for (std::size_t j = 0; j < d; ++j) dotp += pe[p * d + j] * pe[(p + k) * d + j];
    worst_shift = std::max(worst_shift, std::abs(dotp - expected));
  }
  say("At run time: %zu positions x %zu dimensions\n", positions, d);
  say("  largest | |PE(p)|^2 - d/2 |:                 %.3g\n", worst_norm);
  say("  largest | PE(p) . PE(p+%zu) - sum cos(%zu w_i) |: %.3g (the same for every p)\n", k, k, worst_shift);
  say("  largest |qkv::sin/cos - libm's|:              %.3g\n", worst_libm);
  say("  PE(2047, 0..3) = [%.7f, %.7f, %.7f, %.7f] (float32: %.7f ...)\n", pe[2047 * d], pe[2047 * d + 1],
              pe[2047 * d + 2], pe[2047 * d + 3], double(pe32[2047 * d]));
  // each sum has d terms of size <= 1 in double: within d u = 6e-14, plus the values' own
  // errors (a few ulp of each sine and cosine, and the angle's rounding: 2 pos u, below 1e-12)
  if (worst_norm > 1e-11 || worst_shift > 1e-10) throw std::runtime_error("07_positional_encoding: an identity fails");
}

}  // namespace realistic

/// svg_path: where to write the figure (the example program's argument); null: nowhere (qkv
/// explain writes no file)
inline void walkthrough(const char* svg_path = nullptr) {
  using qkv::io::torch_str;
  std::cout << "The sinusoidal positional encoding, proven at compile time\n\n"
            << "d_model = 4, positions 0..3:\n" << torch_str(qkv::block<4, 4>(pe4, 0, 0)) << "\n"
            << "PE(3) . PE(5) = PE(10) . PE(12) = cos 2 + cos 0.02 = "
            << qkv::dot(qkv::row(pe4, 3), qkv::row(pe4, 5)) << "\n\n"
            << "d_model = 20, dimensions 4..7 at positions 0, 10, 50, 99:\n";
  for (std::size_t p : {0, 10, 50, 99}) {
    say("  pos %2zu: [% .7f, % .7f, % .7f, % .7f]\n", p, double(figure(p, 4)), double(figure(p, 5)),
                double(figure(p, 6)), double(figure(p, 7)));
  }
  if (svg_path) {
    qkv::io::write_text_file(svg_path, figure_svg());
    std::cout << "wrote " << svg_path << " (dimensions 4 to 7 over 100 positions)\n\n";
  } else {
    std::cout << "(the figure, dimensions 4 to 7 over 100 positions: give the example program a file name)\n\n";
  }
  realistic::walkthrough();
}

}  // namespace qkv::examples::positional_encoding

// the learner's page (qkv explain positional_encoding --html FILE), not a section of its own:
// the sections above are its
// steps (scripts/page_notes.py reads their comments), the static_asserts its proofs
namespace qkv::examples::positional_encoding {

/// "pos 0", "pos 1", ... (positions count from 0)
inline std::vector<std::string> from_zero(const std::string& prefix, std::size_t n) {
  std::vector<std::string> l;
  for (std::size_t i = 0; i < n; ++i) l.push_back(prefix + std::to_string(i));
  return l;
}

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  p.with_truth();  // its matrices without a how are exact inputs, or marked derived()
  p.step(1);
  p.matrix("pe4", pe4).rows(from_zero("pos ", 16)).cols({"sin(p w_0)", "cos(p w_0)", "sin(p w_1)", "cos(p w_1)"});
  // PE(p) . PE(q) for every pair: the same along each diagonal (it depends only on q - p)
  p.matrix("PE(p) \u00b7 PE(q)", qkv::matrix_product(pe4, qkv::transposed(pe4)))
      .rows(from_zero("p=", 16)).cols(from_zero("q=", 16)).how(how::dot("pe4", "pe4", 4));
  p.heatmap("PE(p) \u00b7 PE(q), d = 4: constant along each diagonal", {"PE(p) \u00b7 PE(q)"});
  p.step(2);
  p.matrix("figure", figure).rows(from_zero("pos ", figure_positions)).cols(from_zero("dim ", figure_d));
  p.step(3);
  // the heatmap's rows: the figure's columns 4 to 7 (a block), transposed
  p.matrix("figure, dimensions 4 to 7", qkv::block<figure_positions, 4>(figure, 0, 4))
      .rows(from_zero("pos ", figure_positions)).cols({"dim 4", "dim 5", "dim 6", "dim 7"}).how(how::block("figure", 0, 4)).hidden();
  p.matrix("dimensions 4 to 7", qkv::transposed(qkv::block<figure_positions, 4>(figure, 0, 4)))
      .rows({"dim 4", "dim 5", "dim 6", "dim 7"}).cols(from_zero("", figure_positions)).hidden()
      .how(how::transposed("figure, dimensions 4 to 7"));
  p.heatmap("the figure's dimensions 4 to 7 (rows) over positions 0 to 99 (columns), from -1 to 1",
            {"dimensions 4 to 7"});
  p.step(4);
  matrix<double, 1, 4> last{};
  for (std::size_t j = 0; j < 4; ++j) last(0, j) = qkv::positional_encoding_value(2047, j, realistic::d);
  p.matrix("PE(2047, 0..3)", last).rows({"pos 2047"}).cols(from_zero("dim ", 4));
  p.matrix("PE(2047, 0..3) in float32", qkv::map(last, [](double v) { return static_cast<float>(v); }))
      .rows({"pos 2047"}).cols(from_zero("dim ", 4)).how(how::cast("PE(2047, 0..3)"));  // the row above, rounded
}

}  // namespace qkv::examples::positional_encoding

namespace qkv::examples::positional_encoding {
/// the program: its one argument, a file for the figure, is optional
inline int program(int argc, char** argv) {
  walkthrough(argc > 1 ? argv[1] : nullptr);
  return 0;
}
}  // namespace qkv::examples::positional_encoding

#ifndef QKV_EXAMPLE_NO_MAIN
int main(int argc, char** argv) { return qkv::examples::positional_encoding::program(argc, argv); }
#endif
