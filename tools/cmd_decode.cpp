// cmd_decode.cpp: `qkv decode`'s heavy part, compiled once (tools/meson.build: the library
// qkv_commands, which the tool and fuzz/decode_case_fuzz.cpp's replay link).
#include "cmd_decode.hpp"

namespace qkv::cli::decode_detail {

std::string make_output(const qkv::io::json_document& doc, bool as_json, const limits& lim,
                        std::uint64_t max_cache_bytes, bool* holds) {
  const auto c = read_case(doc, max_cache_bytes);
  const std::uint64_t T = c.q.rows(), n = qkv::io::checked_product({T, c.heads, c.dv});
  try {
    lim.check("the decoded rows (T x heads*d_v = " + std::to_string(T) + " x " +
                  std::to_string(c.heads * c.dv) + ")",
              n);
    // decoding, the full causal reference and the bound each compute heads x T x T scores (as
    // qkv attend keeps them): the work grows as T^2, so T^2 is bounded as attend's weights are
    lim.check("the scores computed (heads x T x T = " + std::to_string(c.heads) + " x " + std::to_string(T) +
                  " x " + std::to_string(T) + ")",
              qkv::io::checked_product({c.heads, T, T}));
    lim.check("the outputs (decoded rows, full causal attention" +
                  std::string(c.kern == kernel::decode_attend ? ", bound" : "") + ")",
              qkv::io::checked_product({n, c.kern == kernel::decode_attend ? 3u : 2u}));
  } catch (const qkv::io::limit_error& e) { throw input_error(doc.file() + ": " + e.what()); }
  decode_result r;
  switch (c.store) {
    case storage::float32: r = run_decode<float>(c, max_cache_bytes); break;
    case storage::bfloat16: r = run_decode<rt::bfloat16>(c, max_cache_bytes); break;
    case storage::float16: r = run_decode<rt::float16>(c, max_cache_bytes); break;
  }
  if (holds) *holds = r.holds;
  return as_json ? json_output(c, r) : text_output(c, r);
}
}  // namespace qkv::cli::decode_detail

namespace qkv::cli {

/// `qkv decode CASE.json [--json] [--max-elements N] [--max-cache-bytes N]`
int cmd_decode(const args& a) {
  std::string path;
  bool as_json = false;
  limits lim;
  std::uint64_t max_cache = decode_detail::default_max_cache_bytes;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (parse_limit_option(a, k, lim)) {
      continue;
    } else if (a[k] == "--json") {
      as_json = true;
    } else if (a[k] == "--max-cache-bytes") {
      if (k + 1 >= a.size()) throw input_error("--max-cache-bytes needs a value N (a positive whole number)");
      const auto v = a[k + 1];
      std::uint64_t n = 0;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || r.ec != std::errc{} || r.ptr != v.data() + v.size() || n == 0)
        throw input_error("--max-cache-bytes: '" + std::string(v) +
                          "' is not a positive whole number (below 2^64)");
      max_cache = n;
      ++k;
    } else {
      take_case_argument(a[k], path, decode_detail::usage);
    }
  }
  const std::string shown = case_name(path, decode_detail::usage);  // how messages name the case
  try {
    const auto doc = qkv::io::json_document::load(path, lim.max_case_bytes(), "--max-elements");
    bool holds = true;
    std::cout << decode_detail::make_output(doc, as_json, lim, max_cache, &holds);
    if (!holds) {
      std::cerr << "qkv decode: " << shown
                << ": the decoded rows do not stand in the runtime's documented relation to "
                << "full causal attention (docs/numerics.md, \"KV cache\")\n";
      return 1;
    }
    return exit_ok;
  } catch (const qkv::io::json_error& e) {
    throw input_error(e.what());
  } catch (const qkv::runtime::shape_error& e) {
    throw input_error(shown + ": " + e.what());
  } catch (const qkv::runtime::size_limit_error& e) { throw input_error(shown + ": " + e.what()); }
}

}  // namespace qkv::cli
