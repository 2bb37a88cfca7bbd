// bert_tokenizer.js: Hugging Face's fast tokenizer for bert-base-uncased, built in Node from
// data/bert-base-uncased/vocab.txt with the settings of the model's tokenizer.json
// (BertNormalizer clean_text, handle_chinese_chars, strip_accents null (follows lowercase),
// lowercase; BertPreTokenizer; WordPiece [UNK], "##", max_input_chars_per_word 100; the five
// special tokens as added tokens, not normalized; TemplateProcessing [CLS] A [SEP] / [CLS] A
// [SEP] B:1 [SEP]:1). It needs the npm package `tokenizers` (the Node binding of the Rust
// library); set NODE_PATH to the node_modules folder that holds it, e.g.
//   (cd /tmp/hf && npm init -y && npm install tokenizers)
//   NODE_PATH=/tmp/hf/node_modules node scripts/hf/derive_tables.js ...
// Only the scripts in scripts/hf and bench/ use it: tests and CI read the committed outputs.
'use strict';
const fs = require('fs');
const path = require('path');
const hf = require('tokenizers');

function vocabFile() {
  return path.join(__dirname, '..', '..', 'data', 'bert-base-uncased', 'vocab.txt');
}

function tokenizerJson(vocabPath) {
  const lines = fs.readFileSync(vocabPath || vocabFile(), 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const vocab = {};
  lines.forEach((w, i) => { vocab[w.replace(/\r$/, '')] = i; });
  const added = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map((s) => ({
    id: vocab[s], content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  const special = (id, type) => ({ SpecialToken: { id, type_id: type } });
  const seq = (id, type) => ({ Sequence: { id, type_id: type } });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [special('[CLS]', 0), seq('A', 0), special('[SEP]', 0)],
      pair: [special('[CLS]', 0), seq('A', 0), special('[SEP]', 0), seq('B', 1), special('[SEP]', 1)],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [vocab['[CLS]']], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [vocab['[SEP]']], tokens: ['[SEP]'] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  };
}

function load(vocabPath) {
  return hf.Tokenizer.fromString(JSON.stringify(tokenizerJson(vocabPath)));
}

function version() {
  return require('tokenizers/package.json').version;
}

module.exports = { load, tokenizerJson, version, hf };
