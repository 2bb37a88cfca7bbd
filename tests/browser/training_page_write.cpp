// training_page_write.cpp: writes the training page of a trace, as `qkv train --html` will, so
// that tests/browser/training_page_test.py can test the page before the tool has the command.
//
//   training_page_write TRACE.json OUT.html
//
// A bad trace: the message on stderr, exit 2, nothing written (the tool's rule for bad input).
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <qkv/io/file.hpp>
#include <qkv/io/training_page.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: training_page_write TRACE.json OUT.html\n";
    return 2;
  }
  try {
    const qkv::io::training_page_limits limits;
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw std::runtime_error(std::string(argv[1]) + ": cannot open the file");
    std::string text;
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      if (text.size() + static_cast<std::size_t>(in.gcount()) > limits.trace_bytes)
        throw qkv::io::limit_error(std::string(argv[1]) + ": the trace is more than " +
                                   std::to_string(limits.trace_bytes) + " bytes, the limit");
      text.append(buf, static_cast<std::size_t>(in.gcount()));
    }
    std::ostringstream page;
    qkv::io::write_training_page(page, text, argv[1], limits);
    qkv::io::write_text_file(argv[2], page.str());
  } catch (const std::exception& e) {
    std::cerr << "training_page_write: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
