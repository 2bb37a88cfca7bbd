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
    if constexpr (std::is_same_v<T, std::string>) out << json_string(v[i]);
    else if constexpr (std::is_same_v<T, bool>) out << (v[i] ? "true" : "false");
    else if constexpr (std::is_same_v<T, io::token_offsets>) out << '[' << v[i].first << ", " << v[i].second << ']';
    else out << v[i];
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

inline int cmd_tokenize(const args& a) {
  const std::string usage(tokenize_usage);
  auto fail = [&](const std::string& what) { return input_error(what + "\n" + usage); };
  std::string vocab_path;
  bool json = false, jsonl = false, have_text = false;
  std::optional<std::string> input, pair;
  std::string_view text;
  io::tokenizer_flavor flavor = io::tokenizer_flavor::fast;
  io::encode_options opt;
  auto value = [&](std::size_t& i) -> std::string_view {
    if (i + 1 >= a.size()) throw fail(std::string(a[i]) + " needs a value");
    return a[++i];
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string_view o = a[i];
    if (o == "--help" || o == "-h") {
      std::cout << usage;
      return exit_ok;
    } else if (o == "--vocab") {
      vocab_path = std::string(value(i));
    } else if (o == "--json") {
      json = true;
    } else if (o == "--jsonl") {
      jsonl = true;
    } else if (o == "--input") {
      input = std::string(value(i));
    } else if (o == "--pair") {
      pair = std::string(value(i));
    } else if (o == "--flavor") {
      const auto v = value(i);
      if (v == "fast") flavor = io::tokenizer_flavor::fast;
      else if (v == "slow") flavor = io::tokenizer_flavor::slow;
      else throw fail("--flavor is fast or slow, not '" + std::string(v) + "'");
    } else if (o == "--max-length") {
      const std::string v(value(i));
      std::size_t n = 0, used = 0;
      try {
        n = std::stoul(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || v.empty() || v[0] == '-' || n > (std::size_t{1} << 20))
        throw fail("--max-length is a whole number from 0 to 1048576, not '" + v + "'");
      opt.max_length = n;
    } else if (o == "--truncation") {
      const auto v = value(i);
      if (v == "longest_first" || v == "true") opt.truncation = io::truncation_strategy::longest_first;
      else if (v == "only_first") opt.truncation = io::truncation_strategy::only_first;
      else if (v == "only_second") opt.truncation = io::truncation_strategy::only_second;
      else throw fail("--truncation is longest_first, only_first or only_second, not '" + std::string(v) + "'");
    } else if (o == "--padding") {
      const auto v = value(i);
      if (v == "max_length") opt.padding = io::padding_strategy::max_length;
      else if (v == "longest") opt.padding = io::padding_strategy::longest;
      else throw fail("--padding is max_length or longest, not '" + std::string(v) + "'");
    } else if (o == "--") {
      // everything after -- is the text (a text may start with '-')
      if (i + 2 != a.size() || have_text) throw fail("expected one TEXT after --");
      text = a[i + 1];
      have_text = true;
      break;
    } else if (o.size() > 1 && o[0] == '-') {
      throw fail("unknown option '" + std::string(o) + "'");
    } else {
      if (have_text) throw fail("expected one TEXT (quote it)");
      text = o;
      have_text = true;
    }
  }
  if (have_text && input) throw fail("give a TEXT or --input, not both");
  if (!have_text && !input) throw fail("missing TEXT (or --input FILE)");
  if (jsonl && !input) throw fail("--jsonl reads --input");
  if (pair && input) throw fail("--pair is for one TEXT; with --input, give pairs as JSON lines (--jsonl)");
  if (vocab_path.empty()) vocab_path = detail::default_vocabulary();

  const io::wordpiece_tokenizer tokenizer(io::wordpiece_vocab::from_file(vocab_path), flavor);
  auto encode = [&](std::string_view t, const std::optional<std::string>& p, const std::string& where) {
    try {
      return io::encode(tokenizer, t, p ? std::optional<std::string_view>(*p) : std::nullopt, opt);
    } catch (const std::exception& e) {
      throw input_error(where + ": " + e.what());
    }
  };

  if (have_text) {
    const auto e = encode(text, pair, "the text");
    if (json) {
      detail::write_json(std::cout, e);
      return exit_ok;
    }
    std::cout << e.size() << " tokens (BERT uncased WordPiece, " << tokenizer.vocab().size()
              << "-token vocabulary, " << (flavor == io::tokenizer_flavor::fast ? "fast" : "slow") << ")\n";
    std::cout << "index     id  type  offsets  token\n";
    for (std::size_t i = 0; i < e.size(); ++i) {
      char line[64];
      std::snprintf(line, sizeof line, "%5zu %6lld  %4lld  %3zu..%-3zu ", i, static_cast<long long>(e.ids[i]),
                    static_cast<long long>(e.token_type_ids[i]), e.offsets[i].first, e.offsets[i].second);
      std::cout << line << e.tokens[i] << "\n";
    }
    return exit_ok;
  }

  // many texts: at most 256 MiB of input, one text (or pair) per line
  constexpr std::size_t input_limit = std::size_t{256} << 20;
  const std::string name = *input == "-" ? std::string("standard input") : "'" + *input + "'";
  std::string data;
  {
    std::ifstream file;
    std::istream* in = &std::cin;
    if (*input != "-") {
      file.open(*input, std::ios::binary);
      if (!file) throw input_error("cannot open the input file " + name);
      in = &file;
    }
    char buf[1 << 16];
    while (in->read(buf, sizeof buf) || in->gcount() > 0) {
      data.append(buf, static_cast<std::size_t>(in->gcount()));
      if (data.size() > input_limit) throw input_error(name + " is larger than the limit of 256 MiB");
    }
    if (in->bad()) throw input_error("cannot read " + name);
  }
  std::vector<io::text_pair> items;
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < data.size(); ++line_no) {
    std::size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    std::string_view line(data.data() + pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string where = name + " line " + std::to_string(line_no + 1);
    if (!jsonl) {
      items.push_back({std::string(line), std::nullopt});
      continue;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      throw input_error(where + ": not valid JSON (expected a string or {\"text\": ..., \"pair\": ...})");
    }
    if (j.is_string()) {
      items.push_back({j.get<std::string>(), std::nullopt});
    } else if (j.is_object() && j.contains("text") && j["text"].is_string()) {
      for (const auto& [k, v] : j.items())
        if (k != "text" && k != "pair") throw input_error(where + ": unknown field '" + k + "' (text, pair)");
      io::text_pair p{j["text"].get<std::string>(), std::nullopt};
      if (j.contains("pair")) {
        if (!j["pair"].is_string()) throw input_error(where + ": field 'pair' must be a string");
        p.pair = j["pair"].get<std::string>();
      }
      items.push_back(std::move(p));
    } else {
      throw input_error(where + ": expected a JSON string or an object with a string field 'text'");
    }
  }
  std::vector<io::bert_encoding> out;
  out.reserve(items.size());
  std::size_t longest = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out.push_back(encode(items[i].text, items[i].pair, name + " line " + std::to_string(i + 1)));
    longest = std::max(longest, out.back().size());
  }
  for (auto& e : out) {
    if (opt.padding == io::padding_strategy::longest) io::pad(e, longest, tokenizer.vocab());
    detail::write_json(std::cout, e);
  }
  return exit_ok;
}

}  // namespace qkv::cli
