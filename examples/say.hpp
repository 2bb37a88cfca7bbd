// say.hpp: printf-style lines for the examples, written through std::cout.
//
// `qkv explain` captures std::cout to print an example's walkthrough; a line written with
// printf would bypass it and come out of order. Shared by the examples that format numbers
// (07, 08); the others print with io/print.hpp and operator<<.
#pragma once

#include <cstdio>
#include <iostream>

namespace qkv::examples {

/// printf-style formatting written through std::cout (at most 511 characters a call)
template <class... A>
inline void say(const char* format, A... args) {
  if constexpr (sizeof...(A) == 0) {
    std::cout << format;
  } else {
    char buf[512];
    std::snprintf(buf, sizeof buf, format, args...);
    std::cout << buf;
  }
}

}  // namespace qkv::examples
