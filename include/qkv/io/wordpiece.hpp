// wordpiece.hpp: BERT's uncased WordPiece tokenizer and its vocab.txt reader, in two flavors.
//
// tokenizer_flavor::fast (the default) is what AutoTokenizer.from_pretrained('bert-base-uncased')
// runs: Hugging Face's Rust `tokenizers` library (BertNormalizer, BertPreTokenizer, WordPiece),
// for every code point as the library itself answers (unicode_hf.hpp, whose tables
// scripts/fixtures/unicode_hf_tables.py derives by asking the library about each code point).
// tokenizer_flavor::slow is the Python BertTokenizer(do_lower_case=True) with Python 3.11's
// Unicode 14 (unicode.hpp). Both do:
//   0. the special tokens [CLS] [SEP] [UNK] [PAD] [MASK], written as such in the text, are kept
//      whole (case-sensitive); the text between them goes through steps 1 to 5;
//   1. clean: drop NUL, U+FFFD and control characters; whitespace becomes a space;
//   2. put every CJK ideograph in a word of its own;
//   3. lower-case and strip accents (NFD, then drop the non-spacing marks);
//   4. split on whitespace, and on punctuation (each mark is a word);
//   5. WordPiece: greedy longest match first from the start of each word, continuations
//      prefixed "##"; [UNK] for a word with no match at some point, or longer than 100 code
//      points (max_input_chars_per_word).
// Where they differ (docs/tokenizer.md): which code points are controls (fast: only what its
// own old tables call Cc, Cf, Co and Mn; an unassigned code point is kept, and its word becomes
// [UNK]; slow: every C* including unassigned, dropped), which are punctuation and whitespace,
// the CJK ranges (fast: U+2B920..U+2CEAF where slow has U+2B820..U+2CEAF), and the Unicode
// version of the lower case and the decompositions.
// encode() puts [CLS] before and [SEP] after and gives each token's offsets in the original
// text (code points, as Python and the Hugging Face offsets count; and bytes).
//
// Input must be valid UTF-8 (unicode::invalid_utf8 otherwise).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "unicode.hpp"
#include "unicode_hf.hpp"

namespace qkv::io {

/// a vocabulary that cannot be used (empty, a duplicate token, a missing special token, ...);
/// the message names the source (file) and the line
struct vocab_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// a BERT vocab.txt: one token per line, the line number counted from 0 is the id
class wordpiece_vocab {
 public:
  /// reads a vocab.txt; throws vocab_error naming the file when it cannot be read or used
  [[nodiscard]] static wordpiece_vocab from_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw vocab_error("cannot open the vocabulary file '" + path + "'");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw vocab_error("cannot read the vocabulary file '" + path + "'");
    return from_string(buffer.str(), "vocabulary file '" + path + "'");
  }

  /// parses the contents of a vocab.txt. Lines end with \n or \r\n; the last line may lack
  /// its end. Every line must be a non-empty, unique token in valid UTF-8, and [UNK], [CLS]
  /// and [SEP] must be there. `source` names the text in errors.
  [[nodiscard]] static wordpiece_vocab from_string(std::string_view text,
                                                   std::string_view source = "vocabulary") {
    wordpiece_vocab v;
    const std::string src(source);
    std::size_t line_no = 0;
    for (std::size_t pos = 0; pos < text.size(); ++line_no) {
      std::size_t end = text.find('\n', pos);
      const std::size_t next = end == std::string_view::npos ? text.size() : end + 1;
      if (end == std::string_view::npos) end = text.size();
      std::string_view token = text.substr(pos, end - pos);
      if (!token.empty() && token.back() == '\r') token.remove_suffix(1);
      pos = next;
      const std::string where = src + " line " + std::to_string(line_no + 1);
      if (token.empty()) throw vocab_error(where + " is empty (one token per line, no blank lines)");
      (void)unicode::decode_utf8(token, where);  // throws unicode::invalid_utf8
      const auto id = static_cast<std::int64_t>(v.tokens_.size());
      auto [it, inserted] = v.ids_.try_emplace(std::string(token), id);
      if (!inserted) {
        throw vocab_error(where + ": duplicate token \"" + std::string(token) + "\" (first on line " +
                          std::to_string(it->second + 1) + ")");
      }
      v.tokens_.emplace_back(token);
      v.max_token_bytes_ = std::max(v.max_token_bytes_, token.size());
    }
    if (v.tokens_.empty()) throw vocab_error(src + " is empty: it has no tokens");
    for (const char* special : {"[UNK]", "[CLS]", "[SEP]"}) {
      if (!v.find(special)) throw vocab_error(src + " lacks the special token " + special);
    }
    return v;
  }

  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }

  /// the longest token, in bytes (no longer piece can match: WordPiece starts its search there)
  [[nodiscard]] std::size_t max_token_bytes() const noexcept { return max_token_bytes_; }

  /// the id of a token, if it is in the vocabulary
  [[nodiscard]] std::optional<std::int64_t> find(std::string_view token) const {
    const auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

  /// the id of a token that must be there
  [[nodiscard]] std::int64_t id(std::string_view token) const {
    if (auto i = find(token)) return *i;
    throw std::out_of_range("token \"" + std::string(token) + "\" is not in the vocabulary");
  }

  /// the token with this id
  [[nodiscard]] const std::string& token(std::int64_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) {
      throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                              std::to_string(tokens_.size() - 1) + ")");
    }
    return tokens_[static_cast<std::size_t>(id)];
  }

 private:
  // heterogeneous lookup: find() with a string_view allocates nothing
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::size_t max_token_bytes_ = 0;
  std::unordered_map<std::string, std::int64_t, string_hash, std::equal_to<>> ids_;
};

/// which Hugging Face BERT tokenizer to reproduce (see the top of this file)
enum class tokenizer_flavor : std::uint8_t {
  fast,  ///< the Rust `tokenizers` library: AutoTokenizer / BertTokenizerFast (the default)
  slow,  ///< the Python BertTokenizer, with Unicode 14
};

/// [begin, end) of a token in the original text
using token_offsets = std::pair<std::size_t, std::size_t>;

/// tokens, their ids, and where each came from in the original text
struct wordpiece_encoding {
  std::vector<std::string> tokens;
  std::vector<std::int64_t> ids;
  /// in code points of the text (what Python's str indexes and return_offsets_mapping gives);
  /// a token made from part of one code point (the jamo of a Hangul syllable) has that code
  /// point's offsets; [CLS] and [SEP] added by encode() have {0, 0}
  std::vector<token_offsets> offsets;
  /// the same in bytes of the UTF-8 text
  std::vector<token_offsets> byte_offsets;
};

/// BERT's uncased tokenizer over a vocabulary (see the top of this file for the steps)
class wordpiece_tokenizer {
 public:
  /// words longer than this many code points become [UNK] (the default of both libraries)
  static constexpr std::size_t max_input_chars_per_word = 100;

  explicit wordpiece_tokenizer(wordpiece_vocab vocab, tokenizer_flavor flavor = tokenizer_flavor::fast)
      : vocab_(std::move(vocab)), flavor_(flavor) {
    for (const char* s : {"[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"})
      if (vocab_.find(s)) specials_.emplace_back(s);
    unk_id_ = vocab_.id("[UNK]");
  }

  [[nodiscard]] const wordpiece_vocab& vocab() const noexcept { return vocab_; }
  [[nodiscard]] tokenizer_flavor flavor() const noexcept { return flavor_; }

  /// steps 0 to 4: the words (special tokens, and UTF-8 words after cleaning, lower-casing,
  /// accent stripping and punctuation splitting) that WordPiece then cuts into pieces
  [[nodiscard]] std::vector<std::string> basic_tokenize(std::string_view text) const {
    std::vector<std::string> words;
    scratch sc;
    for_each_word(
        text, sc,
        [&](std::size_t a, std::size_t b) {
          words.push_back(unicode::to_utf8(std::u32string_view(sc.norm).substr(a, b - a)));
        },
        [&](std::string_view special, std::size_t) { words.emplace_back(special); });
    return words;
  }

  /// the word pieces of a text, without [CLS] and [SEP]
  [[nodiscard]] std::vector<std::string> tokenize(std::string_view text) const {
    return std::move(encode_pieces(text).tokens);
  }

  /// the word pieces of a text with their ids and offsets, without [CLS] and [SEP]; with a
  /// limit, it stops after the word (or special token) whose pieces reach `limit` tokens, as the
  /// Rust library's early exit does when truncation is on (tokenize_with_limit)
  [[nodiscard]] wordpiece_encoding encode_pieces(std::string_view text,
                                                 std::size_t limit = static_cast<std::size_t>(-1)) const {
    wordpiece_encoding e;
    append_pieces(text, e, limit);
    return e;
  }

  /// [CLS], the word pieces of a text, [SEP]; with their ids and offsets
  [[nodiscard]] wordpiece_encoding encode(std::string_view text) const {
    wordpiece_encoding e;
    push_special(e, "[CLS]", {0, 0}, {0, 0});
    append_pieces(text, e);
    push_special(e, "[SEP]", {0, 0}, {0, 0});
    return e;
  }

  /// appends the word pieces of a text (ids, tokens, offsets) to e; `limit` as encode_pieces
  void append_pieces(std::string_view text, wordpiece_encoding& e,
                     std::size_t limit = static_cast<std::size_t>(-1)) const {
    scratch sc;
    const std::size_t base = e.ids.size();
    for_each_word(
        text, sc,
        [&](std::size_t a, std::size_t b) {
          wordpiece(sc, a, b, e);
          sc.stop = e.ids.size() - base >= limit;
        },
        [&](std::string_view special, std::size_t at) {
          const auto len = special.size();  // ASCII: code points = bytes
          push_special(e, special, {at, at + len}, {sc.byte_at[at], sc.byte_at[at] + len});
          sc.stop = e.ids.size() - base >= limit;
        });
  }

 private:
  wordpiece_vocab vocab_;
  tokenizer_flavor flavor_;
  std::vector<std::string> specials_;
  std::int64_t unk_id_ = 0;

  // buffers of one call: the text's code points and their byte offsets; the normalized
  // characters of a stretch between special tokens and the code point each came from
  struct scratch {
    std::u32string text;
    std::vector<std::size_t> byte_at;  // byte offset of code point i; byte_at[n] = size
    std::u32string norm;
    std::vector<std::size_t> src;
    std::u32string tmp;
    std::u32string lowered;
    std::string utf8;
    std::vector<std::size_t> at;
    std::string key;
    bool stop = false;  // set by a callback: no more words
  };

  void push_special(wordpiece_encoding& e, std::string_view token, token_offsets cp,
                    token_offsets bytes) const {
    e.tokens.emplace_back(token);
    e.ids.push_back(vocab_.id(token));
    e.offsets.push_back(cp);
    e.byte_offsets.push_back(bytes);
  }

  // step 5: greedy longest-match-first over the word sc.norm[a, b)
  void wordpiece(scratch& sc, std::size_t a, std::size_t b, wordpiece_encoding& e) const {
    auto span = [&](std::size_t i, std::size_t j) {
      // the original code points of normalized characters i..j-1 (min and max: canonical
      // ordering may have moved a character before one that came earlier in the text)
      std::size_t lo = sc.src[i], hi = sc.src[i];
      for (std::size_t k = i + 1; k < j; ++k) lo = std::min(lo, sc.src[k]), hi = std::max(hi, sc.src[k]);
      return token_offsets{lo, hi + 1};
    };
    auto emit = [&](std::string_view token, std::int64_t id, token_offsets cp) {
      e.tokens.emplace_back(token);
      e.ids.push_back(id);
      e.offsets.push_back(cp);
      e.byte_offsets.emplace_back(sc.byte_at[cp.first], sc.byte_at[cp.second]);
    };
    const std::size_t n = b - a;
    if (n > max_input_chars_per_word) {
      emit("[UNK]", unk_id_, span(a, b));
      return;
    }
    // the UTF-8 form and the byte offset of every code point, so that a piece is a substring
    sc.utf8.clear();
    sc.at.clear();
    for (std::size_t i = a; i < b; ++i) {
      sc.at.push_back(sc.utf8.size());
      unicode::append_utf8(sc.norm[i], sc.utf8);
    }
    sc.at.push_back(sc.utf8.size());
    const std::size_t first_new = e.tokens.size();
    const std::size_t longest = vocab_.max_token_bytes();
    for (std::size_t start = 0; start < n;) {
      const std::size_t prefix = start > 0 ? 2 : 0;
      std::size_t end = n;
      // no token is longer than `longest` bytes: start the search where a piece can match
      while (end > start + 1 && sc.at[end] - sc.at[start] + prefix > longest) --end;
      std::optional<std::int64_t> found;
      for (; end > start; --end) {
        sc.key.assign(prefix ? "##" : "");
        sc.key.append(sc.utf8, sc.at[start], sc.at[end] - sc.at[start]);
        if ((found = vocab_.find(sc.key))) break;
      }
      if (!found) {
        // no piece matches here: the whole word is unknown
        e.tokens.resize(first_new);
        e.ids.resize(first_new);
        e.offsets.resize(first_new);
        e.byte_offsets.resize(first_new);
        emit("[UNK]", unk_id_, span(a, b));
        return;
      }
      emit(sc.key, *found, span(a + start, a + end));
      start = end;
    }
  }

  // steps 0 to 4: on_word(a, b) for each word sc.norm[a, b), on_special(token, code point
  // offset) for each special token, in order
  template <class OnWord, class OnSpecial>
  void for_each_word(std::string_view text, scratch& sc, OnWord on_word, OnSpecial on_special) const {
    sc.text = unicode::decode_utf8(text);  // the whole text is checked first: an error names its byte
    sc.byte_at.clear();
    for (std::size_t i = 0; i < text.size(); ++i)
      if ((static_cast<unsigned char>(text[i]) & 0xC0u) != 0x80u) sc.byte_at.push_back(i);
    sc.byte_at.push_back(text.size());
    const std::u32string_view t(sc.text);
    std::size_t pos = 0;
    while (pos <= t.size()) {
      // the next special token: they all start with '['
      std::size_t best = t.size();
      std::string_view best_token;
      for (std::size_t i = t.find(U'[', pos); i != std::u32string_view::npos && i < best;
           i = t.find(U'[', i + 1)) {
        for (const auto& s : specials_) {
          if (i + s.size() > t.size()) continue;
          bool same = true;
          for (std::size_t k = 0; k < s.size() && same; ++k) same = t[i + k] == static_cast<char32_t>(s[k]);
          if (same) {
            best = i;
            best_token = s;
            break;
          }
        }
      }
      normalize(sc, pos, best);
      split_words(sc, on_word);
      if (best_token.empty() || sc.stop) break;
      on_special(best_token, best);
      pos = best + best_token.size();
    }
  }

  // steps 1 to 3 over sc.text[from, to) into sc.norm / sc.src, with the canonical ordering of
  // combining characters that NFD does (a stable sort of each run of nonzero classes)
  void normalize(scratch& sc, std::size_t from, std::size_t to) const {
    sc.norm.clear();
    sc.src.clear();
    std::size_t run = 0;  // where the current run of non-starters begins
    const bool fast = flavor_ == tokenizer_flavor::fast;
    auto ccc = [fast](char32_t c) {
      return fast ? unicode_hf::combining_class(c) : unicode::combining_class(c);
    };
    auto push = [&](char32_t c, std::size_t i) {
      const unsigned k = c < 0x300 ? 0u : ccc(c);
      std::size_t j = sc.norm.size();
      sc.norm.push_back(c);
      sc.src.push_back(i);
      if (k == 0) {
        run = sc.norm.size();
        return;
      }
      for (; j > run && ccc(sc.norm[j - 1]) > k; --j) {
        std::swap(sc.norm[j], sc.norm[j - 1]);
        std::swap(sc.src[j], sc.src[j - 1]);
      }
    };
    for (std::size_t i = from; i < to; ++i) {
      const char32_t c = sc.text[i];
      if (fast) {
        using unicode_hf::hf_class;
        switch (unicode_hf::classify(c)) {
          case hf_class::drop: break;
          case hf_class::drop_break: run = sc.norm.size(); break;
          case hf_class::space: push(U' ', i); break;
          case hf_class::cjk:
            push(U' ', i);
            push(c, i);
            push(U' ', i);
            break;
          case hf_class::punct:
          case hf_class::word: push(c, i); break;
          case hf_class::mapped: {
            const auto* m = unicode_hf::maps_of(c);
            for (int k = 0; k < 3 && m && m[k]; ++k) push(static_cast<char32_t>(m[k]), i);
            break;
          }
          case hf_class::hangul: {
            const char32_t s = c - 0xAC00;
            push(0x1100 + s / 588, i);
            push(0x1161 + (s % 588) / 28, i);
            if (s % 28) push(0x11A7 + s % 28, i);
            break;
          }
        }
        continue;
      }
      // slow: BasicTokenizer's steps with Python's Unicode 14
      using unicode::char_class;
      if (c == 0 || c == 0xFFFD) continue;
      const auto k = unicode::classify(c);
      if (k == char_class::control) continue;
      if (k == char_class::whitespace) {
        push(U' ', i);
        continue;
      }
      const bool cjk = unicode::is_cjk(c);  // a word of its own (a compatibility ideograph
      if (cjk) push(U' ', i);               // still decomposes: U+F96E -> U+8449)
      sc.tmp.clear();
      sc.lowered.clear();
      unicode::append_lower(c, sc.lowered);  // U+0130 lowers to two: i + U+0307
      for (char32_t l : sc.lowered) unicode::append_decomposition(l, sc.tmp);
      for (char32_t d : sc.tmp) {
        if (unicode::classify(d) == char_class::mark) {
          if (unicode::combining_class(d) == 0) run = sc.norm.size();  // a starter, dropped
          continue;
        }
        push(d, i);
      }
      if (cjk) push(U' ', i);
    }
  }

  // step 4: words of sc.norm split at whitespace (dropped) and punctuation (a word each)
  template <class OnWord>
  void split_words(scratch& sc, OnWord& on_word) const {
    const bool fast = flavor_ == tokenizer_flavor::fast;
    std::size_t start = 0;
    const std::size_t n = sc.norm.size();
    for (std::size_t i = 0; i < n; ++i) {
      const char32_t c = sc.norm[i];
      bool space = false, punct = false;
      if (fast) {
        space = c == U' ';
        punct = !space && unicode_hf::classify(c) == unicode_hf::hf_class::punct;
      } else {
        const auto k = unicode::classify(c);
        space = k == unicode::char_class::whitespace;
        punct = k == unicode::char_class::punctuation;
      }
      if (!space && !punct) continue;
      if (i > start) {
        on_word(start, i);
        if (sc.stop) return;
      }
      if (punct) {
        on_word(i, i + 1);
        if (sc.stop) return;
      }
      start = i + 1;
    }
    if (n > start) on_word(start, n);
  }
};

}  // namespace qkv::io
