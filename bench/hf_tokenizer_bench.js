// hf_tokenizer_bench.js: the same measurement as tokenizer_bench.cpp for Hugging Face's Rust
// tokenizer through its Node binding (npm `tokenizers`, scripts/fixtures/hf/bert_tokenizer.js), on one
// thread (run with TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1): every line encoded by
// one encodeBatch call (the Rust library loops over the lines; no per-line call from
// JavaScript). The tokens are counted after the clock stops.
//   NODE_PATH=/tmp/hf/node_modules node bench/hf_tokenizer_bench.js TEXT.txt
'use strict';
const fs = require('fs');
const { load } = require('../scripts/hf/bert_tokenizer.js');

(async () => {
  const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l, 'utf8'), 0);
  const t0 = process.hrtime.bigint();
  const tok = load();
  const t1 = process.hrtime.bigint();
  const encs = await tok.encodeBatch(lines);
  const t2 = process.hrtime.bigint();
  let tokens = 0;
  for (const e of encs) tokens += e.getLength();
  const s = Number(t2 - t1) / 1e9;
  console.log(JSON.stringify({ impl: 'hf-tokenizers', version: require('tokenizers/package.json').version,
    load_ms: Number(t1 - t0) / 1e6, lines: lines.length, bytes, tokens, seconds: s,
    tokens_per_s: Math.round(tokens / s), mb_per_s: bytes / s / 1e6 }));
})();
