// cmd_attend.cpp: `qkv attend`'s heavy part, compiled once (tools/meson.build: the library
// qkv_commands, which the tool and fuzz/attend_case_fuzz.cpp's replay link): the attention and
// every output for float and double, declared `extern template` in cmd_attend.hpp.
#include "cmd_attend.hpp"

namespace qkv::cli::attend_detail {

template outputs<float> make_outputs<float>(const qkv::io::json_document&, parsed_case&, bool, bool, bool,
                                            const limits&, arithmetic);
template outputs<double> make_outputs<double>(const qkv::io::json_document&, parsed_case&, bool, bool, bool,
                                              const limits&, arithmetic);

}  // namespace qkv::cli::attend_detail

namespace qkv::cli {

/// `qkv attend CASE.json [--json] [--svg FILE] [--html FILE] [--arithmetic runtime|core]
/// [--max-elements N] [--max-cells N]`
int cmd_attend(const args& a) {
  std::string path, svg, html;
  bool as_json = false;
  auto how = attend_detail::arithmetic::unset;
  limits lim;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (parse_limit_option(a, k, lim)) {
      continue;
    } else if (a[k] == "--json") {
      as_json = true;
    } else if (a[k] == "--arithmetic") {
      if (k + 1 >= a.size() || (a[k + 1] != "runtime" && a[k + 1] != "core"))
        throw input_error(
            "--arithmetic needs runtime (the runtime path, the default) or core (the core's "
            "arithmetic, core/flat_attention.hpp), got " +
            (k + 1 < a.size() ? "'" + std::string(a[k + 1]) + "'" : std::string("nothing")));
      how = a[k + 1] == "core" ? attend_detail::arithmetic::core : attend_detail::arithmetic::runtime;
      ++k;
    } else if (a[k] == "--svg" || a[k] == "--html") {
      if (k + 1 >= a.size()) throw input_error(std::string(a[k]) + " needs a file name");
      (a[k] == "--svg" ? svg : html) = std::string(a[k + 1]);
      ++k;
    } else {
      take_case_argument(a[k], path, attend_detail::usage);
    }
  }
  const std::string shown = case_name(path, attend_detail::usage);  // how messages name the case
  attend_detail::check_outputs(path, svg, html);
  try {
    const auto doc = attend_detail::load(path, lim);
    attend_detail::check_case(doc);
    attend_detail::parsed_case pc;
    pc.file = shown;
    const dtype d = attend_detail::read_attend_dtype(doc, pc.half);
    attend_detail::check_attend_dtypes(doc);  // every tensor's tag agrees with d
    return d == dtype::float64 ? attend_detail::run<double>(doc, pc, as_json, svg, html, lim, how)
                               : attend_detail::run<float>(doc, pc, as_json, svg, html, lim, how);
  } catch (const qkv::io::json_error& e) {
    throw input_error(e.what());
  } catch (const qkv::runtime::shape_error& e) {
    throw input_error(shown + ": " + e.what());
  } catch (const qkv::runtime::size_limit_error& e) { throw input_error(shown + ": " + e.what()); }
}

}  // namespace qkv::cli
