#!/usr/bin/env python3
"""Make tests/data/wordpiece_cases.json: expected BERT uncased tokens for a few hundred texts.

No transformers package is installable here (Debian has no python3-transformers), so the
expected tokens come from this file: a line-by-line Python transcription of the reference
algorithm, Hugging Face's slow BertTokenizer(do_lower_case=True) (PreTrainedTokenizer.tokenize:
per-character lower-casing and special-token splitting; BasicTokenizer: _clean_text,
_tokenize_chinese_chars, NFC, whitespace_tokenize, _run_strip_accents, _run_split_on_punc;
WordpieceTokenizer with max_input_chars_per_word=100), itself a descendant of Google's
tokenization.py. It uses Python's own unicodedata and str.lower, so it checks the C++ tables
(scripts/gen_unicode_tables.py) and the C++ code independently.

    python3 tests/data/make_wordpiece_fixtures.py data/bert-base-uncased/vocab.txt \
        > tests/data/wordpiece_cases.json
    python3 tests/data/make_wordpiece_fixtures.py --codepoints > tests/data/wordpiece_codepoints.json
"""
import json
import random
import re
import sys
import unicodedata

SPECIALS = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]


def load_vocab(path):
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for index, token in enumerate(f):
            vocab[token.rstrip("\n")] = index
    return vocab


def is_whitespace(ch):
    if ch in " \t\n\r":
        return True
    return unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def whitespace_tokenize(text):
    text = text.strip()
    return text.split() if text else []


def basic_tokenize(text):
    # _clean_text
    text = "".join(" " if is_whitespace(c) else c for c in text
                   if not (ord(c) == 0 or ord(c) == 0xFFFD or is_control(c)))
    # _tokenize_chinese_chars
    text = "".join(f" {c} " if is_chinese_char(ord(c)) else c for c in text)
    text = unicodedata.normalize("NFC", text)
    out = []
    for token in whitespace_tokenize(text):
        token = token.lower()
        token = "".join(c for c in unicodedata.normalize("NFD", token)
                        if unicodedata.category(c) != "Mn")
        # _run_split_on_punc
        words, start_new = [], True
        for c in token:
            if is_punctuation(c):
                words.append([c])
                start_new = True
            else:
                if start_new:
                    words.append([])
                start_new = False
                words[-1].append(c)
        out.extend("".join(w) for w in words)
    return whitespace_tokenize(" ".join(out))


def wordpiece(vocab, text):
    out = []
    for token in whitespace_tokenize(text):
        chars = list(token)
        if len(chars) > 100:
            out.append("[UNK]")
            continue
        start, subs, bad = 0, [], False
        while start < len(chars):
            end, cur = len(chars), None
            while start < end:
                s = "".join(chars[start:end])
                if start > 0:
                    s = "##" + s
                if s in vocab:
                    cur = s
                    break
                end -= 1
            if cur is None:
                bad = True
                break
            subs.append(cur)
            start = end
        out.extend(["[UNK]"] if bad else subs)
    return out


def tokenize(vocab, text):
    # PreTrainedTokenizer.tokenize: lower-case every character except inside special tokens
    pattern = "(" + "|".join(re.escape(s) for s in SPECIALS) + ")|(.+?)"
    text = re.sub(pattern, lambda m: m.groups()[0] or m.groups()[1].lower(), text)
    # split on special tokens (no special token is a prefix of another)
    parts = re.split("(" + "|".join(re.escape(s) for s in SPECIALS) + ")", text)
    tokens = []
    for p in parts:
        if p in SPECIALS:
            tokens.append(p)
        elif p:
            for w in basic_tokenize(p):
                tokens.extend(wordpiece(vocab, w))
    return ["[CLS]"] + tokens + ["[SEP]"]


HAND = [
    "let's tokenize something?",
    "",
    "   ",
    "Hello, World!",
    "The quick brown fox jumps over the lazy dog.",
    "unaffable",
    "Crème brûlée at the café, naïve façade, Ångström, résumé.",
    "ÀÉÎÕÜ àéîõü Ññ Çç Øø Ææ Œœ ß",
    "Straße İstanbul ΣΟΦΙΑ ΟΔΟΣ Σ",
    "Ελληνικά: Καλημέρα κόσμε",
    "Русский текст: Привет, мир! Ёжик",
    "中文分词测试：我爱北京天安门。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 텍스트 안녕하세요",
    "mixed中文and English词语",
    "emoji 😀🎉👍🏽 and ❤️ hearts",
    "tab\tnew\nline\rcarriage",
    "control\x00chars\x01\x02\x7f\u200b\u200d\ufeffhere\ufffd",
    "no\u00a0break\u2003em\u3000ideographic\u2028line\u2029para",
    "$100 @ 5% ^caret^ `tick` ~tilde~ |pipe| {brace} [bracket] <angle>",
    "e-mail: someone@example.com, url: https://example.org/a?b=c&d=e#f",
    "«guillemets» „quotes“ ‘single’ “double” — dash – en … ellipsis",
    "¿Qué tal? ¡Muy bien!",
    "don't won't can't it's I'm you're",
    "[CLS] already has [SEP] tokens and [MASK] and [PAD] and [UNK]",
    "[cls] lower-case specials are not special [Sep]",
    "a[MASK]b",
    "supercalifragilisticexpialidocious",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 100,
    "a" * 101,
    "é" * 100,
    "é" * 101,
    "ab" * 60,
    "x" * 99 + "!" + "y" * 99,
    "1234567890 3.14159 1,000,000 2nd 3rd 4th",
    "covid-19 u.s.a. e.g. i.e. etc.",
    "ﬁ ligature ﬀ ﬃ Ⅻ ① ℌ",
    "Ω Kelvin K Å Ångström",
    "ǅ ǈ ǋ ǲ titlecase digraphs",
    "Ａｂｃ fullwidth ＡＢＣ １２３",
    "z̤̈ a᷎ combining: a\u0301\u0300 q\u0323\u0307",
    "עברית שלום",
    "العربية مرحبا بالعالم",
    "हिन्दी नमस्ते दुनिया",
    "ไทย สวัสดีครับ",
    "ქართული",
    "𝓗𝓮𝓵𝓵𝓸 mathematical script",
    "🇫🇷 flags 🇯🇵",
    "漢字𠀀𪜀",
    "\u0130i\u0307",
    "ǰ ΐ ΰ և ẖ",
    "The U+0345 iota: ᾳ ᾼ ῳ",
    "Ⓐ Ⓑ ⓒ",
    "ꭰ Cherokee Ᏸ ᏸ",
    "ⅰⅱⅲ Ⅰ Ⅱ Ⅲ",
    "\u1e9e capital sharp s",
    "hello     world",
    "   leading and trailing   ",
    "?!.,;:",
    "##ing ##s",
    "####",
    "xyzzyqwrtp",
    "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
    "\u1d165\u1d166 musical stems \U0001D165\U0001D16D\U0001D166",
    "Ꙋ ꙋ Ᲊ",
    "\U000E0041 tag \U000F0000 private \uE000",
]

POOLS = [
    "the of and to in is was for on that with as by he at from his it an were are which this be "
    "or has had but not they their one also first new after who two its been more her",
    "café naïve résumé fiancée über straße élève déjà vu piñata jalapeño smörgåsbord",
    "Москва Санкт-Петербург наука язык мир Ёлка",
    "Αθήνα φιλοσοφία λόγος ΛΟΓΟΣ Σωκράτης",
    "東京 北京 上海 漢字 中文 日本 学习 語言",
    "ひらがな カタカナ ソニー",
    "서울 한국어 대한민국",
    "😀 😂 🎉 🚀 ❤️ 👍🏽 🤖",
    ", . ! ? ; : ' \" ( ) [ ] { } - _ + = * & ^ % $ # @ ~ ` | \\ / < > … — – « »",
    "tokenization transformers attention embedding unbelievable preprocessing "
    "multiheaded ungrammaticality reconfigurable",
    "2023 3.14 10,000 1st #1 @user $5 50% 9am",
]

BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
          (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF),
          (0x1E00, 0x1FFF), (0x2000, 0x206F), (0x2100, 0x218F), (0x2460, 0x24FF),
          (0x3000, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
          (0xF900, 0xFAFF), (0xFB00, 0xFB4F), (0xFE00, 0xFE6F), (0xFF00, 0xFFEF),
          (0x1D400, 0x1D7FF), (0x1F300, 0x1F6FF), (0x20000, 0x2A6DF), (0x0, 0x1F),
          (0xE0000, 0xE007F), (0x10FFF0, 0x10FFFF)]


def generated(rng, n):
    out = []
    for _ in range(n):
        kind = rng.randrange(3)
        if kind == 0:
            words = [rng.choice(rng.choice(POOLS).split()) for _ in range(rng.randrange(1, 12))]
            seps = [" ", " ", " ", "", "\t", "\n", "\u3000", "-"]
            out.append("".join(w + rng.choice(seps) for w in words))
        elif kind == 1:
            chars = []
            for _ in range(rng.randrange(1, 30)):
                lo, hi = rng.choice(BLOCKS)
                cp = rng.randint(lo, hi)
                if 0xD800 <= cp <= 0xDFFF:
                    continue
                chars.append(chr(cp))
                if rng.random() < 0.2:
                    chars.append(" ")
            out.append("".join(chars))
        else:
            w = rng.choice(rng.choice(POOLS).split())
            length = rng.choice([95, 99, 100, 101, 102, 150])
            s = (w * (length // max(len(w), 1) + 1))[:length]
            if rng.random() < 0.5:
                s = s.upper()
            out.append(s + " " + rng.choice(rng.choice(POOLS).split()))
    return out


def fnv1a(data, h):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def codepoint_hashes():
    """Every code point (surrogates aside) in the context "a" + c + U+0301 + "Z": the words
    of the basic tokenizer, hashed (FNV-1a 64 over UTF-8, words ended by 0x1F, texts by 0x1E),
    one hash per block of 4096 code points."""
    hashes = []
    for block in range(0x110000 // 4096):
        h = 0xCBF29CE484222325
        for cp in range(block * 4096, (block + 1) * 4096):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            text = "".join(c.lower() for c in "a" + chr(cp) + "\u0301Z")
            for w in basic_tokenize(text):
                h = fnv1a(w.encode("utf-8") + b"\x1f", h)
            h = fnv1a(b"\x1e", h)
        hashes.append(f"{h:016x}")
    return hashes


def main():
    if sys.argv[1:2] == ["--codepoints"]:
        json.dump({"generated_by": "tests/data/make_wordpiece_fixtures.py --codepoints",
                   "unicode_version": unicodedata.unidata_version,
                   "context": "a + code point + U+0301 + Z",
                   "block_hashes": codepoint_hashes()}, sys.stdout, indent=0)
        sys.stdout.write("\n")
        return
    vocab = load_vocab(sys.argv[1])
    texts = HAND + generated(random.Random(2024), 260)
    cases = []
    for t in texts:
        tokens = tokenize(vocab, t)
        ids = [vocab.get(tok, vocab["[UNK]"]) for tok in tokens]
        cases.append({"text": t, "tokens": tokens, "ids": ids})
    # one case per line, so that a diff shows which cases changed
    w = sys.stdout.write
    w('{"generated_by": "tests/data/make_wordpiece_fixtures.py",\n')
    w(f'"unicode_version": "{unicodedata.unidata_version}",\n"cases": [\n')
    w(",\n".join(json.dumps(c, ensure_ascii=True) for c in cases))
    w("\n]}\n")


if __name__ == "__main__":
    main()
