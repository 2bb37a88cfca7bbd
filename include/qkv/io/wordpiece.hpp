// wordpiece.hpp: BERT's uncased WordPiece tokenizer and its vocab.txt reader.
//
// It does what Hugging Face's BertTokenizer(do_lower_case=True) does (and BertTokenizerFast):
//   0. the special tokens [CLS] [SEP] [UNK] [PAD] [MASK], written as such in the text, are kept
//      whole (case-sensitive); the text between them goes through steps 1 to 6;
//   1. lower-case, one character at a time (Python's str.lower of each character: Σ -> σ);
//   2. clean: drop NUL, U+FFFD and control characters (category C*, except \t \n \r, which are
//      whitespace); every whitespace character (Zs, \t \n \r) separates words;
//   3. put every CJK ideograph in a word of its own;
//   4. strip accents: Unicode NFD, then drop the non-spacing marks (Mn);
//   5. split on punctuation (category P*, and every ASCII character that is not a letter, a
//      digit, a space or a control: 33-47, 58-64, 91-96, 123-126): each mark is a word;
//   6. WordPiece: greedy longest match first from the start of each word, continuations
//      prefixed "##"; [UNK] for a word with no match at some point, or longer than 100 code
//      points (max_input_chars_per_word).
// encode() puts [CLS] before and [SEP] after.
//
// Input must be valid UTF-8 (unicode::invalid_utf8 otherwise). Unicode data: unicode_tables.hpp.
#pragma once

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
        throw vocab_error(where + ": duplicate token \"" + std::string(token) +
                          "\" (first on line " + std::to_string(it->second + 1) + ")");
      }
      v.tokens_.emplace_back(token);
    }
    if (v.tokens_.empty()) throw vocab_error(src + " is empty: it has no tokens");
    for (const char* special : {"[UNK]", "[CLS]", "[SEP]"}) {
      if (!v.find(special)) throw vocab_error(src + " lacks the special token " + special);
    }
    return v;
  }

  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }

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
  std::unordered_map<std::string, std::int64_t, string_hash, std::equal_to<>> ids_;
};

/// tokens and their ids
struct wordpiece_encoding {
  std::vector<std::string> tokens;
  std::vector<std::int64_t> ids;
};

/// BERT's uncased tokenizer over a vocabulary (see the top of this file for the steps)
class wordpiece_tokenizer {
 public:
  /// words longer than this many code points become [UNK] (BertTokenizer's default)
  static constexpr std::size_t max_input_chars_per_word = 100;

  explicit wordpiece_tokenizer(wordpiece_vocab vocab) : vocab_(std::move(vocab)) {
    for (const char* s : {"[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"})
      if (vocab_.find(s)) specials_.emplace_back(s);
  }

  [[nodiscard]] const wordpiece_vocab& vocab() const noexcept { return vocab_; }

  /// steps 0 to 5: the words (special tokens, and UTF-8 words after cleaning, lower-casing,
  /// accent stripping and punctuation splitting) that WordPiece then cuts into pieces
  [[nodiscard]] std::vector<std::string> basic_tokenize(std::string_view text) const {
    std::vector<std::string> words;
    for_each_word(text, [&](std::u32string_view w, bool) { words.push_back(unicode::to_utf8(w)); },
                  [&](std::string_view special) { words.emplace_back(special); });
    return words;
  }

  /// the word pieces of a text, without [CLS] and [SEP]
  [[nodiscard]] std::vector<std::string> tokenize(std::string_view text) const {
    wordpiece_encoding e;
    run(text, e);
    return std::move(e.tokens);
  }

  /// [CLS], the word pieces of a text, [SEP]; with their ids
  [[nodiscard]] wordpiece_encoding encode(std::string_view text) const {
    wordpiece_encoding e;
    push(e, "[CLS]");
    run(text, e);
    push(e, "[SEP]");
    return e;
  }

 private:
  wordpiece_vocab vocab_;
  std::vector<std::string> specials_;

  void push(wordpiece_encoding& e, std::string_view token) const {
    e.tokens.emplace_back(token);
    e.ids.push_back(vocab_.id(token));
  }

  void run(std::string_view text, wordpiece_encoding& e) const {
    std::string key;
    for_each_word(
        text, [&](std::u32string_view w, bool) { wordpiece(w, e, key); },
        [&](std::string_view special) { push(e, special); });
  }

  // step 6: greedy longest-match-first over one word (code points)
  void wordpiece(std::u32string_view word, wordpiece_encoding& e, std::string& key) const {
    if (word.size() > max_input_chars_per_word) {
      push(e, "[UNK]");
      return;
    }
    // the UTF-8 form and the byte offset of every code point, so that a piece is a substring
    std::string utf8;
    std::vector<std::size_t> at;
    at.reserve(word.size() + 1);
    for (char32_t c : word) {
      at.push_back(utf8.size());
      unicode::append_utf8(c, utf8);
    }
    at.push_back(utf8.size());
    const std::size_t first_new = e.tokens.size();
    for (std::size_t start = 0; start < word.size();) {
      std::size_t end = word.size();
      std::optional<std::int64_t> found;
      for (; end > start; --end) {
        key.assign(start > 0 ? "##" : "");
        key.append(utf8, at[start], at[end] - at[start]);
        if ((found = vocab_.find(key))) break;
      }
      if (!found) {
        // no piece matches here: the whole word is unknown
        e.tokens.resize(first_new);
        e.ids.resize(first_new);
        push(e, "[UNK]");
        return;
      }
      e.tokens.push_back(key);
      e.ids.push_back(*found);
      start = end;
    }
  }

  // steps 0 to 5; on_word(code points, false) for each word, on_special(token) for each
  // special token, in order
  template <class OnWord, class OnSpecial>
  void for_each_word(std::string_view text, OnWord on_word, OnSpecial on_special) const {
    (void)unicode::decode_utf8(text);  // the whole text is checked first: an error names its byte
    std::size_t pos = 0;
    while (pos <= text.size()) {
      // the next special token: they all start with '[', never part of a multi-byte sequence
      std::size_t best = text.size();
      std::string_view best_token;
      for (std::size_t i = text.find('[', pos); i != std::string_view::npos && i < best;
           i = text.find('[', i + 1)) {
        for (const auto& s : specials_)
          if (text.substr(i, s.size()) == s) {
            best = i;
            best_token = s;
            break;
          }
      }
      plain_words(text.substr(pos, best - pos), on_word);
      if (best_token.empty()) break;
      on_special(best_token);
      pos = best + best_token.size();
    }
  }

  template <class OnWord>
  static void plain_words(std::string_view chunk, OnWord& on_word) {
    using unicode::char_class;
    const std::u32string chars = unicode::decode_utf8(chunk);
    std::u32string word, lowered;
    auto finish_word = [&] {
      if (word.empty()) return;
      // step 4: NFD, drop Mn
      const std::u32string decomposed = unicode::nfd(word);
      word.clear();
      // step 5: punctuation splits; each mark is its own word
      std::u32string piece;
      for (char32_t c : decomposed) {
        const auto k = unicode::classify(c);
        if (k == char_class::mark) continue;
        if (k == char_class::punctuation || k == char_class::whitespace) {
          if (!piece.empty()) on_word(std::u32string_view(piece), false);
          piece.clear();
          if (k == char_class::punctuation) on_word(std::u32string_view(&c, 1), false);
          continue;
        }
        piece += c;
      }
      if (!piece.empty()) on_word(std::u32string_view(piece), false);
    };
    for (char32_t c : chars) {
      // step 2: cleaning
      if (c == 0 || c == 0xFFFD) continue;
      const auto k = unicode::classify(c);
      if (k == char_class::control) continue;
      if (k == char_class::whitespace) {
        finish_word();
        continue;
      }
      // step 3: a CJK ideograph is a word of its own (lower-casing leaves it as it is)
      if (unicode::is_cjk(c)) {
        finish_word();
        word += c;
        finish_word();
        continue;
      }
      // step 1: lower case
      lowered.clear();
      unicode::append_lower(c, lowered);
      word += lowered;
    }
    finish_word();
  }
};

}  // namespace qkv::io
