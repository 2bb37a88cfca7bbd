// check_ccc.js: which canonical combining classes Hugging Face's Rust normalizer uses when it
// puts combining characters in canonical order (NFD). Reads "HEX CCC" lines on stdin: the
// characters that can survive the normalizer with a nonzero class in Python's unicodedata.
// For every ordered pair a b of them it asks for the normalizer's output of "x" a b and
// records whether it swapped them. A character that never swaps with any other is a starter
// (class 0) for the library (its Unicode tables predate it); the rest must swap exactly when
// 0 < ccc(b) < ccc(a), or the script fails. Writes the code points of class 0, one per line.
'use strict';
const { load } = require('./bert_tokenizer.js');

const norm = load().getNormalizer();
const input = require('fs').readFileSync(0, 'utf8').trim().split('\n').filter((l) => l);
const c = input.map((l) => l.split(' ')).map(([h, k]) => [parseInt(h, 16), Number(k)]);
const s = (x) => String.fromCodePoint(x);
const swapped = (a, b) => norm.normalizeString('x' + s(a) + s(b)) === 'x' + s(b) + s(a);
const swaps = new Map(c.map(([a]) => [a, 0]));
const table = new Map();
for (const [a] of c) {
  for (const [b] of c) {
    if (a === b) continue;
    const w = swapped(a, b);
    table.set(a + ',' + b, w);
    if (w) { swaps.set(a, swaps.get(a) + 1); swaps.set(b, swaps.get(b) + 1); }
  }
}
const ccc = new Map(c.map(([a, k]) => [a, swaps.get(a) === 0 ? 0 : k]));
for (const [a] of c) {
  for (const [b] of c) {
    if (a === b) continue;
    const expect = ccc.get(b) > 0 && ccc.get(b) < ccc.get(a);
    if (table.get(a + ',' + b) !== expect) throw new Error(`U+${a.toString(16)} U+${b.toString(16)}: order not explained by the classes`);
  }
}
process.stdout.write(c.filter(([a]) => ccc.get(a) === 0).map(([a]) => a.toString(16).toUpperCase()).join('\n') + '\n');
