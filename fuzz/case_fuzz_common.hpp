// case_fuzz_common.hpp: what the attend and encode case fuzz targets share: the exceptions a
// malformed case may end in (each is exit 2 with a message in the tool), and the round-trip
// check of the JSON the tool writes.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include <qkv/io/json.hpp>
#include <qkv/io/limit.hpp>
#include <qkv/runtime/dynamic_matrix.hpp>

#include "../tools/cli.hpp"

namespace qkv::fuzz {

/// the limits the fuzz targets run under: small, so that one input stays fast; a case past them
/// is refused with limit_error (turned into input_error) before anything is allocated
inline cli::limits small_limits() {
  cli::limits l;
  l.max_elements = 4096;
  l.max_cells = 4096;
  return l;
}

/// the same bits, or both NaN (a NaN's payload is not kept: docs/cli.md)
template <class T>
[[nodiscard]] bool same(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
  else
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

/// m, written by the tool as the field `field` of `json`, reads back as itself; abort otherwise
template <class T>
void check_round_trip(const std::string& json, const std::string& field,
                      const runtime::dynamic_matrix<T>& m) {
  const auto doc = io::json_document::parse(json, "output");
  const auto back = io::read_matrix_field<T>(doc, field);
  if (back.rows() != m.rows() || back.cols() != m.cols()) std::abort();
  for (std::size_t k = 0; k < m.size(); ++k)
    if (!same(back.data()[k], m.data()[k])) std::abort();
}

/// one fuzz input as a case file: `check` its top level, then `one(doc, T{})` in the case's
/// dtype. The errors a malformed case may end in (each is exit 2 with a message in the tool) are
/// the expected outcome; anything else escapes to libFuzzer as a finding.
template <class Check, class One>
int run_case(const std::uint8_t* data, std::size_t size, Check check, One one) {
  try {
    const auto doc =
        io::json_document::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    check(doc);
    if (cli::read_dtype(doc) == cli::dtype::float64)
      one(doc, double{});
    else
      one(doc, float{});
  } catch (const cli::input_error&) {
  } catch (const io::json_error&) {
  } catch (const runtime::shape_error&) {}
  return 0;
}

}  // namespace qkv::fuzz
