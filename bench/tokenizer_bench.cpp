// tokenizer_bench.cpp: throughput of qkv's BERT tokenizer (io/bert_encoding.hpp, fast flavor by
// default) on one thread: every line of a text file encoded as tokenizer(line) would be
// ([CLS] ... [SEP], tokens, ids, type ids, masks, offsets). Prints one JSON line:
//   {"impl": "qkv", "flavor", "load_ms", "lines", "bytes", "tokens", "seconds", "tokens_per_s", "mb_per_s"}
// the vocabulary load timed apart from the encoding. scripts/bench_tokenizer.sh runs it against
// Hugging Face's Rust library (bench/hf_tokenizer_bench.js) in the same run.
//   tokenizer_bench VOCAB.txt TEXT.txt [fast|slow]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/bert_encoding.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tokenizer_bench VOCAB.txt TEXT.txt [fast|slow]\n";
    return 2;
  }
  const bool slow = argc > 3 && std::string(argv[3]) == "slow";
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::cerr << "cannot open " << argv[2] << "\n";
    return 2;
  }
  std::vector<std::string> lines;
  std::size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    bytes += line.size();
    lines.push_back(std::move(line));
  }
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const qkv::io::wordpiece_tokenizer tok(
      qkv::io::wordpiece_vocab::from_file(argv[1]),
      slow ? qkv::io::tokenizer_flavor::slow : qkv::io::tokenizer_flavor::fast);
  const auto t1 = clock::now();
  std::size_t tokens = 0;
  for (const auto& line : lines) tokens += qkv::io::encode(tok, line).size();
  const auto t2 = clock::now();
  const double load_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double s = std::chrono::duration<double>(t2 - t1).count();
  std::printf(
      "{\"impl\": \"qkv\", \"flavor\": \"%s\", \"load_ms\": %.1f, \"lines\": %zu, \"bytes\": %zu, "
      "\"tokens\": %zu, "
      "\"seconds\": %.3f, \"tokens_per_s\": %.0f, \"mb_per_s\": %.2f}\n",
      slow ? "slow" : "fast", load_ms, lines.size(), bytes, tokens, s, static_cast<double>(tokens) / s,
      static_cast<double>(bytes) / s / 1e6);
  return 0;
}
