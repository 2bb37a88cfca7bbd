// derive_tables.js: asks Hugging Face's Rust tokenizer (npm `tokenizers`, see bert_tokenizer.js)
// what it does with every Unicode code point, and writes one line per code point:
//   CP<TAB>NORMALIZED<TAB>PRETOKENIZER<TAB>BREAK
// CP hex; NORMALIZED the normalizer's output for the code point alone, as hex code points
// joined by '.', '-' when empty; PRETOKENIZER the pre-tokenizer's class of the code point
// ('w' whitespace: "a"+c+"b" splits into a b; 'p' punctuation: a c b; 'o' other: one word);
// BREAK, for a code point whose output is empty, whether it still separates two combining
// characters in canonical ordering ('1'), or vanishes before it ('0'): the normalizer's output
// for U+1D16D c U+1D165 (canonical classes 226 and 216) keeps their order when c breaks the run.
// Surrogates (U+D800..U+DFFF) are not characters in UTF-8 and are skipped.
//   NODE_PATH=/tmp/hf/node_modules node scripts/hf/derive_tables.js > /tmp/hf/derived.tsv
'use strict';
const { load, version } = require('./bert_tokenizer.js');

const tok = load();
const norm = tok.getNormalizer();
const pre = tok.getPreTokenizer();
const hex = (s) => (s.length === 0 ? '-' : Array.from(s, (c) => c.codePointAt(0).toString(16).toUpperCase()).join('.'));
const out = [];
out.push(`# tokenizers ${version()} (npm), bert-base-uncased settings; scripts/hf/derive_tables.js`);
for (let cp = 0; cp < 0x110000; ++cp) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;
  const c = String.fromCodePoint(cp);
  const n = norm.normalizeString(c);
  const words = pre.preTokenizeString('a' + c + 'b').map((w) => w[0]);
  let k;
  if (words.length === 1 && words[0] === 'a' + c + 'b') k = 'o';
  else if (words.length === 2 && words[0] === 'a' && words[1] === 'b') k = 'w';
  else if (words.length === 3 && words[0] === 'a' && words[1] === c && words[2] === 'b') k = 'p';
  else throw new Error(`U+${cp.toString(16)}: unexpected pre-tokenization ${JSON.stringify(words)}`);
  let brk = '-';
  if (n.length === 0) {
    const r = norm.normalizeString('\u{1D16D}' + c + '\u{1D165}');
    if (r === '\u{1D16D}\u{1D165}') brk = '1';
    else if (r === '\u{1D165}\u{1D16D}') brk = '0';
    else throw new Error(`U+${cp.toString(16)}: unexpected ordering ${hex(r)}`);
  }
  out.push(`${cp.toString(16).toUpperCase()}\t${hex(n)}\t${k}\t${brk}`);
}
process.stdout.write(out.join('\n') + '\n');
