// attend_case_fuzz.cpp: libFuzzer target for `qkv attend`'s case reader. Any bytes, as a case
// file: either a clear error (input_error, json_error, shape_error: exit 2 in the tool), or a
// case that runs, whose trace, --json output, heatmap and page are made (nothing is written),
// and whose --json output reads back as itself, bit for bit (NaN as NaN).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "../tools/cmd_attend.hpp"
#include "case_fuzz_common.hpp"

namespace {

template <class T>
void one(const qkv::io::json_document& doc) {
  qkv::cli::attend_detail::parsed_case pc;
  pc.file = doc.file();
  const auto o = qkv::cli::attend_detail::make_outputs<T>(doc, pc, true, true, true, qkv::fuzz::small_limits());
  if (o.text.empty() || o.json.empty() || o.svg.empty() || o.html.empty()) std::abort();
  qkv::fuzz::check_round_trip(o.json, "output", o.result.output);
  qkv::fuzz::check_round_trip(o.json, "queries", o.result.queries);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return qkv::fuzz::run_case(data, size, qkv::cli::attend_detail::check_case,
                             [](const qkv::io::json_document& doc, auto tag) { one<decltype(tag)>(doc); });
}
