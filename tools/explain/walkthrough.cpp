// walkthrough.cpp: one worked example's walkthrough, compiled into the tool in a file of its own.
//
// tools/meson.build compiles this file once per example, with
//   QKV_EXAMPLE_SOURCE  the example's file, e.g. "examples/01_illustrated_self_attention.cpp"
//   QKV_EXAMPLE_NAME    its namespace under qkv::examples, e.g. illustrated
// so that the examples' compile-time proofs build in parallel and a change to one example
// rebuilds only its own object. cmd_explain.hpp declares the functions defined here.
#define QKV_EXAMPLE_NO_MAIN
#include QKV_EXAMPLE_SOURCE

#include "walkthroughs.hpp"

void qkv::cli::walkthroughs::QKV_EXAMPLE_NAME() { qkv::examples::QKV_EXAMPLE_NAME::walkthrough(); }
