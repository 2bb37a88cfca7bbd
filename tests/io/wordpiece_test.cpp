// runtime tests of io/wordpiece.hpp and io/unicode.hpp in the slow flavor (the Python
// BertTokenizer, Unicode 14): BERT uncased tokenization with the real bert-base-uncased
// vocabulary (data/bert-base-uncased/vocab.txt). The fast flavor: tokenizer_hf_test.cpp.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/wordpiece.hpp>

namespace {

const qkv::io::wordpiece_tokenizer& bert() {
  static const qkv::io::wordpiece_tokenizer t(qkv::io::wordpiece_vocab::from_file(QKV_VOCAB),
                                              qkv::io::tokenizer_flavor::slow);
  return t;
}

std::vector<std::string> pieces(const std::string& text) { return bert().tokenize(text); }

}  // namespace

TEST_CASE("the tutorial's sentence gives the ids BERT gives") {
  // data/bert-base-uncased/README.md: [CLS] let ' s token ##ize something ? [SEP]
  const auto e = bert().encode("let's tokenize something?");
  CHECK(e.tokens ==
        std::vector<std::string>{"[CLS]", "let", "'", "s", "token", "##ize", "something", "?", "[SEP]"});
  CHECK(e.ids == std::vector<std::int64_t>{101, 2292, 1005, 1055, 19204, 4697, 2242, 1029, 102});
}

TEST_CASE("the vocabulary's known ids are where its README says") {
  const auto& v = bert().vocab();
  CHECK(v.size() == 30522);
  CHECK(v.id("[PAD]") == 0);
  CHECK(v.id("[UNK]") == 100);
  CHECK(v.id("[CLS]") == 101);
  CHECK(v.id("[SEP]") == 102);
  CHECK(v.id("[MASK]") == 103);
  CHECK(v.token(2292) == "let");
  CHECK_THROWS_AS((void)v.token(30522), std::out_of_range);
  CHECK_THROWS_AS((void)v.token(-1), std::out_of_range);
}

TEST_CASE("empty and blank input is [CLS] [SEP]") {
  CHECK(bert().encode("").ids == std::vector<std::int64_t>{101, 102});
  CHECK(bert().encode(" \t\n\r\u3000").ids == std::vector<std::int64_t>{101, 102});
  // only control characters: they are dropped
  CHECK(bert().encode(std::string("\x01\x7f\0", 3) + "\u200b").ids == std::vector<std::int64_t>{101, 102});
}

TEST_CASE("upper case is lowered and accents are stripped") {
  // É -> NFD E + U+0301 -> lower e, the accent (Mn) dropped
  CHECK(pieces("CAFÉ") == std::vector<std::string>{"cafe"});
  CHECK(pieces("Crème brûlée") == std::vector<std::string>{"cr", "##eme", "br", "##ule", "##e"});
  // İ lowers to i + U+0307, and the dot (Mn) goes with the accents
  CHECK(pieces("İstanbul") == std::vector<std::string>{"istanbul"});
  // one character at a time, as Hugging Face lowers: a final Σ becomes σ, not ς
  CHECK(pieces("ΟΔΟΣ") == std::vector<std::string>{"ο", "##δ", "##ο", "##σ"});
}

TEST_CASE("punctuation splits words, including BERT's ASCII symbols") {
  CHECK(pieces("a,b") == std::vector<std::string>{"a", ",", "b"});
  // $ ^ ` ~ | are not Unicode punctuation (they are symbols), but BERT splits on them
  CHECK(pieces("a$b^c`d~e|f") ==
        std::vector<std::string>{"a", "$", "b", "^", "c", "`", "d", "~", "e", "|", "f"});
  // U+2014 EM DASH is Pd; « » are Pi/Pf
  CHECK(pieces("x—y«z»") == std::vector<std::string>{"x", "—", "y", "«", "z", "»"});
}

TEST_CASE("CJK ideographs are words of their own and Hangul is not") {
  // 中 and 文 are in the vocabulary; each ideograph is its own word, even without spaces
  CHECK(pieces("中文") == std::vector<std::string>{"中", "文"});
  CHECK(pieces("a中b") == std::vector<std::string>{"a", "中", "b"});
  // Hangul syllables decompose (NFD) into jamo and stay one word: 한 -> ᄒ ᅡ ᆫ
  CHECK(pieces("한") == std::vector<std::string>{"\u1112", "##\u1161", "##\u11AB"});
}

TEST_CASE("a word with no match is [UNK], and so is a word longer than 100 code points") {
  // ☃ (U+2603, a symbol, So) is kept as a letter would be, and no piece matches it
  CHECK(pieces("☃") == std::vector<std::string>{"[UNK]"});
  CHECK(pieces("a☃") == std::vector<std::string>{"[UNK]"});
  CHECK(pieces(std::string(100, 'a')).front() != "[UNK]");
  CHECK(pieces(std::string(101, 'a')) == std::vector<std::string>{"[UNK]"});
  // counted in code points, after accent stripping: 100 x "é" (2 bytes, or 2 code points
  // before stripping) is 100 code points
  std::string e100;
  for (int i = 0; i < 100; ++i) e100 += "é";
  CHECK(pieces(e100).front() != "[UNK]");
  CHECK(pieces(e100 + "é") == std::vector<std::string>{"[UNK]"});
}

TEST_CASE("special tokens written in the text are kept whole, case-sensitively") {
  CHECK(bert().encode("a[MASK]b").ids == std::vector<std::int64_t>{101, 1037, 103, 1038, 102});
  CHECK(pieces("[cls]") == std::vector<std::string>{"[", "cl", "##s", "]"});
}

TEST_CASE("invalid UTF-8 is refused with its byte offset") {
  using qkv::io::unicode::invalid_utf8;
  CHECK_THROWS_WITH_AS((void)bert().encode("ab\xff"), doctest::Contains("byte 2"), invalid_utf8);
  CHECK_THROWS_AS((void)bert().encode("\xc3"), invalid_utf8);              // cut short
  CHECK_THROWS_AS((void)bert().encode("\xc0\xaf"), invalid_utf8);          // overlong '/'
  CHECK_THROWS_AS((void)bert().encode("\xe0\x80\xaf"), invalid_utf8);      // overlong '/'
  CHECK_THROWS_AS((void)bert().encode("\xed\xa0\x80"), invalid_utf8);      // surrogate U+D800
  CHECK_THROWS_AS((void)bert().encode("\xf4\x90\x80\x80"), invalid_utf8);  // U+110000
  CHECK_THROWS_AS((void)bert().encode("\x80"), invalid_utf8);              // stray continuation
  CHECK_THROWS_AS((void)bert().encode("\xe2\x82x"), invalid_utf8);         // broken sequence
}

TEST_CASE("NFD decomposes fully and puts combining marks in canonical order") {
  using qkv::io::unicode::nfd;
  // ǖ U+01D6 -> ü U+00FC + U+0304 -> u + U+0308 + U+0304
  CHECK(nfd(U"\u01D6") == U"u\u0308\u0304");
  // 한 U+D55C: S = 0xD55C - 0xAC00 = 10588; L = 10588 / 588 = 18 -> U+1100 + 18 = U+1112;
  // V = (10588 % 588) / 28 = 4 / 28 = 0 -> U+1161; T = 10588 % 28 = 4 -> U+11A7 + 4 = U+11AB
  CHECK(nfd(U"\uD55C") == U"\u1112\u1161\u11AB");
  // 각 U+AC01: S = 1; L U+1100, V U+1161, T = 1 -> U+11A8
  CHECK(nfd(U"\uAC01") == U"\u1100\u1161\u11A8");
  // a + dot below (ccc 220) after acute (ccc 230) reorders: 220 first
  CHECK(nfd(U"a\u0301\u0323") == U"a\u0323\u0301");
  // Å U+212B ANGSTROM SIGN -> U+00C5 -> A + U+030A
  CHECK(nfd(U"\u212B") == U"A\u030A");
}

TEST_CASE("the Unicode classes follow BERT's definitions") {
  using qkv::io::unicode::char_class;
  using qkv::io::unicode::classify;
  CHECK(classify(U'a') == char_class::other);
  CHECK(classify(U' ') == char_class::whitespace);
  CHECK(classify(U'\t') == char_class::whitespace);
  CHECK(classify(0x3000) == char_class::whitespace);  // ideographic space, Zs
  CHECK(classify(0x2028) == char_class::whitespace);  // line separator: str.split() splits there
  CHECK(classify(0x0001) == char_class::control);
  CHECK(classify(0x200B) == char_class::control);      // zero width space is Cf
  CHECK(classify(0xE000) == char_class::control);      // private use, Co
  CHECK(classify(0x0378) == char_class::control);      // unassigned, Cn
  CHECK(classify(U'$') == char_class::punctuation);    // Sc, but BERT's ASCII rule
  CHECK(classify(0x00BF) == char_class::punctuation);  // ¿ Po
  CHECK(classify(0x0301) == char_class::mark);
  CHECK(classify(0x10FFFF) == char_class::control);
}

TEST_CASE("every fixture case tokenizes as the reference algorithm does") {
  // tests/data/wordpiece_cases.json: 327 texts and the tokens that the Python transcription of
  // BertTokenizer (scripts/fixtures/wordpiece_fixtures.py) gives with Python's own unicodedata
  std::ifstream in(std::string(QKV_TEST_DATA) + "/wordpiece_cases.json");
  REQUIRE(in);
  const auto fixture = nlohmann::json::parse(in);
  CHECK(fixture["unicode_version"] == qkv::io::unicode_data::version);
  const auto& cases = fixture["cases"];
  REQUIRE(cases.size() >= 300);
  int failures = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto e = bert().encode(text);
    const auto expected_tokens = c["tokens"].get<std::vector<std::string>>();
    const auto expected_ids = c["ids"].get<std::vector<std::int64_t>>();
    if (e.tokens != expected_tokens || e.ids != expected_ids) {
      ++failures;
      std::ostringstream got;
      for (const auto& t : e.tokens) got << t << " ";
      std::ostringstream want;
      for (const auto& t : expected_tokens) want << t << " ";
      INFO("text: " << c["text"].dump());
      INFO("got:      " << got.str());
      INFO("expected: " << want.str());
      CHECK(e.tokens == expected_tokens);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("every code point is classified, lowered and decomposed as Python does") {
  // tests/data/wordpiece_codepoints.json: for each block of 4096 code points, a hash of the
  // basic tokenizer's words for "a" + c + U+0301 + "Z" (make_wordpiece_fixtures.py --codepoints)
  std::ifstream in(std::string(QKV_TEST_DATA) + "/wordpiece_codepoints.json");
  REQUIRE(in);
  const auto fixture = nlohmann::json::parse(in);
  const auto& hashes = fixture["block_hashes"];
  REQUIRE(hashes.size() == 0x110000 / 4096);
  auto fnv1a = [](std::string_view data, std::uint64_t h) {
    for (unsigned char b : data) h = (h ^ b) * 0x100000001B3ull;
    return h;
  };
  int bad_blocks = 0;
  for (std::uint32_t block = 0; block < 0x110000 / 4096; ++block) {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (char32_t cp = block * 4096; cp < (block + 1) * 4096; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string text = "a";
      qkv::io::unicode::append_utf8(cp, text);
      text += "\u0301Z";
      for (const auto& w : bert().basic_tokenize(text)) h = fnv1a(w + "\x1f", h);
      h = fnv1a("\x1e", h);
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    if (hashes[block].get<std::string>() != hex) {
      ++bad_blocks;
      INFO("block U+" << std::hex << block * 4096);
      CHECK(hashes[block].get<std::string>() == std::string(hex));
    }
  }
  CHECK(bad_blocks == 0);
}

namespace {
using qkv::io::vocab_error;
using qkv::io::wordpiece_vocab;
}  // namespace

TEST_CASE("a small vocabulary reads one token per line, \\n or \\r\\n") {
  const auto v = wordpiece_vocab::from_string("[PAD]\r\n[UNK]\n[CLS]\n[SEP]\nhello\n##s");
  CHECK(v.size() == 6);
  CHECK(v.id("[UNK]") == 1);
  CHECK(v.id("##s") == 5);
  CHECK_FALSE(v.find("world").has_value());
  const qkv::io::wordpiece_tokenizer t(v, qkv::io::tokenizer_flavor::slow);
  CHECK(t.encode("Hellos, world").tokens ==
        std::vector<std::string>{"[CLS]", "hello", "##s", "[UNK]", "[UNK]", "[SEP]"});
}

TEST_CASE("an unusable vocabulary is refused with a message naming the line") {
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_string("", "v.txt"), "v.txt is empty: it has no tokens",
                       vocab_error);
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_string("[UNK]\n[CLS]\n[SEP]\na\nb\na\n", "v.txt"),
                       "v.txt line 6: duplicate token \"a\" (first on line 4)", vocab_error);
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_string("[CLS]\n[SEP]\na\n", "v.txt"),
                       "v.txt lacks the special token [UNK]", vocab_error);
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_string("[UNK]\n[SEP]\n", "v.txt"),
                       "v.txt lacks the special token [CLS]", vocab_error);
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_string("[UNK]\n[CLS]\n", "v.txt"),
                       "v.txt lacks the special token [SEP]", vocab_error);
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_string("[UNK]\n\n[CLS]\n[SEP]\n", "v.txt"),
                       "v.txt line 2 is empty (one token per line, no blank lines)", vocab_error);
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_string("[UNK]\n[CLS]\n[SEP]\nd\xe9j\xe0\n", "v.txt"),
                       doctest::Contains("v.txt line 4 is not valid UTF-8"), qkv::io::unicode::invalid_utf8);
  CHECK_THROWS_WITH_AS((void)wordpiece_vocab::from_file("/nonexistent/vocab.txt"),
                       "cannot open the vocabulary file '/nonexistent/vocab.txt'", vocab_error);
}
