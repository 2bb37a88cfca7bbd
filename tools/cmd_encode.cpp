// cmd_encode.cpp: `qkv encode`'s heavy part, compiled once (tools/meson.build: the library
// qkv_commands, which the tool and fuzz/encode_case_fuzz.cpp's replay link): the encoder layers
// for float and double, declared `extern template` in cmd_encode.hpp.
#include "cmd_encode.hpp"

namespace qkv::cli::encode_detail {

template outputs<float> make_outputs<float>(const qkv::io::json_document&, bool, const limits&);
template outputs<double> make_outputs<double>(const qkv::io::json_document&, bool, const limits&);

}  // namespace qkv::cli::encode_detail

namespace qkv::cli {

/// `qkv encode CASE.json [--json] [--max-elements N]`
int cmd_encode(const args& a) {
  std::string path;
  bool as_json = false;
  limits lim;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto arg = a[k];
    if (parse_limit_option(a, k, lim)) continue;
    if (arg == "--json")
      as_json = true;
    else
      take_case_argument(arg, path, encode_detail::usage);
  }
  const std::string shown = case_name(path, encode_detail::usage);  // how messages name the case
  try {
    const auto doc = encode_detail::load(path, lim);
    encode_detail::check_case(doc);
    encode_detail::check_encode_dtypes(doc);  // x's and every layer tensor's tag agree with the case
    return read_dtype(doc) == dtype::float64 ? encode_detail::run<double>(doc, as_json, lim)
                                             : encode_detail::run<float>(doc, as_json, lim);
  } catch (const qkv::io::json_error& e) {
    throw input_error(e.what());
  } catch (const qkv::runtime::shape_error& e) { throw input_error(shown + ": " + e.what()); }
}

}  // namespace qkv::cli
