// page_wide.hpp: the exact steps of a page over 128-bit rationals (qkv::exact::q128, Boost's
// int128_t), for a step whose fractions overflow the module's rationals of 64-bit integers
// (example 03b's scores w_T_2: denominators near 2^104). Needs Boost; the tool passes it to
// plan_recompute when it has Boost and the wide module (wasm/qkv_wide.cpp, which computes the same
// step in the page: core/flat_steps.hpp's exact_step over q128).
//
//   const auto plan = qkv::io::plan_recompute(p, qkv::io::wide_exact_q128);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <qkv/exact/fixed_width.hpp>

#include "page_recompute.hpp"

namespace qkv::io {

/// step `s` over q128 from its operands' page_exact values: the result's fractions as the page
/// writes them, or nothing for a kind with no exact form; throws rational.hpp's overflow_error
/// when 128 bits do not hold a sum or product either (a page_wide_exact)
inline std::optional<std::vector<std::string>> wide_exact_q128(const page_step& s,
                                                               const std::vector<page_exact>& a,
                                                               const std::vector<page_exact>& b,
                                                               const std::vector<page_exact>& c) {
  using q128 = qkv::exact::q128;
  auto widen = [](const std::vector<page_exact>& v) {
    std::vector<q128> w;
    for (const auto& x : v) w.emplace_back(q128(x.numerator(), x.denominator()));
    return w;
  };
  const auto wa = widen(a), wb = widen(b), wc = widen(c);
  auto ptr = [](const std::vector<q128>& v) { return v.empty() ? nullptr : v.data(); };
  std::vector<q128> out(s.sizes.rows * s.sizes.cols);
  if (flat::exact_step<q128>(s.kind, ptr(wa), ptr(wb), ptr(wc), s.sizes, out.data()) != 0)
    return std::nullopt;
  std::vector<std::string> texts;
  for (const auto& x : out) texts.push_back(page_detail::exact_text(x));
  return texts;
}

}  // namespace qkv::io
