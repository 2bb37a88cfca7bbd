// cmd_tokenize.hpp: `qkv tokenize --vocab VOCAB.txt [--json] TEXT`, BERT uncased WordPiece.
#pragma once

#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include <qkv/io/wordpiece.hpp>

#include "cli.hpp"

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

}  // namespace detail

inline int cmd_tokenize(const args& a) {
  constexpr std::string_view usage = "usage: qkv tokenize --vocab VOCAB.txt [--json] TEXT";
  std::string vocab_path;
  bool json = false;
  bool have_text = false;
  std::string_view text;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--vocab") {
      if (i + 1 >= a.size()) throw input_error("--vocab needs a file name; " + std::string(usage));
      vocab_path = std::string(a[++i]);
    } else if (a[i] == "--json") {
      json = true;
    } else if (a[i] == "--") {
      // everything after -- is the text (a text may start with '-')
      if (i + 2 != a.size() || have_text) throw input_error("expected one TEXT after --; " + std::string(usage));
      text = a[i + 1];
      have_text = true;
      break;
    } else if (a[i].size() > 1 && a[i][0] == '-') {
      throw input_error("unknown option '" + std::string(a[i]) + "'; " + std::string(usage));
    } else {
      if (have_text) throw input_error("expected one TEXT (quote it); " + std::string(usage));
      text = a[i];
      have_text = true;
    }
  }
  if (vocab_path.empty()) throw input_error("missing --vocab VOCAB.txt; " + std::string(usage));
  if (!have_text) throw input_error("missing TEXT; " + std::string(usage));

  const io::wordpiece_tokenizer tokenizer(io::wordpiece_vocab::from_file(vocab_path));
  const auto e = tokenizer.encode(text);

  if (json) {
    std::cout << "{\"tokens\": [";
    for (std::size_t i = 0; i < e.tokens.size(); ++i)
      std::cout << (i ? ", " : "") << detail::json_string(e.tokens[i]);
    std::cout << "], \"ids\": [";
    for (std::size_t i = 0; i < e.ids.size(); ++i) std::cout << (i ? ", " : "") << e.ids[i];
    std::cout << "]}\n";
    return exit_ok;
  }
  std::cout << e.tokens.size() << " tokens (BERT uncased WordPiece, " << tokenizer.vocab().size()
            << "-token vocabulary)\n";
  std::cout << "index     id  token\n";
  for (std::size_t i = 0; i < e.tokens.size(); ++i) {
    char line[32];
    std::snprintf(line, sizeof line, "%5zu %6lld  ", i, static_cast<long long>(e.ids[i]));
    std::cout << line << e.tokens[i] << "\n";
  }
  return exit_ok;
}

}  // namespace qkv::cli
