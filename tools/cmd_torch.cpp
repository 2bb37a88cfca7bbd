// cmd_torch.cpp: `qkv torch`, compiled once (tools/meson.build: the library qkv_commands, which the
// tool links).
#include "cmd_torch.hpp"

namespace qkv::cli {

/// qkv torch --seed S [--dtype float32|float64] OP...
int cmd_torch(const args& a) {
  using namespace torch_cmd;
  bool have_seed = false;
  std::uint64_t seed = 0;
  std::string_view dtype = "float32";
  std::vector<std::string_view> texts;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto arg = a[i];
    if (arg == "--seed" || arg == "--dtype") {
      if (i + 1 == a.size()) throw input_error(std::string(arg) + " needs a value");
      const auto value = a[++i];
      if (arg == "--seed") {
        seed = parse_seed(value, "--seed");
        have_seed = true;
      } else {
        if (value != "float32" && value != "float64")
          throw input_error("--dtype must be float32 or float64, not '" + std::string(value) + "'");
        dtype = value;
      }
    } else if (arg.starts_with("--")) {
      throw input_error("unknown option '" + std::string(arg) +
                        "'; usage: qkv torch --seed S [--dtype float32|float64] OP...");
    } else {
      texts.push_back(arg);
    }
  }
  if (!have_seed) throw input_error("--seed S is required (torch.manual_seed(S) starts every run)");
  if (texts.empty()) throw input_error("no ops; usage: qkv torch --seed S [--dtype float32|float64] OP...");
  // check every op before drawing anything
  std::vector<op> ops;
  std::uint64_t total = 0;
  for (auto t : texts) ops.push_back(parse_op(t, dtype, total));
  std::string out;
  if (dtype == "float32")
    run<float>(ops, seed, out);
  else
    run<double>(ops, seed, out);
  std::cout << out;
  return exit_ok;
}

}  // namespace qkv::cli
