// wordpiece_fuzz.cpp: libFuzzer target for the WordPiece tokenizer over the real BERT vocabulary.
// Any bytes: either a clear invalid_utf8 error, or an encoding that keeps its invariants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <qkv/io/wordpiece.hpp>

#ifndef QKV_VOCAB
#error "build with -DQKV_VOCAB=\"path/to/vocab.txt\""
#endif

namespace {
const qkv::io::wordpiece_tokenizer& bert() {
  static const qkv::io::wordpiece_tokenizer t(qkv::io::wordpiece_vocab::from_file(QKV_VOCAB));
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bool valid = true;
  try {
    (void)qkv::io::unicode::decode_utf8(text);
  } catch (const qkv::io::unicode::invalid_utf8&) { valid = false; }
  try {
    const auto e = bert().encode(text);
    if (!valid) std::abort();  // invalid UTF-8 must be refused
    // invariants: one id per token, [CLS] first, [SEP] last, every id names its token
    if (e.tokens.size() != e.ids.size() || e.tokens.size() < 2) std::abort();
    if (e.ids.front() != 101 || e.ids.back() != 102) std::abort();
    for (std::size_t i = 0; i < e.ids.size(); ++i)
      if (bert().vocab().token(e.ids[i]) != e.tokens[i]) std::abort();
  } catch (const qkv::io::unicode::invalid_utf8&) {
    if (valid) std::abort();  // valid UTF-8 must tokenize
  }
  return 0;
}
