// walkthrough.cpp: one worked example's walkthrough, compiled into the tool in a file of its own.
//
// tools/meson.build compiles this file once per example, with
//   QKV_EXAMPLE_SOURCE  the example's file, e.g. "examples/01_illustrated_self_attention.cpp"
//   QKV_EXAMPLE_NAME    its namespace under qkv::examples, e.g. illustrated
//   QKV_EXAMPLE_NOTES   the header scripts/page_notes.py wrote from the example's source: its
//                       Step comments and static_asserts (the page's prose and proofs)
// so that the examples' compile-time proofs build in parallel and a change to one example
// rebuilds only its own object. cmd_explain.hpp declares the functions defined here.
#define QKV_EXAMPLE_NO_MAIN
#include QKV_EXAMPLE_SOURCE
#include QKV_EXAMPLE_NOTES

#include "walkthroughs.hpp"

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
