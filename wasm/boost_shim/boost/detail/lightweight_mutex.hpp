// wasm/boost_shim: found before Boost's own headers when wasm/qkv_truth.cpp is built for
// wasm32-wasi, which has no threads and no std::mutex. Boost.Math's caches (its Bernoulli numbers,
// included by Boost.Multiprecision's cpp_bin_float.hpp) lock this mutex; one thread needs none,
// so it does nothing.
#pragma once

namespace boost::detail {

class lightweight_mutex {
 public:
  lightweight_mutex() = default;
  lightweight_mutex(const lightweight_mutex&) = delete;
  lightweight_mutex& operator=(const lightweight_mutex&) = delete;

  class scoped_lock {
   public:
    explicit scoped_lock(lightweight_mutex&) {}
    scoped_lock(const scoped_lock&) = delete;
    scoped_lock& operator=(const scoped_lock&) = delete;
  };
};

}  // namespace boost::detail
