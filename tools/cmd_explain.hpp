// cmd_explain.hpp: `qkv explain EXAMPLE [--html FILE]`, the walkthrough of a worked example,
// and its learner's page (io/page.hpp).
#pragma once

#include <algorithm>
#include <iostream>
#include <string>

#include <qkv/io/page.hpp>
#include <qkv/io/page_recompute.hpp>  // which steps the page's WebAssembly module recomputes
#ifdef QKV_EXPLAIN_HAS_BOOST
#include <qkv/io/page_truth.hpp>  // the 50-digit truth of the pages' computed cells
#include <qkv/io/page_wide.hpp>   // exact steps over 128-bit rationals (03b's scores)
#endif

#include "cli.hpp"
#include "page_truth_wasm.hpp"  // the pages' truth module (wasm/meson.build)
#include "page_wasm.hpp"        // the pages' WebAssembly module (wasm/meson.build)
#include "page_wide_wasm.hpp"   // the wide module: exact steps over 128-bit rationals

// the examples' walkthroughs and pages, each example compiled in its own object
// (examples/program/example.cpp; the list: examples/examples.json)
#include "../examples/program/example.hpp"

namespace qkv::cli {

struct worked_example {
  std::string_view name;     // what the user types: qkv explain illustrated
  std::string_view program;  // the example program that prints the same walkthrough
  void (*walkthrough)();
  bool (*fill_page)(qkv::io::page&);  // false when the example has no page() yet
};

// the examples this qkv was built with, in the order of examples/examples.json
#define QKV_WORKED_EXAMPLE(name, program) {#name, program, walkthroughs::name, pages::name},
inline constexpr worked_example worked_examples[] = {QKV_EXAMPLES(QKV_WORKED_EXAMPLE)};
#undef QKV_WORKED_EXAMPLE

/// the page of the example `name` as HTML; throws input_error when it has none
inline std::string explain_page(const worked_example& e) {
  qkv::io::page page("qkv explain " + std::string(e.name) + " \u2014 " + std::string(e.program));
  if (e.fill_page(page)) {
    bool truth = false;             // the page has the 50-digit truth
    qkv::io::page_wide_exact wide;  // exact steps over 128-bit rationals, when the wide module is built
#ifdef QKV_EXPLAIN_HAS_BOOST
    truth = qkv::io::add_truth(page);
    if (!*qkv::io::page_wide_wasm::why_not) wide = qkv::io::wide_exact_q128;
#endif
    // editable (docs/pages.md, "Editing a page"): the steps the module recomputes, each checked
    // here to give the example's own numbers bit for bit; on a page with the 50-digit truth, the
    // truth module that recomputes it for a learner's inputs (docs/pages.md, "The error against
    // the truth"); on a page with a 128-bit exact step (03b), the wide module
    const auto plan = qkv::io::plan_recompute(page, wide);
    page.edit(qkv::io::recompute_spec(
        plan, qkv::io::page_wasm::text(), qkv::io::page_wasm::bytes, qkv::io::page_wasm::why_not,
        truth ? qkv::io::page_truth_wasm::text() : std::string(), qkv::io::page_truth_wasm::bytes,
        plan.wide ? qkv::io::page_wide_wasm::text() : std::string(), qkv::io::page_wide_wasm::bytes));
    return page.str();
  }
  std::string with;
  for (const auto& other : worked_examples) {
    qkv::io::page probe("");
    if (other.fill_page(probe)) with += (with.empty() ? "" : ", ") + std::string(other.name);
  }
  throw input_error("example '" + std::string(e.name) +
                    "' has no page yet; the examples with a page are: " + with);
}

int cmd_explain(const args& a);  // tools/cmd_explain.cpp

}  // namespace qkv::cli
