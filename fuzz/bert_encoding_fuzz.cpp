// bert_encoding_fuzz.cpp: libFuzzer target for io/bert_encoding.hpp: pairs, truncation,
// padding and offsets over the real BERT vocabulary, both flavors.
// Input: byte 0 chooses (bits 0-1) the truncation strategy, (bits 2-3) the padding (none,
// max_length, longest over the batch {text, pair alone}), (bit 4) the slow flavor, (bit 5) a
// pair; byte 1 is max_length; the rest is the text, and after the first 0xFF byte (never in
// UTF-8) the pair. Any input: a clear error (invalid_utf8, encode_error, invalid_argument for a
// max_length below the special tokens), or an encoding that keeps every invariant:
//   all fields the same length; [CLS] first; ids name their tokens; type ids 0 up to the first
//   [SEP] and 1 after it up to the last [SEP], 0 on [PAD]; attention 0 exactly on the added
//   [PAD] and key_padding its negation; truncation keeps at most max_length tokens, padding to
//   max_length at least that many; every non-added token's offsets lie inside its own text, in
//   order, byte and code point offsets name the same characters, and the selected text
//   tokenizes again to pieces holding the token's letters.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <qkv/io/bert_encoding.hpp>

#ifndef QKV_VOCAB
#error "build with -DQKV_VOCAB=\"path/to/vocab.txt\""
#endif

namespace {

const qkv::io::wordpiece_tokenizer& bert(bool slow) {
  static const qkv::io::wordpiece_tokenizer fast_t(qkv::io::wordpiece_vocab::from_file(QKV_VOCAB));
  static const qkv::io::wordpiece_tokenizer slow_t(qkv::io::wordpiece_vocab::from_file(QKV_VOCAB),
                                                   qkv::io::tokenizer_flavor::slow);
  return slow ? slow_t : fast_t;
}

void require(bool ok) {
  if (!ok) std::abort();
}

std::string letters(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p.rfind("##", 0) == 0 ? p.substr(2) : p;
  return s;
}

void check(const qkv::io::wordpiece_tokenizer& tok, const qkv::io::bert_encoding& e, std::string_view text,
           std::optional<std::string_view> pair, const qkv::io::encode_options& o, bool batch_padded) {
  const std::size_t n = e.size();
  require(e.tokens.size() == n && e.token_type_ids.size() == n && e.attention_mask.size() == n &&
          e.special_tokens_mask.size() == n && e.offsets.size() == n && e.byte_offsets.size() == n &&
          e.sequence_ids.size() == n && e.key_padding().size() == n);
  require(n >= 2 && e.tokens[0] == "[CLS]" && e.sequence_ids[0] == -1);
  const std::size_t max_length = o.max_length.value_or(qkv::io::bert_model_max_length);
  std::size_t real = 0;  // tokens before the padding
  while (real < n && e.attention_mask[real] == 1) ++real;
  for (std::size_t i = real; i < n; ++i)
    require(e.attention_mask[i] == 0 && e.tokens[i] == "[PAD]" && e.token_type_ids[i] == 0 &&
            e.sequence_ids[i] == -1);
  if (o.truncation != qkv::io::truncation_strategy::none) require(real <= max_length);
  if (o.padding == qkv::io::padding_strategy::max_length) require(n >= max_length);
  if (o.padding == qkv::io::padding_strategy::none && !batch_padded) require(real == n);
  const auto kp = e.key_padding();
  std::size_t seps = 0;
  std::size_t last_begin[2] = {0, 0};
  for (std::size_t i = 0; i < n; ++i) {
    require(tok.vocab().token(e.ids[i]) == e.tokens[i]);
    require(kp[i] == (e.attention_mask[i] == 0));
    if (i >= real) continue;
    const int seq = e.sequence_ids[i];
    if (seq == -1) {
      require(e.special_tokens_mask[i] == 1 && e.offsets[i] == qkv::io::token_offsets{0, 0});
      if (e.tokens[i] == "[SEP]") ++seps;
      require(e.token_type_ids[i] == (seps == 2 ? 1 : 0));
      continue;
    }
    require(seq == 0 || (seq == 1 && pair));
    require(e.token_type_ids[i] == seq && e.special_tokens_mask[i] == 0 &&
            seps == static_cast<std::size_t>(seq));
    const std::string_view own = seq == 0 ? text : *pair;
    const auto [b, en] = e.byte_offsets[i];
    const auto [cb, ce] = e.offsets[i];
    require(b < en && en <= own.size() && cb < ce && cb >= last_begin[seq]);
    last_begin[seq] = cb;
    const std::string selected(own.substr(b, en - b));
    require(qkv::io::unicode::decode_utf8(selected).size() == ce - cb);
    require(qkv::io::unicode::decode_utf8(own.substr(0, b)).size() == cb);
    const std::string& t = e.tokens[i];
    if (t.size() > 2 && t.front() == '[' && selected == t) continue;  // a special token in the text
    const auto again = tok.tokenize(selected);
    require(!again.empty());
    if (t != "[UNK]")
      require(letters(again).find(t.rfind("##", 0) == 0 ? t.substr(2) : t) != std::string::npos);
  }
  require(seps == (pair ? 2u : 1u));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const unsigned flags = data[0];
  qkv::io::encode_options o;
  o.truncation = static_cast<qkv::io::truncation_strategy>(flags & 3u);
  const unsigned pad = (flags >> 2) & 3u;
  o.padding = pad == 1   ? qkv::io::padding_strategy::max_length
              : pad == 2 ? qkv::io::padding_strategy::longest
                         : qkv::io::padding_strategy::none;
  o.max_length = data[1];
  const bool slow = (flags >> 4) & 1u;
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  const std::size_t cut = rest.find('\xff');
  const std::string_view text = rest.substr(0, cut);
  std::optional<std::string_view> pair;
  if (((flags >> 5) & 1u) && cut != std::string_view::npos) pair = rest.substr(cut + 1);
  const auto& tok = bert(slow);
  try {
    if (o.padding == qkv::io::padding_strategy::longest) {
      std::vector<qkv::io::text_pair> items{
          {std::string(text), pair ? std::optional<std::string>(*pair) : std::nullopt}};
      if (pair) items.push_back({std::string(*pair), std::nullopt});
      const auto batch = qkv::io::encode_batch(tok, items, o);
      for (std::size_t i = 1; i < batch.size(); ++i) require(batch[i].size() == batch[0].size());
      check(tok, batch[0], text, pair, o, true);
      if (pair) check(tok, batch[1], *pair, std::nullopt, o, true);
    } else {
      check(tok, qkv::io::encode(tok, text, pair, o), text, pair, o, false);
    }
  } catch (const qkv::io::unicode::invalid_utf8&) {
  } catch (const qkv::io::encode_error&) {
    require(o.truncation == qkv::io::truncation_strategy::only_first ||
            o.truncation == qkv::io::truncation_strategy::only_second);
  } catch (const std::invalid_argument&) {
    require(o.truncation != qkv::io::truncation_strategy::none && *o.max_length < (pair ? 3u : 2u));
  }
  return 0;
}
