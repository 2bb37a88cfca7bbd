// qkv: the command-line tool (docs/cli.md).
#include <cstring>
#include <iostream>
#include <string_view>

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "--version") {
    std::cout << "qkv 0.1.0\n";
    return 0;
  }
  std::cout << "usage: qkv --help | --version | explain EXAMPLE\n";
  return 0;
}
