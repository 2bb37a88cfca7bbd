// page_truth.hpp: the 50-digit truth of a learner's page's computed matrices, and each float32 or
// float64 value's error against it in ulps.
//
//   qkv::io::page p("...");
//   example::page(p);           // it calls p.with_truth(): its op-less matrices are exact inputs
//   qkv::io::add_truth(p);      // every computed float32/float64 cell: truth and error in ulps
//
// The truth of a matrix follows the page's own account of how it was computed (page_how): from
// the exact values of the inputs (a float is an exact dyadic rational), each step (the page_how
// as the module's step, io/page_recompute.hpp's step_of) is redone in Boost.Multiprecision's
// cpp_bin_float_50 (50 significant digits) by reference/step_truth.hpp, the function the pages'
// truth module (wasm/qkv_truth.cpp) redoes it with for a learner's inputs: sums of products, the scale
// as the page states it, softmax with a 50-digit exp, a residual sum, relu, LayerNorm with a
// 50-digit square root, a transpose. What separates that from the exact value is below 1e-45
// relative, far below an ulp of double (1.1e-16). A matrix without a page_how that is marked
// derived() (a rounding, a sine, a concatenation) is not an input: nothing computed from it gets
// a truth. Summarised pages (their operands are not all embedded) get none. The cost: a page of
// the tutorials holds at most a few thousand numbers; the longest sum has 64 terms.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <qkv/reference/step_truth.hpp>

#include "page.hpp"
#include "page_recompute.hpp"

namespace qkv::io {

namespace page_truth_detail {

using real = reference::truth_real;
using values = std::vector<real>;

struct solver {
  std::vector<page::matrix_entry>& ms;
  std::map<std::string, const page::matrix_entry*> by_id;
  std::map<std::string, std::optional<values>> memo;

  explicit solver(std::vector<page::matrix_entry>& m) : ms(m) {
    for (const auto& e : ms) by_id[e.id] = &e;
  }

  /// the truth of matrix `id`, row-major, or nothing when its chain reaches a derived matrix
  const std::optional<values>& truth(const std::string& id) {
    if (const auto it = memo.find(id); it != memo.end()) return it->second;
    memo[id] = std::nullopt;  // a cycle in the page's how (a mistake) gives no truth
    const auto it = by_id.find(id);
    std::optional<values> out;
    if (it != by_id.end()) out = compute(*it->second);
    return memo[id] = std::move(out);
  }

  /// an input's truth is its value exactly; a computed matrix's is its page_how as the module's
  /// step (io/page_recompute.hpp's step_of: the same operands and sizes, checked against their
  /// shapes), redone in 50 digits by reference/step_truth.hpp
  std::optional<values> compute(const page::matrix_entry& m) {
    if (m.how.op.empty()) {
      if (m.derived || m.dtype == "exact") return std::nullopt;  // exact: the doubles are rounded
      return values(m.values.begin(), m.values.end());           // a float or double, exactly
    }
    std::string why;
    const auto st = page_recompute_detail::step_of(m, by_id, why);
    if (!st) return std::nullopt;
    const values* operand[3] = {nullptr, nullptr, nullptr};
    const std::string* ids[3] = {&st->a, &st->b, &st->c};
    for (int q = 0; q < 3; ++q) {
      if (ids[q]->empty()) continue;
      const auto& t = truth(*ids[q]);
      if (!t) return std::nullopt;
      operand[q] = &*t;
    }
    auto ptr = [](const values* v) { return v == nullptr ? nullptr : v->data(); };
    values v(m.rows * m.cols);
    if (reference::step_truth(st->kind, ptr(operand[0]), ptr(operand[1]), ptr(operand[2]), st->sizes,
                              st->scalar, m.values.data(), v.data()) != 0)
      return std::nullopt;
    return v;
  }
};

}  // namespace page_truth_detail

/// the 50-digit truth of every computed float32/float64 matrix of `p` and each value's error
/// against it in ulps (page::matrix_ref::truth), when the page asked for it (with_truth) and is
/// not summarised; matrices that already have a truth (an example's exact rationals) keep it.
/// Returns whether it gave any matrix its truth (the page then carries the truth module, which
/// recomputes it for a learner's inputs: tools/cmd_explain.hpp)
inline bool add_truth(page& p) {
  using namespace page_truth_detail;
  if (!p.wants_truth() || p.summarised()) return false;
  auto& ms = p.entries();
  solver s(ms);
  const bool texts = p.numbers() <= 4096;  // the truth's 20 digits per cell on small pages only
  bool added = false;
  for (auto& m : ms) {
    if (m.how.op.empty() || !m.truth_ulps.empty() || (m.dtype != "float32" && m.dtype != "float64")) continue;
    const auto t = s.truth(m.id);
    if (!t) continue;
    const bool f32 = m.dtype == "float32";
    std::vector<double> u;
    std::vector<std::string> txt;
    for (std::size_t k = 0; k < m.values.size(); ++k) {
      u.push_back(reference::truth_ulps(m.values[k], (*t)[k], f32 ? 24 : 53, f32 ? -126 : -1022));
      if (texts) txt.push_back(reference::truth_digits((*t)[k]));
    }
    m.truth_ulps = std::move(u);
    m.truth_text = std::move(txt);
    m.truth_name = "50 digits";
    added = true;
  }
  return added;
}

}  // namespace qkv::io
