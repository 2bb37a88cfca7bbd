// boost_wasm.hpp: what a module built over Boost for wasm32-wasi supplies (qkv_truth.cpp and
// qkv_wide.cpp; wasm/meson.build's truth_flags): Boost without exceptions, and the stack
// protector's guard. Include it once per module, after a Boost header.
#pragma once

#include <cstdio>
#include <exception>

namespace boost {
// -DBOOST_NO_EXCEPTIONS: Boost calls these where it would throw (the truth's arithmetic does not
// on finite operands, a NaN being a value; rational.hpp checks every overflow before Boost's
// integers could): the message, as core/fail.hpp writes one, and a trap
void throw_exception(const std::exception& e) {
  std::fputs("qkv: ", stderr);
  std::fputs(e.what(), stderr);
  std::fputs("\n", stderr);
  __builtin_trap();
}
void throw_exception(const std::exception& e, const boost::source_location&) { throw_exception(e); }
}  // namespace boost

extern "C" {
// Debian's compiler-rt builtins for wasm32 were built with the stack protector (__umodti3, the
// 128-bit division Boost's integers use, checks its stack): the module supplies the guard and
// what a smashed stack does
unsigned long __stack_chk_guard = 0x5a17c0deUL;
[[noreturn]] void __stack_chk_fail() { __builtin_trap(); }
}
