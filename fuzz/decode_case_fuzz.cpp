// decode_case_fuzz.cpp: libFuzzer target for `qkv decode`'s case reader. Any bytes, as a case
// file: either a clear error (input_error, json_error, shape_error: exit 2 in the tool), or a
// case that decodes through the KV cache (every storage, both kernels, as the case asks), whose
// text and --json outputs are made (nothing is written), and whose decoded rows stand in the
// runtime's documented relation to full causal attention (abort otherwise: a finding).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "../tools/cmd_decode.hpp"
#include "case_fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto doc =
        qkv::io::json_document::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    constexpr std::uint64_t max_cache = std::uint64_t{1}
                                        << 16;  // small, as small_limits(): one input stays fast
    bool holds = true;
    const auto text =
        qkv::cli::decode_detail::make_output(doc, false, qkv::fuzz::small_limits(), max_cache, &holds);
    if (text.empty() || !holds) std::abort();
    const auto json =
        qkv::cli::decode_detail::make_output(doc, true, qkv::fuzz::small_limits(), max_cache, &holds);
    if (json.empty() || !holds) std::abort();
    (void)qkv::io::json_document::parse(json, "output");  // the --json output is JSON
  } catch (const qkv::cli::input_error&) {
  } catch (const qkv::io::json_error&) {
  } catch (const qkv::runtime::shape_error&) {}
  return 0;
}
