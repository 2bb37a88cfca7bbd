// example.cpp: one worked example, compiled once: its proofs, its walkthrough, its learner's page
// and its program's entry, for both the example program (examples/program/main.cpp) and
// `qkv explain` (tools/), which link the same object.
//
// examples/meson.build compiles this file once per example of examples/examples.json, with
//   QKV_EXAMPLE_SOURCE  the example's file, e.g. "examples/01_illustrated_self_attention.cpp"
//   QKV_EXAMPLE_NAME    its namespace under qkv::examples, e.g. illustrated
//   QKV_EXAMPLE_NOTES   the header scripts/page_notes.py wrote from the example's source: its
//                       Step comments and static_asserts (the page's prose and proofs)
// so that the examples' compile-time proofs build in parallel and a change to one example
// rebuilds only its own object.
#define QKV_EXAMPLE_NO_MAIN
#include QKV_EXAMPLE_SOURCE
#include QKV_EXAMPLE_NOTES

#include "example.hpp"

void qkv::cli::walkthroughs::QKV_EXAMPLE_NAME() { qkv::examples::QKV_EXAMPLE_NAME::walkthrough(); }

// the learner's page: the example's page() function (when it has one) fills it; the steps' prose
// and the proofs come from the example's own comments and static_asserts
bool qkv::cli::pages::QKV_EXAMPLE_NAME([[maybe_unused]] qkv::io::page& p) {
#if QKV_EXAMPLE_HAS_PAGE
  namespace notes = qkv::page_notes::QKV_EXAMPLE_NAME;
  p.intro(qkv::io::page::reflow(notes::intro)).source(notes::file, notes::steps, notes::proofs);
  qkv::examples::QKV_EXAMPLE_NAME::page(p);
  return true;
#else
  return false;
#endif
}

// the program: an example whose main() takes arguments defines program(argc, argv) in its
// namespace (examples 04 and 07), which this non-template overload-resolution prefers; the others
// run their walkthrough, as their main() does
namespace qkv::examples::QKV_EXAMPLE_NAME {
template <class = void>
int program(int, char**) {
  walkthrough();
  return 0;
}
}  // namespace qkv::examples::QKV_EXAMPLE_NAME

int qkv::cli::programs::QKV_EXAMPLE_NAME(int argc, char** argv) {
  return qkv::examples::QKV_EXAMPLE_NAME::program(argc, argv);
}
