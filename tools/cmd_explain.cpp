// cmd_explain.cpp: `qkv explain`, compiled once (tools/meson.build: the library qkv_commands, which the
// tool links).
#include "cmd_explain.hpp"

namespace qkv::cli {

int cmd_explain(const args& a) {
  auto list = [] {
    std::string s;
    for (const auto& e : worked_examples) s += (s.empty() ? "" : ", ") + std::string(e.name);
    return s;
  };
  std::string html;
  args names;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k] == "--html") {
      if (k + 1 >= a.size())
        throw input_error("--html needs a file name (usage: qkv explain EXAMPLE [--html FILE])");
      html = std::string(a[++k]);
    } else if (!a[k].empty() && a[k][0] == '-') {  // as qkv attend: a mistyped option is named
      throw input_error("unknown option '" + std::string(a[k]) +
                        "' (usage: qkv explain EXAMPLE [--html FILE])");
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
        } catch (const std::runtime_error& err) { throw input_error(err.what()); }
      }
      // the walkthrough speaks as its tutorial does; say how it counts (issue 28)
      std::cout
          << "(counting from 1, as the tutorials do: q1, input 1 and row 1 are the first; C++ indices and\n"
             " compiler messages count from 0: q1 is row 0 of the C++ matrix)\n\n";
      e.walkthrough();
      if (!html.empty()) std::cout << wrote_line(html, true);
      return exit_ok;
    }
  throw input_error("unknown example '" + std::string(names[0]) + "'; the examples are: " + list());
}

}  // namespace qkv::cli
