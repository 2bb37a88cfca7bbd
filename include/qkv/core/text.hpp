// text.hpp: tutorial 001's word dictionary (sorted unique words -> ids), in constexpr.
//
// The tutorial (Raschka, "self-attention from scratch") builds its vocabulary with
//   dc = {s: i for i, s in enumerate(sorted(sentence.replace(',', '').split()))}
//   sentence_int = torch.tensor([dc[s] for s in sentence.replace(',', '').split()])
// i.e. drop the commas, split on whitespace, sort the words (Python compares code points, which
// for UTF-8 text is the order of the bytes as unsigned values: 'Life' < 'dessert' because 'L' <
// 'd'), number them from 0. The tutorial's sentence has no repeated word. With repeats, the
// comprehension numbers the sorted list WITH its duplicates and a later entry overwrites an
// earlier one, so a repeated word gets the index of its last copy and the ids have gaps
// ("b a b" -> {'a': 0, 'b': 2}). id() numbers the distinct words densely ({'a': 0, 'b': 1});
// tutorial_id() gives the comprehension's number.
//
// std::string is not constexpr with clang + libstdc++ 12, so the dictionary keeps its own fixed
// character buffer (Capacity characters: the sentence's length is enough) and hands out
// std::string_views into it.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string_view>

#include "fail.hpp"

namespace qkv::text {

/// Python's str.split() whitespace for ASCII: space, \t \n \v \f \r and the separators \x1c..\x1f
[[nodiscard]] constexpr bool is_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

/// @brief The tutorial's dictionary of a sentence: its distinct words (commas dropped), sorted,
/// numbered from 0. Capacity bounds the sentence's length in characters.
///
///   constexpr qkv::text::dictionary dc{"Life is short, eat dessert first"};
///   static_assert(dc.id("Life") == 0 && dc.word(1) == "dessert");
///   constexpr auto ids = dc.ids<6>();  // {0, 4, 5, 2, 1, 3}
template <std::size_t Capacity>
class dictionary {
 public:
  /// the most words a sentence of Capacity characters can hold ("a b c": (Capacity + 1) / 2)
  static constexpr std::size_t max_words = (Capacity + 1) / 2 + 1;

  /// drop the commas, split on whitespace, sort and deduplicate; throws std::length_error if the
  /// sentence is longer than Capacity
  constexpr explicit dictionary(std::string_view sentence) {
    if (sentence.size() > Capacity)
      ::qkv::detail::fail<std::length_error>("sentence longer than the dictionary's capacity");
    // pass 1: the sentence without commas, and its words in order
    for (char c : sentence)
      if (c != ',') chars_[length_++] = c;
    std::size_t i = 0;
    while (i < length_) {
      while (i < length_ && is_space(chars_[i])) ++i;
      if (i == length_) break;
      const std::size_t begin = i;
      while (i < length_ && !is_space(chars_[i])) ++i;
      tokens_[token_count_++] = {begin, i - begin};
    }
    // pass 2: the distinct words, sorted (insertion sort: sentences are short, and it is constexpr)
    for (std::size_t t = 0; t < token_count_; ++t) {
      const std::string_view w = view(tokens_[t]);
      std::size_t k = 0;
      while (k < word_count_ && view(words_[k]) < w) ++k;
      if (k < word_count_ && view(words_[k]) == w) continue;  // already there
      for (std::size_t m = word_count_; m > k; --m) words_[m] = words_[m - 1];
      words_[k] = tokens_[t];
      ++word_count_;
    }
  }

  /// the number of distinct words
  [[nodiscard]] constexpr std::size_t size() const { return word_count_; }

  /// the word with this id (ids count from 0 in sorted order); throws std::out_of_range
  [[nodiscard]] constexpr std::string_view word(std::size_t id) const {
    if (id >= word_count_) ::qkv::detail::fail<std::out_of_range>("no word with this id");
    return view(words_[id]);
  }

  /// whether the word is in the dictionary
  [[nodiscard]] constexpr bool contains(std::string_view w) const { return find(w) < word_count_; }

  /// the id of a word: dc[s] in the tutorial; throws std::out_of_range for an unknown word
  /// (Python raises KeyError)
  [[nodiscard]] constexpr std::size_t id(std::string_view w) const {
    const std::size_t k = find(w);
    if (k == word_count_) ::qkv::detail::fail<std::out_of_range>("word not in the dictionary");
    return k;
  }

  /// the number the tutorial's dict comprehension gives the word: its last position in the sorted
  /// list of all the sentence's words, repeats included (equal to id() when no word repeats)
  [[nodiscard]] constexpr std::size_t tutorial_id(std::string_view w) const {
    (void)id(w);                // throws for an unknown word
    std::size_t not_after = 0;  // words of the sentence that sort before w or equal it
    for (std::size_t t = 0; t < token_count_; ++t)
      if (!(w < view(tokens_[t]))) ++not_after;
    return not_after - 1;
  }

  /// the number of words of the sentence (with repeats)
  [[nodiscard]] constexpr std::size_t token_count() const { return token_count_; }

  /// word t of the sentence, in sentence order
  [[nodiscard]] constexpr std::string_view token(std::size_t t) const {
    if (t >= token_count_) ::qkv::detail::fail<std::out_of_range>("the sentence has fewer words");
    return view(tokens_[t]);
  }

  /// the sentence as ids: sentence_int. Tokens must equal token_count() (a mismatch throws, and
  /// in a constant expression does not compile)
  template <std::size_t Tokens>
  [[nodiscard]] constexpr std::array<std::size_t, Tokens> ids() const {
    if (Tokens != token_count_)
      ::qkv::detail::fail<std::length_error>("ids<N>: N must be the sentence's word count");
    std::array<std::size_t, Tokens> out{};
    for (std::size_t t = 0; t < Tokens; ++t) out[t] = id(view(tokens_[t]));
    return out;
  }

  /// another text as ids of this dictionary, split the same way (commas dropped); Tokens must be
  /// its word count; an unknown word throws
  template <std::size_t Tokens>
  [[nodiscard]] constexpr std::array<std::size_t, Tokens> encode(std::string_view text) const {
    std::array<std::size_t, Tokens> out{};
    std::size_t n = 0, i = 0;
    char word[Capacity + 1]{};
    while (i < text.size()) {
      while (i < text.size() && is_space(text[i])) ++i;
      if (i == text.size()) break;
      std::size_t len = 0;
      for (; i < text.size() && !is_space(text[i]); ++i)
        if (text[i] != ',') {
          if (len == Capacity) ::qkv::detail::fail<std::out_of_range>("word not in the dictionary");
          word[len++] = text[i];
        }
      if (len == 0) continue;  // a lone comma is no word
      if (n == Tokens) ::qkv::detail::fail<std::length_error>("encode<N>: the text has more than N words");
      out[n++] = id(std::string_view(word, len));
    }
    if (n != Tokens) ::qkv::detail::fail<std::length_error>("encode<N>: the text has fewer than N words");
    return out;
  }

 private:
  struct piece {
    std::size_t begin = 0, size = 0;
  };

  [[nodiscard]] constexpr std::string_view view(piece p) const { return {chars_ + p.begin, p.size}; }

  [[nodiscard]] constexpr std::size_t find(std::string_view w) const {
    // binary search over the sorted words
    std::size_t lo = 0, hi = word_count_;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      const std::string_view m = view(words_[mid]);
      if (m == w) return mid;
      if (m < w)
        lo = mid + 1;
      else
        hi = mid;
    }
    return word_count_;
  }

  char chars_[Capacity + 1]{};  // the sentence without commas
  std::size_t length_ = 0;
  piece tokens_[max_words]{};  // the sentence's words, in order
  std::size_t token_count_ = 0;
  piece words_[max_words]{};  // the distinct words, sorted
  std::size_t word_count_ = 0;
};

/// a string literal's dictionary has room for the literal: dictionary dc{"..."}
template <std::size_t N>
dictionary(const char (&)[N]) -> dictionary<N>;

}  // namespace qkv::text
