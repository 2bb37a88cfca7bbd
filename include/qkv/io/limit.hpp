// limit.hpp: a size checked against a stated limit before anything of that size is allocated
// or written.
//
//   const auto cells = qkv::io::checked_product({heads, t, s});   // saturates, never wraps
//   qkv::io::check_limit("the --svg heatmap", cells, max_elements);
//   // throws limit_error: "the --svg heatmap would be 36000000 elements, above the limit of
//   // 16777216 (raise it with --max-elements N)"
//
// The qkv tool turns a limit_error into exit status 2 (docs/cli.md, "Limits").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace qkv::io {

/// a size above its limit: what() names the size, the limit and how to raise it
struct limit_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// @brief the product of the factors, saturating at the largest uint64 (hostile shapes must not
/// wrap around to a small number); 0 when any factor is 0
[[nodiscard]] constexpr std::uint64_t checked_product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t p = 1;
  for (const auto f : factors) {
    if (f == 0) return 0;
  }
  for (const auto f : factors) {
    if (p > std::numeric_limits<std::uint64_t>::max() / f) return std::numeric_limits<std::uint64_t>::max();
    p *= f;
  }
  return p;
}

/// @brief the sum, saturating at the largest uint64
[[nodiscard]] constexpr std::uint64_t checked_sum(std::initializer_list<std::uint64_t> terms) {
  std::uint64_t s = 0;
  for (const auto t : terms) {
    if (s > std::numeric_limits<std::uint64_t>::max() - t) return std::numeric_limits<std::uint64_t>::max();
    s += t;
  }
  return s;
}

/// @brief throw limit_error when size > limit: "WHAT would be SIZE UNIT, above the limit of
/// LIMIT (raise it with OPTION N)"
inline void check_limit(std::string_view what, std::uint64_t size, std::uint64_t limit,
                        std::string_view unit = "elements", std::string_view option = "--max-elements") {
  if (size <= limit) return;
  const std::string shown =
      size == std::numeric_limits<std::uint64_t>::max() ? "at least 2^64 - 1" : std::to_string(size);
  throw limit_error(std::string(what) + " would be " + shown + " " + std::string(unit) +
                    ", above the limit of " + std::to_string(limit) + " (raise it with " +
                    std::string(option) + " N)");
}

}  // namespace qkv::io
