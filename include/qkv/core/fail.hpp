// fail.hpp: how the core reports an error at run time, with or without C++ exceptions.
//
//   qkv::detail::fail<std::length_error>(message)
//
// With exceptions (every native build): throws E(message), as the core always did, so callers
// catch the same type with the same what(). Without them (the WebAssembly build, wasm/: WASI's
// libc++ has no exceptions, and clang refuses a `throw` under -fno-exceptions even in code that
// never runs): writes "qkv: " + message to stderr and traps, so the message is the same and
// nothing continues past the error. At compile time either form is not a constant expression,
// so a constexpr call that would fail does not compile (as a throw did).
#pragma once

#include <string>

#if !defined(__cpp_exceptions)
#include <cstdio>
#endif

namespace qkv::detail {

/// throws E(message) natively; without exceptions prints "qkv: message" to stderr and traps
template <class E>
[[noreturn]] constexpr void fail(const std::string& message) {
#if defined(__cpp_exceptions)
  throw E(message);
#else
  std::fputs(("qkv: " + message + "\n").c_str(), stderr);
  __builtin_trap();
#endif
}

}  // namespace qkv::detail
