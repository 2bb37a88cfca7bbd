// cmd_explain.hpp: `qkv explain EXAMPLE`, the walkthrough of a worked example.
#pragma once

#include <iostream>
#include <string>

#include "cli.hpp"

namespace qkv::cli {

struct worked_example {
  std::string_view name;     // what the user types: qkv explain illustrated
  std::string_view program;  // the example program that prints the same walkthrough
  void (*walkthrough)();
};

// the examples' walkthroughs, compiled into the tool (each example's main() calls the same function)
inline constexpr worked_example worked_examples[] = {
    {"placeholder", "", nullptr},  // replaced as the examples land
};

inline int cmd_explain(const args& a) {
  auto list = [] {
    std::string s;
    for (const auto& e : worked_examples) s += (s.empty() ? "" : ", ") + std::string(e.name);
    return s;
  };
  if (a.size() != 1) throw input_error("expected one example name; the examples are: " + list());
  for (const auto& e : worked_examples)
    if (a[0] == e.name && e.walkthrough) {
      e.walkthrough();
      return exit_ok;
    }
  throw input_error("unknown example '" + std::string(a[0]) + "'; the examples are: " + list());
}

}  // namespace qkv::cli
