// unicode_hf.hpp: the per-code-point behaviour of Hugging Face's fast (Rust) BERT normalizer and
// pre-tokenizer, looked up in tables derived from the library itself (unicode_hf_tables.hpp,
// scripts/fixtures/unicode_hf_tables.py).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "generated/unicode_hf_tables.hpp"

namespace qkv::io::unicode_hf {

/// what the fast normalizer and pre-tokenizer do with a code point
enum class hf_class : std::uint8_t {
  drop,        ///< removed (controls, Cf, Co, and the non-spacing marks of its tables): nothing
  drop_break,  ///< removed like drop, but a starter (class 0) for canonical ordering
  space,       ///< whitespace: becomes ' ', separates words
  cjk,         ///< a CJK ideograph of the library's ranges: a word of its own
  punct,       ///< punctuation for BertPreTokenizer: a word of its own
  word,        ///< kept as it is, part of a word
  mapped,      ///< replaced by 1 to 3 code points (maps_of)
  hangul,      ///< a Hangul syllable: its jamo (NFD by arithmetic)
};

namespace detail {
[[nodiscard]] constexpr hf_class lookup(char32_t c) noexcept {
  const auto key = (static_cast<std::uint32_t>(c) << 3) | 7u;
  const auto* first = std::begin(unicode_hf_data::class_starts);
  const auto* it = std::upper_bound(first, std::end(unicode_hf_data::class_starts), key);
  return static_cast<hf_class>(*(it - 1) & 7u);  // class_starts[0] is code point 0
}
inline constexpr std::array<hf_class, 128> ascii = [] {
  std::array<hf_class, 128> a{};
  for (char32_t c = 0; c < 128; ++c) a[c] = lookup(c);
  return a;
}();
}  // namespace detail

[[nodiscard]] inline hf_class classify(char32_t c) noexcept {
  return c < 128 ? detail::ascii[c] : detail::lookup(c);
}

/// the output of a `mapped` code point: up to 3 code points, 0 past the end
[[nodiscard]] inline const std::uint32_t* maps_of(char32_t c) noexcept {
  constexpr std::size_t n = std::size(unicode_hf_data::maps) / 4;
  const auto* t = unicode_hf_data::maps;
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (t[4 * mid] < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (lo < n && t[4 * lo] == c) ? t + 4 * lo + 1 : nullptr;
}

/// the canonical combining class that the library's NFD orders a surviving character by
[[nodiscard]] inline unsigned combining_class(char32_t c) noexcept {
  constexpr std::size_t n = std::size(unicode_hf_data::combining_classes) / 2;
  const auto* t = unicode_hf_data::combining_classes;
  if (c < t[0]) return 0;
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (t[2 * mid] < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (lo < n && t[2 * lo] == c) ? t[2 * lo + 1] : 0u;
}

}  // namespace qkv::io::unicode_hf
