// cli.hpp: what every qkv command shares: argument lists, errors, exit statuses.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::cli {

using args = std::vector<std::string_view>;

/// bad input (a malformed argument, file or field): the tool prints the message on stderr,
/// nothing on stdout, and exits 2
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int exit_ok = 0;
inline constexpr int exit_bad_input = 2;

}  // namespace qkv::cli
