// make_fixtures.js: what Hugging Face's Rust tokenizer (npm `tokenizers`, bert_tokenizer.js)
// gives, kept as test data so that the tests need no npm.
//   NODE_PATH=/tmp/hf/node_modules node scripts/hf/make_fixtures.js codepoints > tests/data/hf_codepoints.json
//   NODE_PATH=/tmp/hf/node_modules node scripts/hf/make_fixtures.js encodings > tests/data/hf_encodings.json
//
// codepoints: EVERY code point (U+0000..U+10FFFF but the surrogates) in three texts,
// "a" c "b", " " c " " and "X" c U+0301 "y", encoded with [CLS] and [SEP]; for each block of
// 4096 code points, the 32-bit FNV-1a hash of the serialization "ID START END," per token,
// ";" per text (START END: the offsets in code points); and, to read, the tokens of the three
// texts for the first code point of each block and for a list of code points worth seeing.
// encodings: texts and pairs under max_length, truncation strategies and padding, with every
// field of the library's Encoding (ids, type ids, tokens, offsets, attention and special
// tokens masks), and the library's error message where it refuses.
'use strict';
const { load, version } = require('./bert_tokenizer.js');

const CONTEXTS = [(c) => 'a' + c + 'b', (c) => ' ' + c + ' ', (c) => 'X' + c + '\u0301y'];

function fnv1a(h, s) {
  for (let i = 0; i < s.length; ++i) {
    h ^= s.charCodeAt(i);  // ASCII only
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

function serialize(e) {
  const ids = e.getIds();
  const off = e.getOffsets();
  let s = '';
  for (let i = 0; i < ids.length; ++i) s += `${ids[i]} ${off[i][0]} ${off[i][1]},`;
  return s + ';';
}

function readable(e) {
  return { tokens: e.getTokens(), ids: e.getIds(), offsets: e.getOffsets() };
}

async function codepoints() {
  const tok = load();
  const notable = [0x0, 0x9, 0xb, 0x1c, 0x85, 0xa0, 0xad, 0x130, 0x1e9e, 0x2126, 0x212a, 0x1fef, 0x2028,
    0x200b, 0x0378, 0x0898, 0x2b820, 0x2b91f, 0x2b920, 0x3000, 0xe000, 0xfffd, 0xf900, 0x1f600,
    0x1fae8, 0x1f6dc, 0xac00, 0x1d15f, 0x10ffff];
  const blocks = [];
  const samples = [];
  for (let block = 0; block < 0x110; ++block) {
    const texts = [];
    for (let cp = block * 4096; cp < (block + 1) * 4096; ++cp) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      for (const f of CONTEXTS) texts.push(f(c));
    }
    const encs = await tok.encodeBatch(texts);
    let h = 0x811c9dc5;
    for (const e of encs) h = fnv1a(h, serialize(e));
    blocks.push(h.toString(16).padStart(8, '0'));
  }
  const first = [];
  for (let block = 0; block < 0x110; ++block) first.push(block === 0xd ? 0xe000 : block * 4096);
  for (const cp of [...new Set([...first, ...notable])].sort((a, b) => a - b)) {
    const c = String.fromCodePoint(cp);
    const out = [];
    for (const f of CONTEXTS) out.push({ text: f(c), ...readable(await tok.encode(f(c))) });
    samples.push({ code_point: cp, encodings: out });
  }
  return { library: `tokenizers ${version()} (npm)`, script: 'scripts/hf/make_fixtures.js codepoints',
    contexts: ['a c b', '" " c " "', 'X c U+0301 y'], hash: 'fnv1a32', block_hashes: blocks, samples };
}

const TEXTS = [
  "let's tokenize something?",
  'The animal didn\'t cross the street because it was too tired.',
  'Hello, World! This is [MASK] and [SEP] inside text.',
  'Crème BRÛLÉE au café — naïve façade',
  '東京は日本の首都です。北京也是。',
  '한국어 문장입니다',
  'Привет, мир! Ελληνικά ΟΔΟΣ',
  'emoji 😀👍🏽 and 🫨 new ones',
  'tabs\tand\nnewlines\r\n  spaces\u00a0nbsp\u3000ideographic',
  'control\u0001chars\u200bzero\u200dwidth\ufeffbom',
  'unassigned\u0378here and private\ue000use',
  'a'.repeat(101) + ' short',
  'supercalifragilisticexpialidocious antidisestablishmentarianism',
  'x'.repeat(30) + ' ' + 'word '.repeat(20),
  '',
  '   ',
  '[CLS][SEP][UNK][PAD][MASK]',
  'İstanbul ǅemal ﬁnance Ⅻ ½ ㎏',
  'U+2B820 \u{2B820} and U+2B920 \u{2B920}',
  'the quick brown fox jumps over the lazy dog '.repeat(3),
];

async function encodings() {
  const cases = [];
  const add = async (text, pair, opts) => {
    const tok = load();
    const c = { text, pair, ...opts };
    try {
      if (opts.truncation) tok.setTruncation(opts.max_length, { strategy: opts.truncation });
      if (opts.padding === 'max_length') tok.setPadding({ maxLength: opts.max_length });
      const e = await tok.encode(text, pair);
      c.expected = {
        ids: e.getIds(), tokens: e.getTokens(), token_type_ids: e.getTypeIds(),
        attention_mask: e.getAttentionMask(), special_tokens_mask: e.getSpecialTokensMask(), offsets: e.getOffsets(),
      };
    } catch (err) {
      c.error = String(err.message || err);
    }
    cases.push(c);
  };
  const strategies = { longest_first: 'LongestFirst', only_first: 'OnlyFirst', only_second: 'OnlySecond' };
  for (const t of TEXTS) await add(t, null, {});
  for (let i = 0; i < TEXTS.length; ++i) {
    const a = TEXTS[i];
    const b = TEXTS[(i * 7 + 3) % TEXTS.length];
    await add(a, b, {});
    for (const max of [2, 3, 4, 5, 7, 8, 12, 16, 31, 64]) {
      for (const [name, strat] of Object.entries(strategies)) {
        await add(a, b, { max_length: max, truncation: strat, truncation_name: name });
        if (max === 8 || max === 16) await add(a, null, { max_length: max, truncation: strat, truncation_name: name });
      }
      if (max >= 8) {
        await add(a, b, { max_length: max, truncation: 'LongestFirst', truncation_name: 'longest_first', padding: 'max_length' });
        await add(a, null, { max_length: max, padding: 'max_length' });
      }
    }
  }
  // the early exit of truncation (a sequence stops being tokenized after max_length tokens)
  // decides which sequence longest_first sees as the longer: lengths 0..7 against 0..7
  const letters = (from, n) => Array.from({ length: n }, (_, i) => String.fromCharCode(from + i)).join(' ');
  for (let n1 = 0; n1 <= 7; ++n1) {
    for (let n2 = 0; n2 <= 7; ++n2) {
      for (const max of [4, 5, 6, 9]) {
        await add(letters(97, n1), letters(104, n2), { max_length: max, truncation: 'LongestFirst', truncation_name: 'longest_first' });
      }
    }
  }
  // padding to the longest of a batch: each encoding padded with the library's Encoding.pad
  const batches = [];
  for (let i = 0; i + 3 <= TEXTS.length; i += 3) {
    const tok = load();
    const items = [[TEXTS[i], null], [TEXTS[i + 1], TEXTS[i + 2]], [TEXTS[i + 2], null]];
    const encs = [];
    for (const [a, b] of items) encs.push(await tok.encode(a, b));
    const longest = Math.max(...encs.map((e) => e.getLength()));
    for (const e of encs) e.pad(longest, { padId: 0, padTypeId: 0, padToken: '[PAD]' });
    batches.push({ items: items.map(([text, pair]) => ({ text, pair })),
      expected: encs.map((e) => ({ ids: e.getIds(), tokens: e.getTokens(), token_type_ids: e.getTypeIds(),
        attention_mask: e.getAttentionMask(), special_tokens_mask: e.getSpecialTokensMask(), offsets: e.getOffsets() })) });
  }
  for (const c of cases) {
    if (c.truncation) c.truncation = c.truncation_name;
    delete c.truncation_name;
  }
  return { library: `tokenizers ${version()} (npm)`, script: 'scripts/hf/make_fixtures.js encodings', cases, batches };
}

(async () => {
  const what = process.argv[2];
  const out = what === 'codepoints' ? await codepoints() : what === 'encodings' ? await encodings() : null;
  if (!out) throw new Error('usage: make_fixtures.js codepoints|encodings');
  process.stdout.write(JSON.stringify(out) + '\n');
})();
