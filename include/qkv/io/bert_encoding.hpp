// bert_encoding.hpp: what a Hugging Face tokenizer call returns for BERT, one text or a pair:
//   tokenizer(text, text_pair, max_length=..., truncation=True | 'longest_first' | 'only_first'
//             | 'only_second', padding='max_length' | 'longest', return_offsets_mapping=True)
// ids, token_type_ids ([CLS] A [SEP] B [SEP]: 0 up to the first [SEP], 1 after), attention_mask,
// special_tokens_mask, offsets, and key_padding (true where attention_mask is 0: the field that
// `qkv attend` and masked attention take). The rules are the Rust library's
// (tokenizers/src/utils/truncation.rs and padding.rs), checked against it through
// tests/data/hf_encodings.json (scripts/fixtures/hf/make_fixtures.js).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wordpiece.hpp"

namespace qkv::io {

/// transformers' truncation= : which sequence loses tokens when the encoding is too long
enum class truncation_strategy : std::uint8_t {
  none,           ///< truncation=False (the default)
  longest_first,  ///< truncation=True or 'longest_first'
  only_first,     ///< 'only_first'
  only_second,    ///< 'only_second'
};

/// transformers' padding= : up to which length [PAD] is appended
enum class padding_strategy : std::uint8_t {
  none,        ///< padding=False (the default)
  max_length,  ///< 'max_length': up to max_length
  longest,     ///< 'longest' (or True): up to the longest encoding of the batch
};

/// bert-base-uncased's model_max_length: max_length when truncation or padding to max_length
/// is asked for without one (as transformers does)
inline constexpr std::size_t bert_model_max_length = 512;

struct encode_options {
  std::optional<std::size_t> max_length;  ///< with the special tokens; default bert_model_max_length
  truncation_strategy truncation = truncation_strategy::none;
  padding_strategy padding = padding_strategy::none;
};

/// a request the library refuses (its message): a truncation that cannot be done
struct encode_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// one encoded text or pair; every vector has size() elements
struct bert_encoding {
  std::vector<std::string> tokens;
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> token_type_ids;       ///< 0 for [CLS] A [SEP], 1 for B [SEP], 0 for [PAD]
  std::vector<std::int64_t> attention_mask;       ///< 1 for a token, 0 for [PAD]
  std::vector<std::int64_t> special_tokens_mask;  ///< 1 for the added [CLS] [SEP] and [PAD]
  std::vector<token_offsets> offsets;             ///< in code points of its own text; {0,0} for added
  std::vector<token_offsets> byte_offsets;        ///< the same in bytes
  std::vector<int> sequence_ids;                  ///< 0 text, 1 pair, -1 added [CLS] [SEP] [PAD]

  [[nodiscard]] std::size_t size() const noexcept { return ids.size(); }

  /// one flag per token, true = padding (attention_mask == 0): attend's key_padding
  [[nodiscard]] std::vector<bool> key_padding() const {
    std::vector<bool> k(attention_mask.size());
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = attention_mask[i] == 0;
    return k;
  }
};

namespace detail {

inline void truncate_pieces(wordpiece_encoding& e, std::size_t n) {
  if (e.ids.size() <= n) return;
  e.tokens.resize(n);
  e.ids.resize(n);
  e.offsets.resize(n);
  e.byte_offsets.resize(n);
}

// tokenizers' truncate_encodings (direction right, stride 0), over the pieces without the
// special tokens: `max` is max_length minus the special tokens the template adds
inline void truncate(wordpiece_encoding& a, wordpiece_encoding* b, std::size_t max, truncation_strategy s) {
  if (max == 0) {
    truncate_pieces(a, 0);
    if (b) truncate_pieces(*b, 0);
    return;
  }
  const std::size_t total = a.ids.size() + (b ? b->ids.size() : 0);
  if (total <= max) return;
  const std::size_t to_remove = total - max;
  if (s == truncation_strategy::longest_first) {
    if (!b) {
      truncate_pieces(a, total - to_remove);
      return;
    }
    std::size_t n1 = a.ids.size(), n2 = b->ids.size();
    const bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > max ? n1 : std::max(n1, max - n1);
    if (n1 + n2 > max) {
      n1 = max / 2;
      n2 = n1 + max % 2;
    }
    if (swap) std::swap(n1, n2);
    truncate_pieces(a, n1);
    truncate_pieces(*b, n2);
    return;
  }
  wordpiece_encoding* target = &a;
  if (s == truncation_strategy::only_second) {
    if (!b) throw encode_error("Truncation error: Second sequence not provided");
    target = b;
  }
  const std::size_t len = target->ids.size();
  if (len <= to_remove)
    throw encode_error("Truncation error: Sequence to truncate too short to respect the provided max_length");
  truncate_pieces(*target, len - to_remove);
}

inline void append(bert_encoding& out, const wordpiece_encoding& e, std::int64_t type, int seq) {
  for (std::size_t i = 0; i < e.ids.size(); ++i) {
    out.tokens.push_back(e.tokens[i]);
    out.ids.push_back(e.ids[i]);
    out.token_type_ids.push_back(type);
    out.attention_mask.push_back(1);
    out.special_tokens_mask.push_back(0);
    out.offsets.push_back(e.offsets[i]);
    out.byte_offsets.push_back(e.byte_offsets[i]);
    out.sequence_ids.push_back(seq);
  }
}

inline void append_added(bert_encoding& out, const wordpiece_vocab& v, std::string_view token,
                         std::int64_t type, std::int64_t attention) {
  out.tokens.emplace_back(token);
  out.ids.push_back(v.id(token));
  out.token_type_ids.push_back(type);
  out.attention_mask.push_back(attention);
  out.special_tokens_mask.push_back(1);
  out.offsets.emplace_back(0, 0);
  out.byte_offsets.emplace_back(0, 0);
  out.sequence_ids.push_back(-1);
}

}  // namespace detail

/// appends [PAD] (id of [PAD], type 0, attention 0, special 1, offsets {0,0}) up to `length`
/// tokens; an encoding already that long is left as it is. Throws std::out_of_range when the
/// vocabulary has no [PAD].
inline void pad(bert_encoding& e, std::size_t length, const wordpiece_vocab& vocab) {
  while (e.size() < length) detail::append_added(e, vocab, "[PAD]", 0, 0);
}

/// the Hugging Face call for one text (pair empty) or a pair. Throws encode_error where the
/// library refuses (only_second without a pair, a sequence too short to lose enough tokens),
/// and std::invalid_argument for a truncating max_length shorter than the special tokens (2
/// for a text, 3 for a pair: the library's answer there comes from an unsigned wrap-around),
/// or a padding max_length above the limit of 1 << 20 tokens.
[[nodiscard]] inline bert_encoding encode(const wordpiece_tokenizer& tok, std::string_view text,
                                          std::optional<std::string_view> pair = std::nullopt,
                                          const encode_options& opt = {}) {
  const std::size_t max_length = opt.max_length.value_or(bert_model_max_length);
  const std::size_t added = pair ? 3 : 2;
  constexpr std::size_t padding_limit = std::size_t{1} << 20;
  if (opt.truncation != truncation_strategy::none && max_length < added) {
    throw std::invalid_argument("max_length " + std::to_string(max_length) + " is shorter than the " +
                                std::to_string(added) + " special tokens of a " + (pair ? "pair" : "text"));
  }
  if (opt.padding == padding_strategy::max_length && max_length > padding_limit) {
    throw std::invalid_argument("max_length " + std::to_string(max_length) +
                                " is above the padding limit of " + std::to_string(padding_limit) +
                                " tokens");
  }
  // with truncation on, the library stops tokenizing a sequence after the word at which it has
  // max_length tokens (before truncating to max_length minus the special tokens); not the first
  // sequence under only_second. It changes which sequence longest_first sees as the longer.
  constexpr auto all = static_cast<std::size_t>(-1);
  const bool limit = opt.truncation != truncation_strategy::none;
  wordpiece_encoding a =
      tok.encode_pieces(text, limit && opt.truncation != truncation_strategy::only_second ? max_length : all);
  std::optional<wordpiece_encoding> b;
  if (pair) b = tok.encode_pieces(*pair, limit ? max_length : all);
  if (opt.truncation != truncation_strategy::none)
    detail::truncate(a, b ? &*b : nullptr, max_length - added, opt.truncation);
  bert_encoding out;
  const auto& v = tok.vocab();
  detail::append_added(out, v, "[CLS]", 0, 1);
  detail::append(out, a, 0, 0);
  detail::append_added(out, v, "[SEP]", 0, 1);
  if (b) {
    detail::append(out, *b, 1, 1);
    detail::append_added(out, v, "[SEP]", 1, 1);
  }
  if (opt.padding == padding_strategy::max_length) pad(out, max_length, v);
  return out;
}

/// a text and, optionally, its pair
struct text_pair {
  std::string text;
  std::optional<std::string> pair;
};

/// the call on a batch: each item encoded as encode() does; padding longest pads every
/// encoding to the longest of the batch
[[nodiscard]] inline std::vector<bert_encoding> encode_batch(const wordpiece_tokenizer& tok,
                                                             const std::vector<text_pair>& items,
                                                             const encode_options& opt = {}) {
  std::vector<bert_encoding> out;
  out.reserve(items.size());
  std::size_t longest = 0;
  for (const auto& it : items) {
    out.push_back(
        encode(tok, it.text, it.pair ? std::optional<std::string_view>(*it.pair) : std::nullopt, opt));
    longest = std::max(longest, out.back().size());
  }
  if (opt.padding == padding_strategy::longest)
    for (auto& e : out) pad(e, longest, tok.vocab());
  return out;
}

}  // namespace qkv::io
