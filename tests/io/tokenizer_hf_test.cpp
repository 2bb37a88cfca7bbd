// runtime tests of the fast flavor of io/wordpiece.hpp (Hugging Face's Rust tokenizer, as
// AutoTokenizer('bert-base-uncased') runs it) and of io/bert_encoding.hpp (pairs, truncation,
// padding, offsets), against what the library itself gave: tests/data/hf_codepoints.json and
// tests/data/hf_encodings.json, made by scripts/fixtures/hf/make_fixtures.js with npm `tokenizers`.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/bert_encoding.hpp>

namespace {

using qkv::io::tokenizer_flavor;
using qkv::io::wordpiece_tokenizer;
using qkv::io::wordpiece_vocab;

const wordpiece_tokenizer& fast() {
  static const wordpiece_tokenizer t(wordpiece_vocab::from_file(QKV_VOCAB));
  return t;
}
const wordpiece_tokenizer& slow() {
  static const wordpiece_tokenizer t(wordpiece_vocab::from_file(QKV_VOCAB), tokenizer_flavor::slow);
  return t;
}

nlohmann::json fixture(const char* name) {
  std::ifstream in(std::string(QKV_TEST_DATA) + "/" + name);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

std::string utf8(char32_t c) {
  std::string s;
  qkv::io::unicode::append_utf8(c, s);
  return s;
}

using offsets_list = std::vector<std::vector<std::size_t>>;
offsets_list offsets_of(const std::vector<qkv::io::token_offsets>& o) {
  offsets_list out;
  for (const auto& [a, b] : o) out.push_back({a, b});
  return out;
}

}  // namespace

TEST_CASE("the fast flavor is the default and gives the tutorial's ids") {
  CHECK(fast().flavor() == tokenizer_flavor::fast);
  const auto e = fast().encode("let's tokenize something?");
  CHECK(e.ids == std::vector<std::int64_t>{101, 2292, 1005, 1055, 19204, 4697, 2242, 1029, 102});
  // offsets in code points: "let" is 0..3, "'" 3..4, "##ize" 11..14; [CLS] and [SEP] 0..0
  CHECK(offsets_of(e.offsets) ==
        offsets_list{{0, 0}, {0, 3}, {3, 4}, {4, 5}, {6, 11}, {11, 14}, {15, 24}, {24, 25}, {0, 0}});
}

TEST_CASE("every code point in three texts encodes as the Rust library encodes it") {
  // hf_codepoints.json: for each block of 4096 code points, FNV-1a (32 bits) of "ID START END,"
  // per token and ";" per text, for "a" c "b", " " c " ", "X" c U+0301 "y", with [CLS] [SEP]
  const auto fx = fixture("hf_codepoints.json");
  const auto& hashes = fx["block_hashes"];
  REQUIRE(hashes.size() == 0x110);
  auto fnv = [](std::uint32_t h, std::string_view s) {
    for (unsigned char b : s) h = (h ^ b) * 0x01000193u;
    return h;
  };
  int bad_blocks = 0;
  char buf[64];
  for (std::uint32_t block = 0; block < 0x110; ++block) {
    std::uint32_t h = 0x811c9dc5u;
    for (char32_t cp = block * 4096; cp < (block + 1) * 4096; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const std::string c = utf8(cp);
      for (const std::string& text : {"a" + c + "b", " " + c + " ", "X" + c + "\u0301y"}) {
        const auto e = fast().encode(text);
        for (std::size_t i = 0; i < e.ids.size(); ++i) {
          std::snprintf(buf, sizeof buf, "%lld %zu %zu,", static_cast<long long>(e.ids[i]),
                        e.offsets[i].first, e.offsets[i].second);
          h = fnv(h, buf);
        }
        h = fnv(h, ";");
      }
    }
    std::snprintf(buf, sizeof buf, "%08x", h);
    if (hashes[block].get<std::string>() != buf) {
      ++bad_blocks;
      INFO("block U+" << std::hex << block * 4096);
      CHECK(hashes[block].get<std::string>() == std::string(buf));
    }
  }
  CHECK(bad_blocks == 0);
}

TEST_CASE("the sampled code points give the library's tokens, ids and offsets") {
  const auto fx = fixture("hf_codepoints.json");
  REQUIRE(fx["samples"].size() >= 272);
  for (const auto& s : fx["samples"]) {
    for (const auto& enc : s["encodings"]) {
      const std::string text = enc["text"];
      INFO("code point " << s["code_point"].get<long>() << " text " << enc["text"].dump());
      const auto e = fast().encode(text);
      CHECK(e.tokens == enc["tokens"].get<std::vector<std::string>>());
      CHECK(e.ids == enc["ids"].get<std::vector<std::int64_t>>());
      CHECK(offsets_of(e.offsets) == enc["offsets"].get<offsets_list>());
    }
  }
}

namespace {

qkv::io::encode_options options_of(const nlohmann::json& c) {
  qkv::io::encode_options o;
  if (c.contains("max_length")) o.max_length = c["max_length"].get<std::size_t>();
  if (c.contains("truncation")) {
    const std::string t = c["truncation"];
    o.truncation = t == "longest_first" ? qkv::io::truncation_strategy::longest_first
                   : t == "only_first"  ? qkv::io::truncation_strategy::only_first
                                        : qkv::io::truncation_strategy::only_second;
  }
  if (c.contains("padding")) o.padding = qkv::io::padding_strategy::max_length;
  return o;
}

void check_same(const qkv::io::bert_encoding& e, const nlohmann::json& x) {
  CHECK(e.ids == x["ids"].get<std::vector<std::int64_t>>());
  CHECK(e.tokens == x["tokens"].get<std::vector<std::string>>());
  CHECK(e.token_type_ids == x["token_type_ids"].get<std::vector<std::int64_t>>());
  CHECK(e.attention_mask == x["attention_mask"].get<std::vector<std::int64_t>>());
  CHECK(e.special_tokens_mask == x["special_tokens_mask"].get<std::vector<std::int64_t>>());
  CHECK(offsets_of(e.offsets) == x["offsets"].get<offsets_list>());
  const auto kp = e.key_padding();
  for (std::size_t i = 0; i < kp.size(); ++i) CHECK(kp[i] == (e.attention_mask[i] == 0));
}

}  // namespace

TEST_CASE("texts and pairs under truncation and padding give what the library gives") {
  const auto fx = fixture("hf_encodings.json");
  REQUIRE(fx["cases"].size() >= 900);
  int compared = 0, refused = 0, below_specials = 0;
  for (const auto& c : fx["cases"]) {
    const std::string text = c["text"];
    std::optional<std::string> pair;
    if (!c["pair"].is_null()) pair = c["pair"].get<std::string>();
    const auto opt = options_of(c);
    INFO("case " << c.dump().substr(0, 300));
    const std::optional<std::string_view> pv = pair ? std::optional<std::string_view>(*pair) : std::nullopt;
    if (opt.truncation != qkv::io::truncation_strategy::none && *opt.max_length < (pair ? 3u : 2u)) {
      // the library wraps max_length - 3 around (unsigned); qkv refuses
      CHECK_THROWS_AS((void)qkv::io::encode(fast(), text, pv, opt), std::invalid_argument);
      ++below_specials;
      continue;
    }
    if (c.contains("error")) {
      CHECK_THROWS_WITH_AS((void)qkv::io::encode(fast(), text, pv, opt),
                           c["error"].get<std::string>().c_str(), qkv::io::encode_error);
      ++refused;
      continue;
    }
    check_same(qkv::io::encode(fast(), text, pv, opt), c["expected"]);
    ++compared;
  }
  CHECK(compared + refused + below_specials == static_cast<int>(fx["cases"].size()));
  CHECK(compared >= 600);
  CHECK(refused >= 150);
  CHECK(below_specials > 0);
}

TEST_CASE("a batch padded to its longest encoding is the library's Encoding.pad") {
  const auto fx = fixture("hf_encodings.json");
  REQUIRE(fx["batches"].size() >= 5);
  for (const auto& b : fx["batches"]) {
    std::vector<qkv::io::text_pair> items;
    for (const auto& it : b["items"]) {
      qkv::io::text_pair p{it["text"].get<std::string>(), std::nullopt};
      if (!it["pair"].is_null()) p.pair = it["pair"].get<std::string>();
      items.push_back(p);
    }
    qkv::io::encode_options opt;
    opt.padding = qkv::io::padding_strategy::longest;
    const auto got = qkv::io::encode_batch(fast(), items, opt);
    REQUIRE(got.size() == b["expected"].size());
    for (std::size_t i = 0; i < got.size(); ++i) check_same(got[i], b["expected"][i]);
  }
}

namespace {

// the offsets' invariant: the text a token's offsets select produces that token. A piece
// "##ize" or "token" comes from a word; tokenizing the selected text alone gives pieces whose
// letters (without "##") are the token's letters, or [UNK]; a special token written in the
// text selects itself; the offsets are in order and inside the text
void check_offsets(const wordpiece_tokenizer& tok, const std::string& text) {
  const auto e = tok.encode_pieces(text);
  const auto cps = qkv::io::unicode::decode_utf8(text);
  std::size_t last_begin = 0;
  for (std::size_t i = 0; i < e.ids.size(); ++i) {
    const auto [b, en] = e.byte_offsets[i];
    const auto [cb, ce] = e.offsets[i];
    INFO("text " << nlohmann::json(text).dump() << " token " << i << " " << e.tokens[i]);
    REQUIRE(b < en);
    REQUIRE(en <= text.size());
    REQUIRE(ce <= cps.size());
    CHECK(cb >= last_begin);
    last_begin = cb;
    // code point and byte offsets name the same characters
    CHECK(qkv::io::unicode::to_utf8(std::u32string_view(cps).substr(cb, ce - cb)) == text.substr(b, en - b));
    const std::string selected = text.substr(b, en - b);
    const std::string& t = e.tokens[i];
    if (t.size() > 2 && t.front() == '[' && t.back() == ']' && selected == t) continue;  // special
    const auto again = tok.tokenize(selected);
    std::string letters, want = t.rfind("##", 0) == 0 ? t.substr(2) : t;
    for (const auto& p : again) letters += p.rfind("##", 0) == 0 ? p.substr(2) : p;
    if (t == "[UNK]") {
      CHECK(!again.empty());
    } else {
      // the selected characters make the piece; a piece of one code point's expansion (the
      // jamo of a Hangul syllable) is inside what that code point makes
      CHECK(letters.find(want) != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("every token's offsets select the text that produced it") {
  const auto fx = fixture("hf_encodings.json");
  for (const auto& c : fx["cases"]) {
    check_offsets(fast(), c["text"].get<std::string>());
    check_offsets(slow(), c["text"].get<std::string>());
  }
  // generated texts: letters, accents, CJK, Hangul, punctuation, spaces, emoji, controls
  const char32_t alphabet[] = {U'a',    U'B',   U'z', U'É', 0x301, 0x4E2D,  0xD55C,  U',',   U' ',  U'\t',
                               0x1F600, 0x200B, U'[', U']', 0x130, 0x1D165, 0x1D16D, 0xF900, 0x378, U'-'};
  std::uint64_t state = 12345;
  for (int n = 0; n < 2000; ++n) {
    std::string text;
    const int len = static_cast<int>(state % 24);
    for (int i = 0; i < len; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text += utf8(alphabet[(state >> 33) % std::size(alphabet)]);
    }
    if (n % 5 == 0) text += "[MASK]";
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    check_offsets(fast(), text);
    check_offsets(slow(), text);
  }
}

TEST_CASE("where the fast and the slow flavors differ") {
  // (the fast side of each is also in hf_codepoints.json: "a" c "b" for every c)
  // an unassigned code point (U+0378): kept by the Rust normalizer, so its word is [UNK];
  // dropped by the Python one (category Cn is a control for it)
  CHECK(fast().tokenize("ab\u0378c") == std::vector<std::string>{"[UNK]"});
  CHECK(slow().tokenize("ab\u0378c") == std::vector<std::string>{"abc"});
  // U+2B820..U+2B91F: CJK for Python, not for the Rust library, whose range starts at U+2B920
  CHECK(slow().tokenize("a\U0002B820b") == std::vector<std::string>{"a", "[UNK]", "b"});
  CHECK(fast().tokenize("a\U0002B820b") == std::vector<std::string>{"[UNK]"});
  CHECK(fast().tokenize("a\U0002B920b") == std::vector<std::string>{"a", "[UNK]", "b"});
  // an emoji of Unicode 15 (U+1FAE8 shaking face): [UNK] in Rust, dropped by Unicode 14
  CHECK(fast().tokenize("ok \U0001FAE8") == std::vector<std::string>{"ok", "[UNK]"});
  CHECK(slow().tokenize("ok \U0001FAE8") == std::vector<std::string>{"ok"});
  // a non-spacing mark newer than the library's tables (U+0898): a letter for it, stripped by
  // Unicode 14
  CHECK(fast().tokenize("x\u0898y") == std::vector<std::string>{"[UNK]"});
  CHECK(slow().tokenize("x\u0898y") == std::vector<std::string>{"x", "##y"});
  // punctuation new in Unicode 14 (U+2E55): not punctuation for the library
  CHECK(fast().tokenize("a\u2E55b") == std::vector<std::string>{"[UNK]"});
  CHECK(slow().tokenize("a\u2E55b") == std::vector<std::string>{"a", "[UNK]", "b"});
  // U+166D: punctuation in the library's old tables, a symbol (So) in Unicode 14
  CHECK(fast().tokenize("a\u166Db") == std::vector<std::string>{"a", "[UNK]", "b"});
  CHECK(slow().tokenize("a\u166Db") == std::vector<std::string>{"[UNK]"});
  // a letter of Unicode 16 with a lower case (U+A7CB -> U+0264): Rust lowers it; Unicode 14
  // has it unassigned and drops it
  CHECK(fast().tokenize("AB\uA7CB") == std::vector<std::string>{"[UNK]"});
  CHECK(slow().tokenize("AB\uA7CB") == std::vector<std::string>{"ab"});
}

TEST_CASE("pairs: [CLS] A [SEP] B [SEP] with token types 0 then 1, and key_padding for attend") {
  qkv::io::encode_options o;
  o.max_length = 10;
  o.padding = qkv::io::padding_strategy::max_length;
  const auto e = qkv::io::encode(fast(), "hello world", std::string_view("hi"), o);
  CHECK(e.tokens == std::vector<std::string>{"[CLS]", "hello", "world", "[SEP]", "hi", "[SEP]", "[PAD]",
                                             "[PAD]", "[PAD]", "[PAD]"});
  CHECK(e.token_type_ids == std::vector<std::int64_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  CHECK(e.key_padding() ==
        std::vector<bool>{false, false, false, false, false, false, true, true, true, true});
  CHECK(e.sequence_ids == std::vector<int>{-1, 0, 0, -1, 1, -1, -1, -1, -1, -1});
  // offsets are in each sequence's own text: "hi" is 0..2 of the pair
  CHECK(offsets_of(e.offsets) ==
        offsets_list{{0, 0}, {0, 5}, {6, 11}, {0, 0}, {0, 2}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}});
}

TEST_CASE("requests outside the stated limits are refused with a message") {
  qkv::io::encode_options o;
  o.truncation = qkv::io::truncation_strategy::longest_first;
  o.max_length = 2;
  CHECK_THROWS_WITH_AS((void)qkv::io::encode(fast(), "a", std::string_view("b"), o),
                       "max_length 2 is shorter than the 3 special tokens of a pair", std::invalid_argument);
  o.max_length = 2;
  CHECK(qkv::io::encode(fast(), "a b c", std::nullopt, o).tokens ==
        std::vector<std::string>{"[CLS]", "[SEP]"});
  o.truncation = qkv::io::truncation_strategy::none;
  o.padding = qkv::io::padding_strategy::max_length;
  o.max_length = (std::size_t{1} << 20) + 1;
  CHECK_THROWS_AS((void)qkv::io::encode(fast(), "a", std::nullopt, o), std::invalid_argument);
  // truncation with no max_length: bert-base-uncased's 512
  o = {};
  o.truncation = qkv::io::truncation_strategy::longest_first;
  std::string many;
  for (int i = 0; i < 600; ++i) many += "a ";
  CHECK(qkv::io::encode(fast(), many, std::nullopt, o).size() == 512);
}
