// example_not_built.cpp: a worked example's walkthrough in a qkv built with -Dexamples=false (the light
// install, docs/design.md "Install"): the function cmd_explain.hpp calls exists, and says why
// there is nothing to show instead of compiling the example and its proofs.
//
// tools/meson.build compiles this file once per example of examples/examples.json, with
// QKV_EXAMPLE_NAME its name, e.g. illustrated, in place of examples/program/example.cpp.
#include <string>

#include "../examples/program/example.hpp"
#include "cli.hpp"

#define QKV_STRINGIFY_(x) #x
#define QKV_STRINGIFY(x) QKV_STRINGIFY_(x)

void qkv::cli::walkthroughs::QKV_EXAMPLE_NAME() {
  throw qkv::cli::input_error(std::string("the worked example '") + QKV_STRINGIFY(QKV_EXAMPLE_NAME) +
                              "' is not in this qkv: it was built with -Dexamples=false (the light "
                              "install); build with -Dexamples=true, or read examples/ in qkv's source");
}

// its learner's page (qkv explain NAME --html FILE): the same refusal
bool qkv::cli::pages::QKV_EXAMPLE_NAME(qkv::io::page&) {
  qkv::cli::walkthroughs::QKV_EXAMPLE_NAME();
  return false;
}
