// qkv: the command-line tool. docs/cli.md describes every command.
//
//   qkv --help | --version          usage / version on stdout, exit 0
//   qkv COMMAND --help              the command's usage on stdout, exit 0
//   qkv                             the usage on stderr, exit 2 (a usage error)
//   qkv COMMAND ARGS...             the commands of the table below
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "cli.hpp"
#include "commands.hpp"
#include "examples_list.hpp"  // the examples' names, for `qkv explain --help` (scripts/examples.py)

namespace {

struct command {
  std::string_view name;
  std::string_view synopsis;
  std::string_view help;  // `qkv NAME --help`: the options, on stdout (empty: the command answers itself)
  int (*run)(const qkv::cli::args&);
};

constexpr command commands[] = {
    {"explain", "explain EXAMPLE [--html FILE]   run a worked example and print its walkthrough",
     "usage: qkv explain EXAMPLE [--html FILE]\n\n"
     "Runs a worked example (examples/) and prints its walkthrough; writes no file unless\n"
     "--html FILE asks for the example's learner's page (docs/pages.md).\n"
     "EXAMPLE, one of the examples this qkv was built with (examples/examples.json lists "
     "them):\n" QKV_EXAMPLE_NAMES_WRAPPED,
     qkv::cli::cmd_explain},
    {"tokenize",
     "tokenize [--json] [--pair TEXT] TEXT | --input FILE\n"
     "                            BERT uncased WordPiece as Hugging Face gives it (tokenize --help)",
     "",  // cmd_tokenize answers --help itself
     qkv::cli::cmd_tokenize},
    {"torch", "torch --seed S OP...      PyTorch's generator after manual_seed(S): rand, randn, Linear, ...",
     "usage: qkv torch --seed S [--dtype float32|float64] OP...\n\n"
     "PyTorch's CPU generator after torch.manual_seed(S), the ops run in order, as JSON.\n"
     "OP: rand:A,B,...  randn:A,B,...  uniform:A,B,...:LO:HI  normal:A,B,...:MEAN:STD\n"
     "    linear:IN:OUT[:nobias]  embedding:NUM:DIM[:PAD]  xavier:A,B,...  mha:E:H  seed:S\n"
     "At most 2^24 elements per op and 2^25 in all (docs/cli.md).\n",
     qkv::cli::cmd_torch},
    {"attend",
     "attend CASE.json [--json] [--svg FILE] [--html FILE] [--arithmetic runtime|core] ...\n"
     "                            attention for a case given as JSON: a trace, or every tensor",
     "usage: qkv attend CASE.json [--json] [--svg FILE] [--html FILE] [--arithmetic runtime|core]\n"
     "                            [--max-elements N] [--max-cells N]\n\n"
     "Attention on the runtime path for a case given as JSON: the fields x, wq, wk, wv, and\n"
     "optionally dtype (float32, float64, bfloat16, float16), context, bq, bk, bv, weight_layout,\n"
     "heads, wo, bo, scale, causal, allowed, tokens, context_tokens, key_padding, rope, kv_heads,\n"
     "causal_alignment, window, alibi, bias (docs/cli.md). Prints a step-by-step trace.\n"
     "A batch: x [B, T, d] (context [B, S, d_c]) with lengths [B] or key_padding [B, S]\n"
     "(true = padding, PyTorch's key_padding_mask); the weights serve every sequence.\n"
     "  --json            every tensor as JSON instead (NaN and infinities as \"NaN\", \"Infinity\", "
     "\"-Infinity\")\n"
     "  --svg FILE        write the heatmap of the weights to FILE\n"
     "  --html FILE       write a page with the trace, the matrices and the heatmap to FILE\n"
     "                    (an editable page is in the core's arithmetic, and says so)\n"
     "  --arithmetic A    runtime (default: the runtime path, SIMD and fma) or core (the core's\n"
     "                    arithmetic, core/flat_attention.hpp: what the examples prove and the\n"
     "                    editable pages recompute with; self-attention with heads, biases, wo,\n"
     "                    causal, window, allowed, key_padding, float32/float64 only: any other\n"
     "                    case is refused, exit 2, naming the field)\n"
     "  --max-elements N  the most numbers any buffer or output may hold (default 16777216 = 2^24)\n"
     "  --max-cells N     the most cells the heatmap may draw (default 262144 = 2^18)\n"
     "Files are written whole or not at all, and only when everything else succeeded.\n",
     qkv::cli::cmd_attend},
    {"decode",
     "decode CASE.json [--json] [--max-elements N] [--max-cache-bytes N]\n"
     "                            causal decoding through the KV cache, compared with full causal attention",
     "usage: qkv decode CASE.json [--json] [--max-elements N] [--max-cache-bytes N]\n\n"
     "Causal decoding through the runtime's KV cache for a case given as JSON: the fields q, k, v\n"
     "(one row per token), and optionally heads, kv_heads, prompt, capacity, storage (float32,\n"
     "bfloat16, float16), kernel (decode_attend, attend), window, alibi, scale, rope (docs/cli.md).\n"
     "Prints each token's output row and how the rows compare with full causal attention\n"
     "(attend: bit for bit; decode_attend: within twice the derived float bound).\n"
     "  --json               the rows, the full causal attention and the bound as JSON instead\n"
     "  --max-elements N     the most numbers any output may hold (default 16777216 = 2^24)\n"
     "  --max-cache-bytes N  the most bytes the cache may take (default 1073741824 = 2^30)\n"
     "Exit 1 when the documented relation does not hold (a runtime bug), 2 on bad input.\n",
     qkv::cli::cmd_decode},
    {"encode",
     "encode CASE.json [--json] [--max-elements N]\n"
     "                            transformer encoder layers (nn.TransformerEncoderLayer) on the runtime "
     "path",
     "usage: qkv encode CASE.json [--json] [--max-elements N]\n\n"
     "A stack of nn.TransformerEncoderLayer (batch_first, dropout 0) for a case given as JSON:\n"
     "the fields x, config, layers, and optionally dtype (docs/cli.md). Prints a trace.\n"
     "  --json            each layer's output as JSON instead\n"
     "  --max-elements N  the most numbers any buffer or output may hold (default 16777216 = 2^24)\n",
     qkv::cli::cmd_encode},
    {"train",
     "train TASK [--steps N] [--seed S] [--threads N] [--out FILE] [--trace FILE] ...\n"
     "                            train a small transformer: reverse, sort (digits) or text (train --help)",
     "",  // cmd_train answers --help itself (its help is in cmd_train.hpp)
     qkv::cli::cmd_train},
};

void print_help(std::ostream& out) {
  out << "qkv: transformer self-attention, computed and explained\n\n"
         "usage:\n"
         "  qkv --help                show this help (qkv COMMAND --help: the command's options)\n"
         "  qkv --version             print the version\n";
  for (const auto& c : commands) out << "  qkv " << c.synopsis << "\n";
  out << "\nErrors: a message on stderr and exit status 2. See docs/cli.md.\n";
}

/// `qkv COMMAND --help` (anywhere among its arguments) or `qkv COMMAND -h` (first)
bool asks_for_help(const qkv::cli::args& a) {
  if (!a.empty() && a[0] == "-h") return true;
  for (const auto arg : a)
    if (arg == "--help") return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const qkv::cli::args all(argv + 1, argv + argc);
  if (all.empty()) {  // a usage error: the usage on stderr
    print_help(std::cerr);
    return qkv::cli::exit_bad_input;
  }
  if (all[0] == "--help" || all[0] == "-h" || all[0] == "help") {
    print_help(std::cout);
    return qkv::cli::exit_ok;
  }
  if (all[0] == "--version") {
    std::cout << "qkv 0.1.0\n";
    return qkv::cli::exit_ok;
  }
  for (const auto& c : commands) {
    if (all[0] != c.name) continue;
    const qkv::cli::args rest(all.begin() + 1, all.end());
    if (!c.help.empty() && asks_for_help(rest)) {
      std::cout << c.help;
      return qkv::cli::exit_ok;
    }
    // a command writes to a buffer first, so that a failure leaves nothing on stdout
    std::ostringstream out;
    auto* old = std::cout.rdbuf(out.rdbuf());
    try {
      const int status = c.run(rest);
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
