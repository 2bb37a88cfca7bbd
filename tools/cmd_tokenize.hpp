// cmd_tokenize.hpp: `qkv tokenize [OPTIONS] TEXT` or `qkv tokenize [OPTIONS] --input FILE|-`:
// BERT uncased WordPiece, as Hugging Face's tokenizer(text, text_pair, max_length=...,
// truncation=..., padding=..., return_offsets_mapping=True) gives it (docs/cli.md).
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <qkv/io/bert_encoding.hpp>

#include "cli.hpp"

#ifndef QKV_DATA_DIR
#error "build with -DQKV_DATA_DIR=\"<project>/data\" (tools/meson.build does)"
#endif

namespace qkv::cli {

namespace detail {

// a JSON string literal; the text is valid UTF-8 (the tokenizer checked it), so only quotes,
// backslashes and control characters need escapes
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// bert-base-uncased's vocab.txt: where `meson install` puts it (<prefix>/share/qkv/, found
// from the program's own path), else the source tree's data/ (a build directory's qkv)
inline std::string default_vocabulary() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share/qkv/bert-base-uncased/vocab.txt";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return (std::filesystem::path(QKV_DATA_DIR) / "bert-base-uncased/vocab.txt").string();
}

template <class T>
void json_list(std::ostream& out, const char* name, const std::vector<T>& v, bool first = false) {
  out << (first ? "{" : ", ") << '"' << name << "\": [";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out << ", ";
    if constexpr (std::is_same_v<T, std::string>)
      out << json_string(v[i]);
    else if constexpr (std::is_same_v<T, bool>)
      out << (v[i] ? "true" : "false");
    else if constexpr (std::is_same_v<T, io::token_offsets>)
      out << '[' << v[i].first << ", " << v[i].second << ']';
    else
      out << v[i];
  }
  out << ']';
}

inline void write_json(std::ostream& out, const io::bert_encoding& e) {
  json_list(out, "tokens", e.tokens, true);
  json_list(out, "ids", e.ids);
  json_list(out, "token_type_ids", e.token_type_ids);
  json_list(out, "attention_mask", e.attention_mask);
  json_list(out, "special_tokens_mask", e.special_tokens_mask);
  json_list(out, "offsets", e.offsets);
  const auto kp = e.key_padding();
  json_list(out, "key_padding", std::vector<bool>(kp.begin(), kp.end()));
  out << "}\n";
}

}  // namespace detail

inline constexpr std::string_view tokenize_usage =
    "usage: qkv tokenize [--vocab VOCAB.txt] [--flavor fast|slow] [--json] [--pair TEXT]\n"
    "                    [--max-length N] [--truncation longest_first|only_first|only_second]\n"
    "                    [--padding max_length|longest] (TEXT | --input FILE|- [--jsonl])\n"
    "\n"
    "BERT uncased WordPiece, as Hugging Face's tokenizer(text, text_pair, max_length=...,\n"
    "truncation=..., padding=..., return_offsets_mapping=True) gives it.\n"
    "  --vocab FILE       vocab.txt (default: the installed bert-base-uncased, or the source tree's)\n"
    "  --flavor fast      AutoTokenizer / BertTokenizerFast, the Rust library (the default)\n"
    "  --flavor slow      the Python BertTokenizer (Unicode 14)\n"
    "  --json             one JSON object: tokens, ids, token_type_ids, attention_mask,\n"
    "                     special_tokens_mask, offsets (code points), key_padding (true = [PAD])\n"
    "  --pair TEXT        the second sentence: [CLS] TEXT [SEP] PAIR [SEP], token types 0 then 1\n"
    "  --max-length N     with --truncation / --padding max_length (default 512)\n"
    "  --input FILE|-     many texts, one per line (- = standard input); writes JSON lines\n"
    "  --jsonl            with --input: each line is a JSON string, or {\"text\": ..., \"pair\": ...}\n";

int cmd_tokenize(const args& a);  // tools/cmd_tokenize.cpp

}  // namespace qkv::cli
