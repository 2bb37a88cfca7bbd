// page_recompute.hpp: what a `qkv explain` page recomputes when a learner edits one of its inputs
// (docs/pages.md, "Editing a page"), and the proof, at page-writing time, that it recomputes the
// example's own numbers.
//
//   qkv::io::page p("...");
//   example::page(p);                                  // its matrices, each with its page_how
//   const auto plan = qkv::io::plan_recompute(p);      // which matrices are steps, inputs, stale
//   p.edit(qkv::io::recompute_spec(plan, module, bytes));   // the page's "edit" object
//
// Each matrix of the page is one of:
//   an input    no page_how, not derived(), float32, float64 or exact (rationals whose fractions
//               fit 64-bit integers: page_exact): its numbers are the example's inputs; editable
//               when shown and read by some step
//   a step      a page_how that core/flat_steps.hpp computes (dot, matmul, the weights times the
//               values with attended_context's policy, scale or division with the example's mask,
//               softmax (of each row, or of the whole matrix), add, relu, LayerNorm, transpose, hconcat, block, RoPE,
//               row_dot, softmax_backward, flash attention's online softmax block by block, a float32
//               rounded to bfloat16 or float16, the kinds 40-59 of flat::extended_step: column
//               sums, SGD, cross entropy, embeddings, flash attention's m, l, L, recomputed P and
//               backward sums), from inputs
//               and steps of its own type, AND whose numbers plan_recompute reproduces here, with
//               those functions, bit for bit from the page's own inputs: so before any edit the
//               module gives every cell the example's proven number. Over exact rationals
//               (flat::exact_step: dot, matmul, add, transpose, hconcat, block, (de)interleave, row_dot,
//               softmax_backward, in page_exact) the same, fraction for fraction. A page's steps
//               may mix types (03b): a cast (page_how::cast, flat::cast) turns float32 into
//               float64 or a float into its exact rational, checked the same way
//   stale       the rest (a derived() matrix, a step whose operand is stale, one the functions do
//               not reproduce bit for bit: the example computes it another way, an exact step
//               with no exact form or whose fractions overflow 64-bit integers, unless the tool
//               gives a page_wide_exact and the step's result is read by no other step: then it is
//               a wide step, computed over 128-bit rationals by a module of its own): after an
//               edit it keeps the example's numbers and says so, with why
// On a summarised page (example 04's BERT layer) only the matrices it embeds whole take part
// (page::embedded_whole(), and its scratch() ones, which the module computes): an input it does
// not hold whole (a 768 x 768 weight) is neither editable nor recomputed; a matrix computed from
// one is an input when every operand the page holds is an input (plan.cut, with why), else stale.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <qkv/core/flat_steps.hpp>
#include <qkv/exact/rational.hpp>

#include "page.hpp"

namespace qkv::io {

/// one step of a page: matrix `id` = kind(a, b, c) with these sizes (core/flat_steps.hpp's step())
struct page_step {
  std::string id;
  flat::kind kind = flat::kind::dot;
  std::string a, b, c;  // operand ids ("" none): see flat::step for what b and c are per kind
  flat::step_sizes sizes;
  double scalar = 0;   // the factor, divisor or eps
  std::string masked;  // scale / divide: "0" / "1" per cell (1: masked in the example), or ""
  std::string dtype;   // its result's: float32, float64 or exact (a cast's is not its operand's)
  bool wide = false;   // an exact step over 128-bit rationals (the wide module; page_wide_exact)
};

/// the exact pages' numbers in the module (wasm/qkv_wasm.cpp's q64): rational<long long>
using page_exact = qkv::exact::rational<long long>;

/// what a page recomputes (the top of this file)
struct page_recompute_plan {
  std::vector<std::string> inputs;                         // editable inputs, in page order
  std::vector<page_step> steps;                            // in page order (operands first)
  std::vector<std::pair<std::string, std::string>> stale;  // id, why it is not recomputed
  std::string why;                                         // nonempty: nothing is editable, why
  // a summarised page: the matrices with a page_how that are inputs here, with why (summarised()
  // below: an operand is not on the page and every one that is is an input)
  std::vector<std::pair<std::string, std::string>> cut;
  bool exact = false;  // some step is over exact rationals (page_exact: qkv_step_q64 in the module)
  bool wide = false;   // some step is over 128-bit rationals (the wide module, wasm/qkv_wide.cpp)
};

/// an exact step over wider rationals than page_exact, for a step whose fractions overflow 64-bit
/// integers (03b's w_T_2): the step `s` on its operands' values (a, b, c: page_exact, empty when
/// none), the result's fractions as the page writes them (page.hpp's exact_text), or nothing when
/// the kind has no exact form; throws rational.hpp's error when even the wider type overflows.
/// io/page_wide.hpp gives the tool the one over q128 (Boost), which the wide module
/// (wasm/qkv_wide.cpp) computes in the page
using page_wide_exact = std::function<std::optional<std::vector<std::string>>(
    const page_step& s, const std::vector<page_exact>& a, const std::vector<page_exact>& b,
    const std::vector<page_exact>& c)>;

namespace page_recompute_detail {

using entry = page::matrix_entry;

/// the bits of a number of type T, NaN as one pattern (a NaN's payload is the compiler's choice)
template <class T>
bool same_bits(T a, T b) {
  if (a != a && b != b) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// step `s` natively in T, its operands' numbers in `data`
template <class T>
std::vector<T> run(const page_step& s, const std::map<std::string, std::vector<T>>& data) {
  auto ptr = [&](const std::string& id) -> const T* { return id.empty() ? nullptr : data.at(id).data(); };
  std::vector<T> out(s.sizes.rows * s.sizes.cols);
  std::vector<unsigned char> mask;
  for (char c : s.masked) mask.push_back(c == '1' ? 1 : 0);
  flat::extended_step<T>(s.kind, ptr(s.a), ptr(s.b), ptr(s.c), mask.empty() ? nullptr : mask.data(), s.sizes,
                         T(s.scalar), out.data());
  return out;
}

/// the step that computes m from its page_how, or why none does (the sizes are checked against
/// the operands' shapes here, so that the functions never read past a buffer)
inline std::optional<page_step> step_of(const entry& m, const std::map<std::string, const entry*>& by_id,
                                        std::string& why) {
  const auto& h = m.how;
  auto get = [&](const std::string& id) -> const entry* {
    const auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : it->second;
  };
  const entry* A = get(h.a);
  const entry* B = h.b.empty() ? nullptr : get(h.b);
  const entry* Bias = h.bias.empty() ? nullptr : get(h.bias);
  if (A == nullptr || (!h.b.empty() && B == nullptr) || (!h.bias.empty() && Bias == nullptr)) {
    why = "an operand is not on this page";
    return std::nullopt;
  }
  const std::size_t R = m.rows, C = m.cols;
  page_step s;
  s.id = m.id, s.a = h.a;
  s.sizes.rows = R, s.sizes.cols = C, s.sizes.as = A->cols, s.sizes.n = h.n, s.sizes.ac = h.ac,
  s.sizes.br = h.br, s.sizes.bc = h.bc;
  auto fail = [&](const char* w) -> std::optional<page_step> {
    why = w;
    return std::nullopt;
  };
  auto bias_fits = [&] { return Bias == nullptr || (Bias->rows == 1 && Bias->cols >= C); };
  if (h.op == "dot" || h.op == "matmul") {
    if (B == nullptr || h.n == 0 || h.ac + h.n > A->cols || A->rows < R || !bias_fits())
      return fail("its sizes do not fit its operands");
    s.b = h.b, s.c = h.bias, s.sizes.bs = B->cols;
    if (h.op == "dot") {
      if (h.bc + h.n > B->cols || B->rows < C) return fail("its sizes do not fit its operands");
      s.kind = flat::kind::dot;
      return s;
    }
    if (h.br + h.n > B->rows || h.bc + C > B->cols) return fail("its sizes do not fit its operands");
    // the weights times the values: attended_context's policy, its keys those the weights' softmax saw
    const entry* S = A->how.op == "softmax" || A->how.op == "softmax_naive" ? get(A->how.a) : nullptr;
    if (S != nullptr && h.ac == 0 && h.n == A->cols && Bias == nullptr && S->rows == A->rows &&
        S->cols == A->cols) {
      s.kind = flat::kind::attended, s.c = S->id;
      return s;
    }
    s.kind = flat::kind::matmul;
    return s;
  }
  if (h.op == "scale") {
    if (A->rows != R || A->cols != C || (B != nullptr && (B->rows != R || B->cols != C)))
      return fail("its sizes do not fit its operands");
    s.kind = h.divisor != 0 ? flat::kind::divide : flat::kind::scale;
    s.scalar = h.divisor != 0 ? h.divisor : h.scale;
    s.c = h.b;
    // padded_divided: the mask of row br of a key padding mask (Bias), read by the step; the
    // step's own `masked` cells are the example's other ones
    if (Bias != nullptr) {
      if (h.divisor == 0 || Bias->cols != C || h.br >= Bias->rows)
        return fail("its sizes do not fit its operands");
      s.kind = flat::padded_divide_kind, s.b = h.bias, s.sizes.bs = Bias->cols, s.sizes.br = h.br;
    }
    const auto padding = [&](std::size_t k) {
      return Bias != nullptr && Bias->values[h.br * C + k % C] != 0;
    };
    bool any = false;
    for (std::size_t k = 0; k < R * C; ++k) {
      const bool masked = std::isinf(m.values[k]) && m.values[k] < 0 &&
                          !(std::isinf(A->values[k]) && A->values[k] < 0) && !padding(k);
      s.masked += masked ? '1' : '0';
      any = any || masked;
    }
    if (!any) s.masked.clear();
    return s;
  }
  if (h.op == "softmax" || h.op == "softmax_naive" || h.op == "softmax_all" || h.op == "relu") {
    if (A->rows != R || A->cols != C) return fail("its sizes do not fit its operands");
    s.kind = h.op == "softmax"       ? flat::kind::softmax
             : h.op == "relu"        ? flat::kind::relu
             : h.op == "softmax_all" ? flat::kind::softmax_all
                                     : flat::kind::naive_softmax;
    return s;
  }
  if (h.op == "add") {
    if (B == nullptr || A->rows != R || A->cols != C || B->rows != R || B->cols != C)
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::add, s.b = h.b;
    return s;
  }
  if (h.op == "block") {
    if (h.br + R > A->rows || h.bc + C > A->cols) return fail("its sizes do not fit its operands");
    s.kind = flat::kind::block;
    return s;
  }
  if (h.op == "hconcat") {
    if (B == nullptr || A->rows != R || B->rows != R || A->cols + B->cols != C)
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::hconcat, s.b = h.b, s.sizes.bs = B->cols;
    return s;
  }
  if (h.op == "transpose") {
    if (A->rows != C || A->cols != R) return fail("its sizes do not fit its operands");
    s.kind = flat::kind::transpose;
    return s;
  }
  if (h.op == "layernorm") {
    if (B == nullptr || Bias == nullptr) return fail("a LayerNorm without its weight and bias on the page");
    if (A->rows != R || A->cols != C || B->rows != 1 || B->cols != C || !bias_fits())
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::layer_norm, s.b = h.b, s.c = h.bias, s.scalar = h.scale;
    return s;
  }
  if (h.op == "rowdot") {
    if (B == nullptr || C != 1 || h.n == 0 || h.ac + h.n > A->cols || h.bc + h.n > B->cols || A->rows < R ||
        B->rows < R)
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::row_dot, s.b = h.b, s.sizes.bs = B->cols;
    return s;
  }
  if (h.op == "softmax_backward") {
    if (B == nullptr || Bias == nullptr || A->rows != R || A->cols != C || B->rows != R || B->cols != C ||
        Bias->rows != R || Bias->cols != 1)
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::softmax_backward, s.b = h.b, s.c = h.bias;
    return s;
  }
  if (h.op == "rope") {  // b: the cos table, bias: the sin table, (rows, rotary_dim / 2) at least
    const std::size_t r = h.ac;
    if (B == nullptr || Bias == nullptr || A->rows != R || A->cols != C || h.n == 0 || C % h.n != 0 ||
        r % 2 != 0 || r > h.n || B->rows < R || Bias->rows < R || B->cols < r / 2 || Bias->cols != B->cols ||
        (h.note != "interleaved" && h.note != "half_split"))
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::rope, s.b = h.b, s.c = h.bias, s.sizes.bs = B->cols, s.sizes.n = h.n, s.sizes.ac = r,
    s.sizes.br = h.note == "interleaved" ? 1 : 0;
    return s;
  }
  if (h.op == "online_state") {  // b: the values, bias: the state before (or none), n keys
    if (B == nullptr || C < 4 || B->cols != C - 4 || A->rows != R || h.n == 0 || h.ac + h.n > A->cols ||
        h.br + h.n > B->rows || (Bias != nullptr && (Bias->rows != R || Bias->cols != C)))
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::online_state, s.b = h.b, s.c = h.bias, s.sizes.bs = B->cols;
    return s;
  }
  if (h.op == "online_p" || h.op == "online_output") {  // b: a state, m in column 1, l in column 3
    if (B == nullptr || A->rows != R || B->rows != R || B->cols < 4 ||
        (h.op == "online_p" ? h.ac + C > A->cols : A->cols != C))
      return fail("its sizes do not fit its operands");
    s.kind = h.op == "online_p" ? flat::kind::online_p : flat::kind::online_output, s.b = h.b,
    s.sizes.bs = B->cols;
    return s;
  }
  if (h.op == "interleave" || h.op == "deinterleave") {
    if (A->rows != R || A->cols != C || C % 2 != 0) return fail("its sizes do not fit its operands");
    s.kind = h.op == "interleave" ? flat::kind::interleave : flat::kind::deinterleave;
    return s;
  }
  if (h.op == "round16") {  // float32 only: a float rounded to 16 bits and read back
    if (A->rows != R || A->cols != C) return fail("its sizes do not fit its operands");
    if (m.dtype != "float32") return fail("a rounding to 16 bits is a float32 step");
    if (h.note != "bfloat16" && h.note != "float16")
      return fail("it rounds to a type the module does not know");
    s.kind = h.note == "bfloat16" ? flat::kind::round_bfloat16 : flat::kind::round_float16;
    return s;
  }
  if (h.op == "online_attention") {
    if (B == nullptr || h.n == 0 || A->rows != R || B->rows != A->cols || B->cols != C)
      return fail("its sizes do not fit its operands");
    s.kind = flat::kind::online_attention, s.b = h.b, s.sizes.bs = B->cols;
    return s;
  }
  if (h.op == "colsum") {  // C (1, cols) = the column sums of A (rows, cols): n = A's rows
    if (R != 1 || A->cols != C) return fail("its sizes do not fit its operands");
    s.kind = flat::column_sums_kind, s.sizes.n = A->rows;
    return s;
  }
  if (h.op == "cross_entropy") {  // C (rows, 1): the logits in a (rows, V), the targets in b (1, rows)
    if (B == nullptr || C != 1 || A->rows != R || A->cols == 0 || B->rows != 1 || B->cols != R)
      return fail("its sizes do not fit its operands");
    s.kind = flat::cross_entropy_kind, s.b = h.b, s.sizes.n = A->cols;
    return s;
  }
  if (h.op == "embedding_backward") {  // C (V, D): d_out in a (len, D), the ids in b (1, len)
    if (B == nullptr || A->cols != C || B->rows != 1 || B->cols != A->rows)
      return fail("its sizes do not fit its operands");
    s.kind = flat::embedding_backward_kind, s.b = h.b, s.sizes.n = A->rows;
    return s;
  }
  if (h.op == "key_padding_mask") {  // C (B, N): the lengths in a (1, B)
    if (A->rows != 1 || A->cols != R) return fail("its sizes do not fit its operands");
    s.kind = flat::key_padding_mask_kind;
    return s;
  }
  if (h.op == "embedding") {  // C (len, D): the table in a (V, D), the ids in b (1, len)
    if (B == nullptr || A->cols != C || B->rows != 1 || B->cols != R)
      return fail("its sizes do not fit its operands");
    s.kind = flat::embedding_kind, s.b = h.b, s.sizes.n = A->rows;
    return s;
  }
  if (h.op == "flash_row_max" || h.op == "flash_row_sum") {  // C (rows, 1) from the scores, blocks of n
    if (C != 1 || A->rows != R || h.n == 0 || A->cols == 0) return fail("its sizes do not fit its operands");
    s.kind = h.op == "flash_row_max" ? flat::flash_row_max_kind : flat::flash_row_sum_kind;
    return s;
  }
  if (h.op == "flash_weights" || h.op == "logsumexp_weights") {  // the scores in a, m (or L) in b, l in bias
    const bool ml = h.op == "flash_weights";
    if (B == nullptr || (ml && Bias == nullptr) || A->rows != R || A->cols != C || B->rows != R ||
        B->cols != 1 || (ml && (Bias->rows != R || Bias->cols != 1)))
      return fail("its sizes do not fit its operands");
    s.kind = ml ? flat::flash_weights_kind : flat::logsumexp_weights_kind, s.b = h.b, s.c = h.bias;
    return s;
  }
  if (h.op == "logsumexp") {  // C (rows, 1) = m + log l: m in a, l in b
    if (B == nullptr || C != 1 || A->rows != R || A->cols != 1 || B->rows != R || B->cols != 1)
      return fail("its sizes do not fit its operands");
    s.kind = flat::logsumexp_kind, s.b = h.b;
    return s;
  }
  if (h.op == "flash_over_keys" || h.op == "flash_over_queries") {  // a, b, the scores (a's shape) in bias
    const bool keys = h.op == "flash_over_keys";
    if (B == nullptr || Bias == nullptr || Bias->rows != A->rows || Bias->cols != A->cols || B->cols != C ||
        (keys ? A->rows != R || B->rows != A->cols : A->cols != R || B->rows != A->rows))
      return fail("its sizes do not fit its operands");
    s.kind = keys ? flat::flash_over_keys_kind : flat::flash_over_queries_kind, s.b = h.b, s.c = h.bias;
    s.sizes.bs = B->cols, s.sizes.n = keys ? A->cols : A->rows;
    return s;
  }
  if (h.op == "sgd") {  // C = W - lr G: W in a, G in b, lr in scale
    if (B == nullptr || A->rows != R || A->cols != C || B->rows != R || B->cols != C)
      return fail("its sizes do not fit its operands");
    s.kind = flat::sgd_kind, s.b = h.b, s.scalar = h.scale;
    return s;
  }
  if (h.op == "adamw") {  // C = W after AdamW's first step: W in a, G in b, the scalars (1, 8) in c
    if (B == nullptr || Bias == nullptr || A->rows != R || A->cols != C || B->rows != R || B->cols != C ||
        Bias->rows != 1 || Bias->cols != 8)
      return fail("its sizes do not fit its operands");
    s.kind = flat::adamw_kind, s.b = h.b, s.c = h.bias;
    return s;
  }
  if (h.op == "cast") {  // another type (flat::cast): which pairs plan_recompute checks
    if (A->rows != R || A->cols != C) return fail("its sizes do not fit its operands");
    s.kind = flat::cast_kind;
    return s;
  }
  return fail("its operation is not one of the module's steps");
}

/// the first cell where `got` and the page's numbers differ, as a sentence, or "" when none does
template <class T>
std::string first_difference(const entry& m, const std::vector<T>& got) {
  for (std::size_t k = 0; k < got.size(); ++k)
    if (!same_bits(got[k], T(m.values[k]))) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "the module's step gives %.9g at (%zu, %zu) where the example computed %.9g",
                    double(got[k]), k / m.cols + 1, k % m.cols + 1, m.values[k]);
      return std::string(buf) + " (the example computes this step another way)";
    }
  return {};
}

/// @brief a summarised page (page::summarised(): its matrices above page_limits' edge show their
/// first and last rows and columns): which matrices are on it whole (page::embedded_whole(), and
/// the scratch() ones the module computes), and what a matrix the page does not hold whole is
struct summary {
  std::map<std::string, bool> whole;  // by id
  bool on(const std::string& id) const {
    const auto it = whole.find(id);
    return it != whole.end() && it->second;
  }
  /// "W_q (768 x 768, 2359296 bytes in float32)"
  static std::string size_of(const entry& m) {
    const std::size_t per = m.dtype == "float64" ? 8 : 4;
    return m.id + " (" + std::to_string(m.rows) + " x " + std::to_string(m.cols) + ", " +
           std::to_string(m.rows * m.cols * per) + " bytes in " + m.dtype + ")";
  }
};

inline summary summary_of(const page& p) {
  summary sm;
  const auto whole = p.embedded_whole();
  for (std::size_t k = 0; k < p.entries().size(); ++k) {
    const auto& m = p.entries()[k];
    sm.whole[m.id] = whole[k] || m.scratch;
  }
  return sm;
}

/// the first operand of m's page_how that the page does not hold whole, or null
inline const entry* missing_operand(const entry& m, const std::map<std::string, const entry*>& by_id,
                                    const summary& sm) {
  for (const auto* id : {&m.how.a, &m.how.b, &m.how.bias}) {
    if (id->empty()) continue;
    const auto it = by_id.find(*id);
    if (it != by_id.end() && !sm.on(*id)) return it->second;
  }
  return nullptr;
}

/// the exact values of m from the page's texts ("n/d", rational::parse's grammar), or nothing
/// and why (a value that does not fit 64-bit integers, a cell without its text)
inline std::optional<std::vector<page_exact>> exact_values(const entry& m, std::string& why) {
  if (m.exact.size() != m.rows * m.cols) {
    why = "its cells' fractions are not all on this page";
    return std::nullopt;
  }
  std::vector<page_exact> v;
  try {
    for (const auto& t : m.exact) v.push_back(page_exact::parse(t.c_str()));
  } catch (const std::exception& e) {
    why = std::string("its fractions do not fit the module's exact numbers, rationals of 64-bit integers (") +
          e.what() + ")";
    return std::nullopt;
  }
  return v;
}

/// exact step `s` natively (flat::exact_step), its operands' values in `data`; nothing when it
/// has no exact form. An overflow of 64-bit integers throws rational.hpp's std::overflow_error
/// (the message the page's module shows for the same step)
inline std::optional<std::vector<page_exact>> run_exact(
    const page_step& s, const std::map<std::string, std::vector<page_exact>>& data) {
  auto ptr = [&](const std::string& id) -> const page_exact* {
    return id.empty() ? nullptr : data.at(id).data();
  };
  std::vector<page_exact> out(s.sizes.rows * s.sizes.cols);
  if (flat::exact_step<page_exact>(s.kind, ptr(s.a), ptr(s.b), ptr(s.c), s.sizes, out.data()) != 0)
    return std::nullopt;
  return out;
}

/// exact step `s` over the wider rationals of `wide` (a page_wide_exact), its operands' values in
/// `data`: the result's fractions, or nothing for a kind with no exact form; an overflow throws
inline std::optional<std::vector<std::string>> run_wide(
    const page_wide_exact& wide, const page_step& s,
    const std::map<std::string, std::vector<page_exact>>& data) {
  static const std::vector<page_exact> none;
  auto val = [&](const std::string& id) -> const std::vector<page_exact>& {
    return id.empty() ? none : data.at(id);
  };
  return wide(s, val(s.a), val(s.b), val(s.c));
}

/// @brief the types a cast step converts between (flat::cast, the module's qkv_cast): float32 to
/// float64 (exactly), float64 to float32 (rounded to nearest, as static_cast<float> rounds),
/// float32 or float64 to exact (the float's exact value: rational::exactly), exact to float32 or
/// float64 (the nearest float, as matrix_cast<float> converts a rational: rational::to, correctly
/// rounded)
inline bool castable(const std::string& from, const std::string& to) {
  return (from == "float32" && (to == "float64" || to == "exact")) ||
         (from == "float64" && (to == "float32" || to == "exact")) ||
         (from == "exact" && (to == "float32" || to == "float64"));
}

/// cast step `s` natively (flat::cast) from its operand's type `from` into `to`'s map: f32 to f64,
/// f64 to f32 (rounded), a float to ex, or a rational to its nearest float; false when castable() says no. A float's exact value is a rational when its
/// denominator fits 64-bit integers; NaN, infinity and a smaller value throw rational's error
inline bool run_cast(const page_step& s, const std::string& from, const std::string& to,
                     std::map<std::string, std::vector<float>>& f32,
                     std::map<std::string, std::vector<double>>& f64,
                     std::map<std::string, std::vector<page_exact>>& ex) {
  const std::size_t n = s.sizes.rows * s.sizes.cols;
  if (from == "float32" && to == "float64") {
    f64[s.id].resize(n);
    flat::cast(f32.at(s.a).data(), n, f64[s.id].data());
  } else if (from == "float64" && to == "float32") {
    f32[s.id].resize(n);
    flat::cast(f64.at(s.a).data(), n, f32[s.id].data());
  } else if (from == "float32" && to == "exact") {
    std::vector<page_exact> out(n);
    flat::cast(f32.at(s.a).data(), n, out.data());
    ex[s.id] = std::move(out);
  } else if (from == "float64" && to == "exact") {
    std::vector<page_exact> out(n);
    flat::cast(f64.at(s.a).data(), n, out.data());
    ex[s.id] = std::move(out);
  } else if (from == "exact" && to == "float32") {
    f32[s.id].resize(n);
    flat::cast(ex.at(s.a).data(), n, f32[s.id].data());
  } else if (from == "exact" && to == "float64") {
    f64[s.id].resize(n);
    flat::cast(ex.at(s.a).data(), n, f64[s.id].data());
  } else {
    return false;
  }
  return true;
}

/// the first cell where `got` and the page's fractions differ, as a sentence, or "" when none does
inline std::string first_exact_difference(const entry& m, const std::vector<page_exact>& got) {
  if (m.exact.size() != got.size()) return "its cells' fractions are not all on this page";
  for (std::size_t k = 0; k < got.size(); ++k)
    if (page_detail::exact_text(got[k]) != m.exact[k])
      return "the module's exact step gives " + page_detail::exact_text(got[k]) + " at (" +
             std::to_string(k / m.cols + 1) + ", " + std::to_string(k % m.cols + 1) +
             ") where the example has " + m.exact[k] + " (the example computes this step another way)";
  return {};
}

}  // namespace page_recompute_detail

/// @brief which matrices of `p` are inputs, steps and stale (the top of this file); each step is
/// run here natively from the page's own inputs and kept only when it gives the page's numbers
/// bit for bit
/// `wide`: the exact steps over wider rationals, for a step whose fractions overflow 64-bit
/// integers (null: such a step is stale). A wide step's result is read by no other step (the
/// module's 64-bit steps cannot read it): a step that would is stale
inline page_recompute_plan plan_recompute(const page& p, const page_wide_exact& wide = {}) {
  using namespace page_recompute_detail;
  page_recompute_plan plan;
  std::set<std::string> wide_ids;  // the wide steps' results
  // a summarised page: only the matrices it holds whole take part (summary above); a matrix
  // computed from one it does not hold is an input when every operand it does hold is one, else stale
  const bool summarised = p.summarised();
  const summary sm = summary_of(p);
  if (!p.wants_truth()) {  // only with_truth() promises that a matrix without a page_how is an input
    plan.why =
        "its example does not say which of its matrices are inputs and how each other one is computed "
        "from them (with_truth() in its page()), so the page cannot tell what an edit would reach";
    return plan;
  }
  std::map<std::string, const entry*> by_id;
  for (const auto& m : p.entries()) by_id[m.id] = &m;
  // absent: an input that a summarised page does not hold whole
  enum class status { input, step, stale, absent };
  std::map<std::string, status> st;
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<double>> f64;
  std::map<std::string, std::vector<page_exact>> ex;  // the exact matrices' values (page_exact)
  std::vector<std::string> inputs;
  for (const auto& m : p.entries()) {
    const bool is_float = m.dtype == "float32" || m.dtype == "float64";
    if (summarised && m.how.op.empty() && !m.derived && is_float && !sm.on(m.id)) {
      st[m.id] = status::absent;  // neither editable nor recomputed: it never changes
      continue;
    }
    if (summarised && !m.how.op.empty() && is_float && !m.derived && sm.on(m.id)) {
      if (const entry* gone = missing_operand(m, by_id, sm)) {
        // from what the page holds: the inputs (an input here), or a step or stale matrix (stale)
        std::string from;
        for (const auto* id : {&m.how.a, &m.how.b, &m.how.bias}) {
          const auto o = id->empty() ? st.end() : st.find(*id);
          if (o != st.end() && o->second != status::input && o->second != status::absent) from = *id;
        }
        const std::string missing = "its operand " + summary::size_of(*gone) +
                                    " is not on this page, which is summarised (it shows " + gone->id +
                                    "'s first and last rows and columns)";
        if (from.empty()) {
          st[m.id] = status::input;
          if (m.dtype == "float32")
            f32[m.id] = std::vector<float>(m.values.begin(), m.values.end());
          else
            f64[m.id] = m.values;
          inputs.push_back(m.id);
          plan.cut.emplace_back(m.id, missing + ", so " + m.id +
                                          " is not recomputed from it: the page starts from " + m.id +
                                          " as the example computed it");
        } else {
          st[m.id] = status::stale;
          plan.stale.emplace_back(
              m.id, missing + ": the module cannot recompute " + m.id + " from " + from + " without it");
        }
        continue;
      }
    }
    if (summarised && !sm.on(m.id)) {
      st[m.id] = status::stale;
      if (!(m.how.op.empty() && !m.derived && is_float))
        plan.stale.emplace_back(m.id,
                                "only its shown rows and columns are on this page, which is summarised");
      continue;
    }
    std::string why;
    if (m.how.op.empty() && !m.derived && m.dtype == "exact") {  // an exact input, when it fits
      if (auto v = exact_values(m, why)) {
        st[m.id] = status::input;
        ex[m.id] = std::move(*v);
        inputs.push_back(m.id);
      } else {
        st[m.id] = status::stale;
        plan.stale.emplace_back(m.id, why);
      }
      continue;
    }
    if (m.how.op.empty() && !m.derived && is_float) {
      st[m.id] = status::input;
      if (m.dtype == "float32")
        f32[m.id] = std::vector<float>(m.values.begin(), m.values.end());  // exact: the page's floats
      else
        f64[m.id] = m.values;
      inputs.push_back(m.id);
      continue;
    }
    st[m.id] = status::stale;
    if (!is_float && m.dtype != "exact") {
      why =
          "its numbers are " + m.dtype + ", and the module computes in float32, float64 and exact rationals";
    } else if (m.how.op.empty()) {
      why = m.derived_why.empty() ? "the example computes it another way than a step this page describes"
                                  : m.derived_why;
    } else if (auto s = step_of(m, by_id, why)) {
      for (const auto* id : {&s->a, &s->b, &s->c}) {
        if (id->empty()) continue;
        const auto o = st.find(*id);
        if (o == st.end() || o->second == status::stale) {
          why = "it is computed from " + *id + ", which is not recomputed";
          break;
        }
        if (wide_ids.count(*id)) {
          why = "it is computed from " + *id +
                ", whose fractions need 128-bit integers: the module's 128-bit steps end there";
          break;
        }
        const std::string& from = by_id.at(*id)->dtype;
        if (s->kind == flat::cast_kind && !castable(from, m.dtype)) {
          why = "the module does not convert a " + from + " matrix to " + m.dtype;
          break;
        }
        if (s->kind != flat::cast_kind && from != m.dtype) {
          why = "it is computed from " + *id + ", a " + from + " matrix";
          break;
        }
      }
      if (why.empty()) {
        if (s->kind == flat::cast_kind) {  // another type: the float's value as double or as a rational
          try {
            run_cast(*s, by_id.at(s->a)->dtype, m.dtype, f32, f64, ex);
            why = m.dtype == "exact"     ? first_exact_difference(m, ex.at(m.id))
                  : m.dtype == "float32" ? first_difference(m, f32.at(m.id))
                                         : first_difference(m, f64.at(m.id));
          } catch (const std::exception& e) {
            why = std::string("the module's cast fails on the example's own numbers: ") + e.what();
          }
          if (!why.empty()) {
            ex.erase(m.id);
            f32.erase(m.id);
            f64.erase(m.id);
          } else if (m.dtype == "exact") {
            plan.exact = true;
          }
        } else if (m.dtype == "exact") {
          std::optional<std::vector<page_exact>> got;
          try {
            got = run_exact(*s, ex);
            why = got ? first_exact_difference(m, *got)
                      : "its operation is not exact arithmetic (the module computes exact rationals by sums "
                        "and "
                        "products only)";
          } catch (const std::exception& e) {
            why = std::string("the module's exact step fails on the example's own numbers: ") + e.what();
            if (wide) {  // the fractions overflow 64-bit integers: the same step over 128-bit ones
              try {
                const auto texts = run_wide(wide, *s, ex);
                if (texts && *texts == m.exact) {
                  why.clear();
                  s->wide = true;
                  plan.wide = true;
                  wide_ids.insert(m.id);
                } else if (texts) {
                  why = "the module's 128-bit exact step does not give the example's fractions";
                }
              } catch (const std::exception& e2) {
                why = std::string(
                          "the module's exact step fails on the example's own numbers, in 64-bit and "
                          "in 128-bit integers: ") +
                      e2.what();
              }
            }
          }
          if (why.empty() && !wide_ids.count(m.id)) ex[m.id] = std::move(*got);
          if (why.empty()) plan.exact = true;
        } else if (m.dtype == "float32") {
          auto got = run<float>(*s, f32);
          why = first_difference(m, got);
          if (why.empty()) f32[m.id] = std::move(got);
        } else {
          auto got = run<double>(*s, f64);
          why = first_difference(m, got);
          if (why.empty()) f64[m.id] = std::move(got);
        }
      }
      if (why.empty()) {
        st[m.id] = status::step;
        s->dtype = m.dtype;
        plan.steps.push_back(std::move(*s));
        continue;
      }
    }
    plan.stale.emplace_back(m.id, why);
  }
  // a page whose steps mix float32, float64 and exact ones (03b, 15): each is one call of its own
  // type's entry of the module, in the page's order (page_script's exact editor, which holds both)
  // editable: the shown inputs some step reads
  for (const auto& id : inputs) {
    bool read = false;
    for (const auto& s : plan.steps) read = read || s.a == id || s.b == id || s.c == id;
    if (read && !by_id.at(id)->hidden) plan.inputs.push_back(id);
  }
  if (plan.steps.empty() || plan.inputs.empty())
    plan.why = "no step of this page is one the module computes from an input the page shows";
  return plan;
}

/// @brief the page's "edit" object for `plan` (io/page.hpp's edit()): the module (base64) and its
/// size, the inputs, the steps and the stale matrices with why; or {"why": ...} when nothing is
/// editable (`why_not`: the module was not built, and why). `truth_base64`: the truth module
/// (wasm/qkv_truth.cpp), for a page whose 50-digit truth the editor recomputes, or empty
inline std::string recompute_spec(const page_recompute_plan& plan, std::string_view module_base64,
                                  std::size_t module_bytes, std::string_view why_not = {},
                                  std::string_view truth_base64 = {}, std::size_t truth_bytes = 0,
                                  std::string_view wide_base64 = {}, std::size_t wide_bytes = 0) {
  namespace pd = page_detail;
  std::string s = "{\"why\":";
  if (!why_not.empty() || !plan.why.empty()) {
    pd::json_string(s,
                    "This page is not editable: " + std::string(why_not.empty() ? plan.why : why_not) + ".");
    return s + ",\"arithmetic\":\"core\"}";
  }
  s += "\"\",\"arithmetic\":\"core\",\"kind\":\"steps\",\"module\":\"";
  s += module_base64;
  s += "\",\"module_bytes\":" + std::to_string(module_bytes);
  if (plan.exact) s += ",\"exact\":\"q64\"";  // exact steps: qkv_step_q64, rational<long long>
  if (plan.wide && !wide_base64.empty()) {    // 128-bit exact steps: the wide module's qkv_step_q128
    s += ",\"wide_module\":\"";
    s += wide_base64;
    s += "\",\"wide_module_bytes\":" + std::to_string(wide_bytes);
  }
  if (!truth_base64.empty() && !plan.exact) {  // the float steps' 50-digit truth (edit_steps_js's stepTruths)
    s += ",\"truth_module\":\"";
    s += truth_base64;
    s += "\",\"truth_module_bytes\":" + std::to_string(truth_bytes);
  }
  s += ",\"inputs\":[";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (k) s += ",";
    pd::json_string(s, plan.inputs[k]);
  }
  s += "],\"steps\":[";
  for (std::size_t k = 0; k < plan.steps.size(); ++k) {
    const auto& t = plan.steps[k];
    const auto& z = t.sizes;
    if (k) s += ",";
    s += "{\"id\":";
    pd::json_string(s, t.id);
    s += ",\"kind\":" + std::to_string(static_cast<int>(t.kind)) + ",\"a\":";
    pd::json_string(s, t.a);
    s += ",\"b\":";
    pd::json_string(s, t.b);
    s += ",\"c\":";
    pd::json_string(s, t.c);
    s += ",\"sizes\":[";
    bool first = true;
    for (std::size_t v : {z.rows, z.cols, z.as, z.bs, z.n, z.ac, z.br, z.bc}) {
      s += (first ? "" : ",") + std::to_string(v);
      first = false;
    }
    s += "]";
    s += ",\"scalar\":";
    pd::json_number(s, t.scalar, false);
    s += ",\"masked\":\"" + t.masked + "\"";
    if (t.wide) s += ",\"wide\":1";
    if (t.kind == flat::cast_kind) {  // another type than its operand's (the module's qkv_cast)
      s += ",\"dtype\":";
      pd::json_string(s, t.dtype);
    }
    s += "}";
  }
  if (!plan.cut.empty()) {  // a summarised page's inputs that a full page would compute, with why
    s += "],\"cut\":[";
    for (std::size_t k = 0; k < plan.cut.size(); ++k) {
      s += k ? ",{\"id\":" : "{\"id\":";
      pd::json_string(s, plan.cut[k].first);
      s += ",\"why\":";
      pd::json_string(s, plan.cut[k].second);
      s += "}";
    }
  }
  s += "],\"stale\":[";
  for (std::size_t k = 0; k < plan.stale.size(); ++k) {
    if (k) s += ",";
    s += "{\"id\":";
    pd::json_string(s, plan.stale[k].first);
    s += ",\"why\":";
    pd::json_string(s, plan.stale[k].second);
    s += "}";
  }
  return s + "]}";
}

}  // namespace qkv::io
