// vocab_fuzz.cpp: libFuzzer target for the vocab.txt reader. Any bytes: either a clear
// vocab_error / invalid_utf8, or a vocabulary that a tokenizer can use.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <qkv/io/wordpiece.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto v = qkv::io::wordpiece_vocab::from_string(text, "fuzz");
    // every id names a token whose id it is
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v.id(v.token(static_cast<std::int64_t>(i))) != static_cast<std::int64_t>(i)) std::abort();
    const qkv::io::wordpiece_tokenizer t(v);
    const auto e = t.encode("Hello, wörld! [MASK] 中文 unaffable");
    if (e.tokens.size() != e.ids.size() || e.tokens.front() != "[CLS]" || e.tokens.back() != "[SEP]")
      std::abort();
  } catch (const qkv::io::vocab_error&) {
  } catch (const qkv::io::unicode::invalid_utf8&) {}
  return 0;
}
