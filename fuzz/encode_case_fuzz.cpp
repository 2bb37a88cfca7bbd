// encode_case_fuzz.cpp: libFuzzer target for `qkv encode`'s case reader. Any bytes, as a case
// file: either a clear error (input_error, json_error, shape_error: exit 2 in the tool), or a
// case whose layers run, whose trace is made, and whose --json output reads back as itself,
// bit for bit (NaN as NaN).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "../tools/cmd_encode.hpp"
#include "case_fuzz_common.hpp"

namespace {

template <class T>
void one(const qkv::io::json_document& doc) {
  const auto lim = qkv::fuzz::small_limits();
  const auto o = qkv::cli::encode_detail::make_outputs<T>(doc, true, lim);
  qkv::fuzz::check_round_trip(o.text, "output", o.output);
  if (qkv::cli::encode_detail::make_outputs<T>(doc, false, lim).text.empty()) std::abort();  // the trace
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return qkv::fuzz::run_case(data, size, qkv::cli::encode_detail::check_case,
                             [](const qkv::io::json_document& doc, auto tag) { one<decltype(tag)>(doc); });
}
