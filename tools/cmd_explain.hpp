// cmd_explain.hpp: `qkv explain EXAMPLE [--html FILE]`, the walkthrough of a worked example,
// and its learner's page (io/page.hpp).
#pragma once

#include <iostream>
#include <string>

#include <qkv/io/page.hpp>
#ifdef QKV_EXPLAIN_HAS_BOOST
#include <qkv/io/page_truth.hpp>  // the 50-digit truth of the pages' computed cells
#endif

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
    {"kv_cache", "examples/10_kv_cache_decoding.cpp", walkthroughs::kv_cache},
    {"grouped_query", "examples/11_grouped_query_attention.cpp", walkthroughs::grouped_query},
    {"rope", "examples/12_rope.cpp", walkthroughs::rope},
    {"alibi", "examples/13_alibi_and_windows.cpp", walkthroughs::alibi},
    {"batches", "examples/14_batches_and_half_precision.cpp", walkthroughs::batches},
};

// the examples' learner's pages (each returns false when the example has no page() yet)
struct example_page {
  std::string_view name;
  bool (*fill)(qkv::io::page&);
};
inline constexpr example_page example_pages[] = {
    {"illustrated", pages::illustrated},
    {"illustrated_exact", pages::illustrated_exact},
    {"from_scratch", pages::from_scratch},
    {"the_math", pages::the_math},
#ifdef QKV_EXPLAIN_HAS_BOOST
    {"the_math_exact", pages::the_math_exact},
#endif
    {"bert", pages::bert},
    {"statquest", pages::statquest},
    {"masking", pages::masking},
    {"positional_encoding", pages::positional_encoding},
    {"encoder_layer", pages::encoder_layer},
    {"flash", pages::flash},
    {"kv_cache", pages::kv_cache},
    {"grouped_query", pages::grouped_query},
    {"rope", pages::rope},
    {"alibi", pages::alibi},
    {"batches", pages::batches},
};

/// the page of the example `name` as HTML; throws input_error when it has none
inline std::string explain_page(const worked_example& e) {
  for (const auto& p : example_pages)
    if (p.name == e.name) {
      qkv::io::page page("qkv explain " + std::string(e.name) + " \u2014 " + std::string(e.program));
      if (!p.fill(page)) break;
#ifdef QKV_EXPLAIN_HAS_BOOST
      qkv::io::add_truth(page);
#endif
      return page.str();
    }
  std::string with;
  for (const auto& p : example_pages) {
    qkv::io::page probe("");
    if (p.fill(probe)) with += (with.empty() ? "" : ", ") + std::string(p.name);
  }
  throw input_error("example '" + std::string(e.name) + "' has no page yet; the examples with a page are: " + with);
}

inline int cmd_explain(const args& a) {
  auto list = [] {
    std::string s;
    for (const auto& e : worked_examples) s += (s.empty() ? "" : ", ") + std::string(e.name);
    return s;
  };
  std::string html;
  args names;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k] == "--html") {
      if (k + 1 >= a.size()) throw input_error("--html needs a file name (usage: qkv explain EXAMPLE [--html FILE])");
      html = std::string(a[++k]);
    } else if (!a[k].empty() && a[k][0] == '-') {  // as qkv attend: a mistyped option is named
      throw input_error("unknown option '" + std::string(a[k]) + "' (usage: qkv explain EXAMPLE [--html FILE])");
    } else {
      names.push_back(a[k]);
    }
  }
  if (names.size() != 1) throw input_error("expected one example name; the examples are: " + list());
  for (const auto& e : worked_examples)
    if (names[0] == e.name || names[0] == e.program) {
      if (!html.empty()) {
        const std::string text = explain_page(e);  // before the walkthrough: a refusal prints nothing
        try {
          qkv::io::write_text_file(html, text);
        } catch (const std::runtime_error& err) {
          throw input_error(err.what());
        }
      }
      // the walkthrough speaks as its tutorial does; say how it counts (issue 28)
      std::cout << "(counting from 1, as the tutorials do: q1, input 1 and row 1 are the first; C++ indices and\n"
                   " compiler messages count from 0: q1 is row 0 of the C++ matrix)\n\n";
      e.walkthrough();
      if (!html.empty()) std::cout << wrote_line(html, true);
      return exit_ok;
    }
  throw input_error("unknown example '" + std::string(names[0]) + "'; the examples are: " + list());
}

}  // namespace qkv::cli
