// example.hpp: the worked examples as `qkv explain` and the example programs see them. For each
// example of examples/examples.json built in this qkv (examples_list.hpp, which
// scripts/examples.py makes at build time), three functions, defined by
// examples/program/example.cpp compiled once for that example (examples/meson.build):
//   walkthroughs::NAME()          prints the walkthrough (qkv explain NAME)
//   pages::NAME(page)             fills the learner's page (qkv explain NAME --html FILE)
//   programs::NAME(argc, argv)    the example program's main (examples/program/main.cpp)
#pragma once

#include "examples_list.hpp"

namespace qkv::io {
class page;
}

namespace qkv::cli {

namespace walkthroughs {
#define QKV_DECLARE_WALKTHROUGH(name, program) void name();
QKV_EXAMPLES(QKV_DECLARE_WALKTHROUGH)
#undef QKV_DECLARE_WALKTHROUGH
}  // namespace walkthroughs

// each fills `p` and returns true, or returns false when the example has no page() yet
namespace pages {
#define QKV_DECLARE_PAGE(name, program) bool name(qkv::io::page& p);
QKV_EXAMPLES(QKV_DECLARE_PAGE)
#undef QKV_DECLARE_PAGE
}  // namespace pages

namespace programs {
#define QKV_DECLARE_PROGRAM(name, program) int name(int argc, char** argv);
QKV_EXAMPLES(QKV_DECLARE_PROGRAM)
#undef QKV_DECLARE_PROGRAM
}  // namespace programs

}  // namespace qkv::cli
