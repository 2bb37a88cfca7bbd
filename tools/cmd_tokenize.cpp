// cmd_tokenize.cpp: `qkv tokenize`, compiled once (tools/meson.build: the library qkv_commands, which the
// tool links).
#include "cmd_tokenize.hpp"

namespace qkv::cli {

int cmd_tokenize(const args& a) {
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
      if (v == "fast")
        flavor = io::tokenizer_flavor::fast;
      else if (v == "slow")
        flavor = io::tokenizer_flavor::slow;
      else
        throw fail("--flavor is fast or slow, not '" + std::string(v) + "'");
    } else if (o == "--max-length") {
      const std::string v(value(i));
      std::size_t n = 0, used = 0;
      try {
        n = std::stoul(v, &used);
      } catch (const std::exception&) { used = 0; }
      if (used != v.size() || v.empty() || v[0] == '-' || n > (std::size_t{1} << 20))
        throw fail("--max-length is a whole number from 0 to 1048576, not '" + v + "'");
      opt.max_length = n;
    } else if (o == "--truncation") {
      const auto v = value(i);
      if (v == "longest_first" || v == "true")
        opt.truncation = io::truncation_strategy::longest_first;
      else if (v == "only_first")
        opt.truncation = io::truncation_strategy::only_first;
      else if (v == "only_second")
        opt.truncation = io::truncation_strategy::only_second;
      else
        throw fail("--truncation is longest_first, only_first or only_second, not '" + std::string(v) + "'");
    } else if (o == "--padding") {
      const auto v = value(i);
      if (v == "max_length")
        opt.padding = io::padding_strategy::max_length;
      else if (v == "longest")
        opt.padding = io::padding_strategy::longest;
      else
        throw fail("--padding is max_length or longest, not '" + std::string(v) + "'");
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
    } catch (const std::exception& e) { throw input_error(where + ": " + e.what()); }
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
