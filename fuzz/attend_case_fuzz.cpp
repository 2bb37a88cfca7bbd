// attend_case_fuzz.cpp: libFuzzer target for `qkv attend`'s case reader. Any bytes, as a case
// file: either a clear error (input_error, json_error, shape_error: exit 2 in the tool), or a
// case that runs, whose trace, --json output, heatmap and page are made (nothing is written),
// and whose --json output reads back as itself, bit for bit (NaN as NaN). Chapter two's fields
// (rope, kv_heads, causal_alignment, window, alibi, bias) and the 16-bit dtypes run too: the
// pages show them (tools/attend_page.hpp), nothing is refused for them. A batch case (x [B, T, d],
// lengths or key_padding [B, S]) makes its trace and --json (it has no page: --svg/--html are
// refused for it), and every sequence's --json object reads back as that sequence's result.
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
  (void)qkv::cli::attend_detail::read_attend_dtype(doc, pc.half);  // "bfloat16", "float16": inputs rounded
  if (qkv::cli::attend_detail::is_batch(
          doc)) {  // a batch (x [B, T, d]): trace and --json, one result per sequence
    const auto o =
        qkv::cli::attend_detail::make_outputs<T>(doc, pc, true, false, false, qkv::fuzz::small_limits());
    if (o.text.empty() || o.json.empty() || o.batch.empty()) std::abort();
    const auto back = qkv::io::json_document::parse(o.json, "output");
    const auto& seqs = back.json().at("sequences");
    if (seqs.size() != o.batch.size()) std::abort();
    for (std::size_t b = 0; b < o.batch.size(); ++b) {  // each sequence's object reads back as its result
      qkv::fuzz::check_round_trip(seqs[b].dump(), "output", o.batch[b].output);
      qkv::fuzz::check_round_trip(seqs[b].dump(), "queries", o.batch[b].queries);
    }
    return;
  }
  const auto o =
      qkv::cli::attend_detail::make_outputs<T>(doc, pc, true, true, true, qkv::fuzz::small_limits());
  if (o.text.empty() || o.json.empty() || o.svg.empty() || o.html.empty()) std::abort();
  qkv::fuzz::check_round_trip(o.json, "output", o.result.output);
  qkv::fuzz::check_round_trip(o.json, "queries", o.result.queries);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // as qkv::fuzz::run_case, but with the attend dtypes: "bfloat16" and "float16" run as float
  // (their inputs rounded), which cli::read_dtype (run_case's) does not know
  try {
    const auto doc =
        qkv::io::json_document::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    qkv::cli::attend_detail::check_case(doc);
    std::string half;
    if (qkv::cli::attend_detail::read_attend_dtype(doc, half) == qkv::cli::dtype::float64)
      one<double>(doc);
    else
      one<float>(doc);
  } catch (const qkv::cli::input_error&) {
  } catch (const qkv::io::json_error&) {
  } catch (const qkv::runtime::shape_error&) {}
  return 0;
}
