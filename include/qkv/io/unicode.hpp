// unicode.hpp: the Unicode steps of BERT's tokenizer: strict UTF-8, classes, lower case, NFD.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>

#include "generated/unicode_tables.hpp"

namespace qkv::io::unicode {

/// text that is not valid UTF-8 (the message gives the byte offset and what is wrong)
struct invalid_utf8 : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// a code point's class for BERT's basic tokenizer (scripts/fixtures/unicode_tables.py defines them)
enum class char_class : std::uint8_t { control, whitespace, punctuation, mark, other };

[[nodiscard]] inline char_class classify(char32_t c) noexcept {
  const auto key = (static_cast<std::uint32_t>(c) << 3) | 7u;
  const auto* first = std::begin(unicode_data::class_starts);
  const auto* it = std::upper_bound(first, std::end(unicode_data::class_starts), key);
  // class_starts[0] is code point 0, so `it` is never `first`
  return static_cast<char_class>(*(it - 1) & 7u);
}

/// BERT's "Chinese character": the CJK Unified Ideographs blocks and their compatibility blocks
/// (the ranges of BasicTokenizer._is_chinese_char). Hiragana, Katakana and Hangul are not in it.
[[nodiscard]] constexpr bool is_cjk(char32_t c) noexcept {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// appends Python's `chr(c).lower()`: one code point, except U+0130 (capital I with dot above),
/// which becomes "i" + U+0307. The final-sigma rule of str.lower() needs context and is not
/// applied: the Hugging Face tokenizers lower the text one character at a time, so Σ -> σ.
inline void append_lower(char32_t c, std::u32string& out) {
  if (c == 0x130) {
    out += U'i';
    out += char32_t{0x307};
    return;
  }
  constexpr std::size_t n = std::size(unicode_data::lower_runs) / 4;
  const auto* runs = unicode_data::lower_runs;
  // last run whose first code point is <= c
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (static_cast<char32_t>(runs[4 * mid]) <= c)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo > 0) {
    const auto* r = runs + 4 * (lo - 1);
    const auto offset = static_cast<std::uint32_t>(c) - static_cast<std::uint32_t>(r[0]);
    const auto stride = static_cast<std::uint32_t>(r[2]);
    if (offset % stride == 0 && offset / stride < static_cast<std::uint32_t>(r[1])) {
      out += static_cast<char32_t>(static_cast<std::int64_t>(c) + r[3]);
      return;
    }
  }
  out += c;
}

/// canonical combining class (0 for starters)
[[nodiscard]] inline unsigned combining_class(char32_t c) noexcept {
  constexpr std::size_t n = std::size(unicode_data::combining_classes) / 3;
  const auto* t = unicode_data::combining_classes;
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (t[3 * mid + 1] < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (lo < n && t[3 * lo] <= c) ? t[3 * lo + 2] : 0u;
}

/// appends the full canonical decomposition of c (not yet in canonical order)
inline void append_decomposition(char32_t c, std::u32string& out) {
  // Hangul syllables decompose by arithmetic (Unicode 3.12): L V, or L V T
  constexpr char32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
  constexpr char32_t t_count = 28, n_count = 21 * 28, s_count = 19 * 21 * 28;
  if (c >= s_base && c < s_base + s_count) {
    const char32_t s = c - s_base;
    out += l_base + s / n_count;
    out += v_base + (s % n_count) / t_count;
    if (s % t_count != 0) out += t_base + s % t_count;
    return;
  }
  constexpr std::size_t n = std::size(unicode_data::decompositions) / 3;
  const auto* t = unicode_data::decompositions;
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (t[3 * mid] < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < n && t[3 * lo] == c) {
    // one level per entry; the parts decompose further (depth is at most 4 in Unicode 14)
    append_decomposition(static_cast<char32_t>(t[3 * lo + 1]), out);
    if (t[3 * lo + 2] != 0) append_decomposition(static_cast<char32_t>(t[3 * lo + 2]), out);
    return;
  }
  out += c;
}

/// Unicode NFD of a whole string: full canonical decomposition, then the canonical ordering of
/// every run of non-starters by combining class (stable, so equal classes keep their order)
[[nodiscard]] inline std::u32string nfd(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) append_decomposition(c, out);
  for (std::size_t i = 0; i < out.size();) {
    if (combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < out.size() && combining_class(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i),
                     out.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  return out;
}

/// strict UTF-8 decoding as Python's bytes.decode("utf-8"): no overlong forms, no surrogates,
/// nothing above U+10FFFF, no stray or missing continuation bytes. `what` names the text in
/// the error ("the text", "vocab.txt line 7").
[[nodiscard]] inline std::u32string decode_utf8(std::string_view s, std::string_view what = "the text") {
  std::u32string out;
  out.reserve(s.size());
  auto fail = [&](std::size_t at, const char* why) {
    throw invalid_utf8(std::string(what) + " is not valid UTF-8: " + why + " at byte " + std::to_string(at));
  };
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char b = byte(i);
    if (b < 0x80) {
      out += static_cast<char32_t>(b);
      ++i;
      continue;
    }
    std::size_t len = 0;
    char32_t c = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2, c = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3, c = b & 0x0Fu;
      if (b == 0xE0) lo = 0xA0;  // overlong below U+0800
      if (b == 0xED) hi = 0x9F;  // surrogates U+D800..U+DFFF
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4, c = b & 0x07u;
      if (b == 0xF0) lo = 0x90;  // overlong below U+10000
      if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else if (b >= 0x80 && b <= 0xBF) {
      fail(i, "a continuation byte with no lead byte");
    } else {
      fail(i, "a byte that never occurs in UTF-8");
    }
    if (i + len > s.size()) fail(i, "a sequence cut short by the end of the text");
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned char cb = byte(i + k);
      const unsigned char l = (k == 1) ? lo : 0x80, h = (k == 1) ? hi : 0xBF;
      if (cb < l || cb > h) {
        fail(i, (k == 1 && (cb >= 0x80 && cb <= 0xBF))
                    ? "an overlong form, a surrogate or a code point above U+10FFFF"
                    : "a sequence cut short by a byte that is not a continuation byte");
      }
      c = (c << 6) | (cb & 0x3Fu);
    }
    out += c;
    i += len;
  }
  return out;
}

/// appends the UTF-8 form of a valid code point
inline void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

[[nodiscard]] inline std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(c, out);
  return out;
}

}  // namespace qkv::io::unicode
