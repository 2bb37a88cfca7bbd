// cmd_explain.hpp: `qkv explain EXAMPLE`, the walkthrough of a worked example.
#pragma once

#include <iostream>
#include <string>

#include "cli.hpp"

// the examples themselves, without their main(): `qkv explain` prints what they print
#define QKV_EXAMPLE_NO_MAIN
#include "../examples/01_illustrated_self_attention.cpp"
#include "../examples/02_self_attention_from_scratch.cpp"
#include "../examples/03_walking_through_the_math.cpp"
#include "../examples/05_statquest_self_attention.cpp"
#include "../examples/06_masking.cpp"
#include "../examples/07_positional_encoding.cpp"
#include "../examples/08_encoder_layer.cpp"
#undef QKV_EXAMPLE_NO_MAIN

namespace qkv::cli {

struct worked_example {
  std::string_view name;     // what the user types: qkv explain illustrated
  std::string_view program;  // the example program that prints the same walkthrough
  void (*walkthrough)();
};

// the examples' walkthroughs, compiled into the tool (each example's main() calls the same function)
inline constexpr worked_example worked_examples[] = {
    {"illustrated", "examples/01_illustrated_self_attention.cpp", qkv::examples::illustrated::walkthrough},
    {"from_scratch", "examples/02_self_attention_from_scratch.cpp", qkv::examples::from_scratch::walkthrough},
    {"the_math", "examples/03_walking_through_the_math.cpp", qkv::examples::the_math::walkthrough},
    {"statquest", "examples/05_statquest_self_attention.cpp", qkv::examples::statquest::walkthrough},
    {"masking", "examples/06_masking.cpp", qkv::examples::masking::walkthrough},
    {"positional_encoding", "examples/07_positional_encoding.cpp", qkv::examples::positional_encoding::walkthrough},
    {"encoder_layer", "examples/08_encoder_layer.cpp", qkv::examples::encoder_layer::walkthrough},
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
