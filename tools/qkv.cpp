// qkv: the command-line tool. docs/cli.md describes every command.
//
//   qkv --help | --version
//   qkv explain EXAMPLE
//   (the other commands join the table below as they are built)
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "cli.hpp"
#include "cmd_attend.hpp"
#include "cmd_encode.hpp"
#include "cmd_explain.hpp"
#include "cmd_tokenize.hpp"
#include "cmd_torch.hpp"

namespace {

struct command {
  std::string_view name;
  std::string_view synopsis;
  int (*run)(const qkv::cli::args&);
};

constexpr command commands[] = {
    {"explain", "explain EXAMPLE           run a worked example and print its walkthrough",
     qkv::cli::cmd_explain},
    {"tokenize", "tokenize [--json] [--pair TEXT] TEXT | --input FILE\n"
                 "                            BERT uncased WordPiece as Hugging Face gives it (tokenize --help)",
     qkv::cli::cmd_tokenize},
    {"torch", "torch --seed S OP...      PyTorch's generator after manual_seed(S): rand, randn, Linear, ...",
     qkv::cli::cmd_torch},
    {"attend", "attend CASE.json [--json] [--svg FILE] [--html FILE]\n"
               "                            attention for a case given as JSON: a trace, or every tensor",
     qkv::cli::cmd_attend},
    {"encode", "encode CASE.json [--json]\n"
               "                            transformer encoder layers (nn.TransformerEncoderLayer) on the runtime path",
     qkv::cli::cmd_encode},
};

void print_help(std::ostream& out) {
  out << "qkv: transformer self-attention, computed and explained\n\n"
         "usage:\n"
         "  qkv --help                show this help\n"
         "  qkv --version             print the version\n";
  for (const auto& c : commands) out << "  qkv " << c.synopsis << "\n";
  out << "\nErrors: a message on stderr and exit status 2. See docs/cli.md.\n";
}

}  // namespace

int main(int argc, char** argv) {
  const qkv::cli::args all(argv + 1, argv + argc);
  if (all.empty() || all[0] == "--help" || all[0] == "-h" || all[0] == "help") {
    print_help(std::cout);
    return all.empty() ? qkv::cli::exit_bad_input : qkv::cli::exit_ok;
  }
  if (all[0] == "--version") {
    std::cout << "qkv 0.1.0\n";
    return qkv::cli::exit_ok;
  }
  for (const auto& c : commands) {
    if (all[0] != c.name) continue;
    // a command writes to a buffer first, so that a failure leaves nothing on stdout
    std::ostringstream out;
    auto* old = std::cout.rdbuf(out.rdbuf());
    try {
      const int status = c.run(qkv::cli::args(all.begin() + 1, all.end()));
      std::cout.rdbuf(old);
      std::cout << out.str();
      return status;
    } catch (const qkv::cli::input_error& e) {
      std::cout.rdbuf(old);
      std::cerr << "qkv " << c.name << ": " << e.what() << "\n";
      return qkv::cli::exit_bad_input;
    } catch (const std::exception& e) {
      std::cout.rdbuf(old);
      std::cerr << "qkv " << c.name << ": " << e.what() << "\n";
      return qkv::cli::exit_bad_input;
    }
  }
  std::cerr << "qkv: unknown command '" << all[0] << "'; the commands are:";
  for (const auto& c : commands) std::cerr << " " << c.name;
  std::cerr << " (qkv --help)\n";
  return qkv::cli::exit_bad_input;
}
