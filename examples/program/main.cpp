// main.cpp: an example program's main, linked with the example's object (example.cpp compiled
// for QKV_EXAMPLE_NAME, the same object `qkv explain` links): building the example is compiling
// that object, whose static_asserts are its proofs. The example's own file also has a main() for
// a learner who compiles it alone (g++ -std=c++20 -Iinclude examples/01_....cpp).
#include "example.hpp"

int main(int argc, char** argv) { return qkv::cli::programs::QKV_EXAMPLE_NAME(argc, argv); }
