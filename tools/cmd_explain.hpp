// cmd_explain.hpp: `qkv explain EXAMPLE`, the walkthrough of a worked example.
#pragma once

#include <iostream>
#include <string>

#include "cli.hpp"

// the examples' walkthroughs, each compiled in its own file (tools/explain/walkthrough.cpp)
#include "explain/walkthroughs.hpp"

namespace qkv::cli {

struct worked_example {
  std::string_view name;     // what the user types: qkv explain illustrated
  std::string_view program;  // the example program that prints the same walkthrough
  void (*walkthrough)();
};

// the examples' walkthroughs (each example's main() calls the same function)
inline constexpr worked_example worked_examples[] = {
    {"illustrated", "examples/01_illustrated_self_attention.cpp", walkthroughs::illustrated},
    {"illustrated_exact", "examples/01b_illustrated_exact.cpp", walkthroughs::illustrated_exact},
    {"from_scratch", "examples/02_self_attention_from_scratch.cpp", walkthroughs::from_scratch},
    {"the_math", "examples/03_walking_through_the_math.cpp", walkthroughs::the_math},
#ifdef QKV_EXPLAIN_HAS_BOOST
    {"the_math_exact", "examples/03b_walking_through_the_math_exact.cpp", walkthroughs::the_math_exact},
#endif
    {"bert", "examples/04_bert_self_attention.cpp", walkthroughs::bert},
    {"statquest", "examples/05_statquest_self_attention.cpp", walkthroughs::statquest},
    {"masking", "examples/06_masking.cpp", walkthroughs::masking},
    {"positional_encoding", "examples/07_positional_encoding.cpp", walkthroughs::positional_encoding},
    {"encoder_layer", "examples/08_encoder_layer.cpp", walkthroughs::encoder_layer},
    {"flash", "examples/09_flash_attention.cpp", walkthroughs::flash},
};

inline int cmd_explain(const args& a) {
  auto list = [] {
    std::string s;
    for (const auto& e : worked_examples) s += (s.empty() ? "" : ", ") + std::string(e.name);
    return s;
  };
  if (a.size() != 1) throw input_error("expected one example name; the examples are: " + list());
  for (const auto& e : worked_examples)
    if (a[0] == e.name || a[0] == e.program) {
      e.walkthrough();
      return exit_ok;
    }
  throw input_error("unknown example '" + std::string(a[0]) + "'; the examples are: " + list());
}

}  // namespace qkv::cli
