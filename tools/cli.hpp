// cli.hpp: what every qkv command shares: argument lists, errors, exit statuses, the size limit
// (--max-elements) and the dtype field of a case file.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/io/limit.hpp>

namespace qkv::cli {

using args = std::vector<std::string_view>;

/// bad input (a malformed argument, file or field): the tool prints the message on stderr,
/// nothing on stdout, and exits 2
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int exit_ok = 0;
inline constexpr int exit_bad_input = 2;

/// the default of --max-elements: 2^24 numbers (64 MB as float32, about 350 MB as JSON text),
/// the per-tensor bound `qkv torch` states
inline constexpr std::uint64_t default_max_elements = std::uint64_t{1} << 24;
/// the default of --max-cells: 2^18 cells drawn in a heatmap or a page table (512 x 512; an
/// SVG cell with its tooltip is ~150 bytes, so ~40 MB of SVG)
inline constexpr std::uint64_t default_max_cells = std::uint64_t{1} << 18;
/// a case file may hold this many bytes per element allowed (a JSON number with its separator
/// is at most ~26 bytes; the rest leaves room for layout)
inline constexpr std::uint64_t case_bytes_per_element = 64;

/// @brief the size limits of a command, checked before anything of that size is allocated or
/// written (docs/cli.md, "Limits"): every buffer and every output whose size grows with the
/// input holds at most max_elements numbers (weights kept, numbers written as JSON), and every
/// picture at most max_cells cells (a heatmap, the cells of a page's tables)
struct limits {
  std::uint64_t max_elements = default_max_elements;
  std::uint64_t max_cells = default_max_cells;
  /// the most bytes a case file may have
  [[nodiscard]] std::uint64_t max_case_bytes() const {
    return io::checked_product({max_elements, case_bytes_per_element});
  }
  /// limit_error unless size <= max_elements
  void check(std::string_view what, std::uint64_t size) const { io::check_limit(what, size, max_elements); }
  /// limit_error unless cells <= max_cells
  void check_cells(std::string_view what, std::uint64_t cells) const {
    io::check_limit(what, cells, max_cells, "cells", "--max-cells");
  }
};

/// @brief when a[k] is `--max-elements N` or `--max-cells N`, read N into l, step k past it
/// and return true
inline bool parse_limit_option(const args& a, std::size_t& k, limits& l) {
  const bool elements = a[k] == "--max-elements";
  if (!elements && a[k] != "--max-cells") return false;
  const std::string opt(a[k]);
  if (k + 1 >= a.size()) throw input_error(opt + " needs a value N (a positive whole number)");
  const auto v = a[k + 1];
  std::uint64_t n = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || r.ec != std::errc{} || r.ptr != v.data() + v.size() || n == 0)
    throw input_error(opt + ": '" + std::string(v) + "' is not a positive whole number (below 2^64)");
  (elements ? l.max_elements : l.max_cells) = n;
  ++k;
  return true;
}

/// @brief the one case-file argument of attend, decode and encode: `arg` (no option of the
/// command) becomes `path`; "-" is the case on standard input; another argument starting with '-'
/// is an unknown option, named with the command's usage; a second file is refused
inline void take_case_argument(std::string_view arg, std::string& path, std::string_view usage) {
  if (arg.size() > 1 && arg[0] == '-')
    throw input_error("unknown option '" + std::string(arg) + "' (usage: " + std::string(usage) + ")");
  if (!path.empty())
    throw input_error("one case file expected, got '" + path + "' and '" + std::string(arg) + "'");
  path = std::string(arg);
}

/// @brief how messages name the case: its path, or "standard input" for "-"; the usage when no
/// case was given
inline std::string case_name(const std::string& path, std::string_view usage) {
  if (path.empty()) throw input_error("usage: " + std::string(usage));
  return path == "-" ? std::string("standard input") : path;
}

/// @brief every tensor of the case ({"dtype", "shape", "data"} objects among the top-level
/// fields, and among each object of the array `nested`, e.g. an encoder case's "layers": field
/// names "layers[0].linear1.weight") whose dtype tag names a floating type must be tagged
/// `allowed_tag`, the type the case reads its numbers as: a "float64" tensor in a float32 case
/// (or a "float32" one in a float64 case) is refused naming the field, the tag, the case's type
/// (`case_type`, with `why`: where it comes from) and the fix, never read silently as another
/// type. Tags that are no floating type ("bool", "int64": masks, flags, whole numbers) are not
/// compared.
inline void check_tensor_dtypes(const io::json_document& doc, const std::string& allowed_tag,
                                const std::string& case_type, const std::string& why, const std::string& fix,
                                const std::string& nested = "") {
  if (!doc.json().is_object()) return;
  const auto check = [&](const std::string& field, const nlohmann::json& value) {
    if (!value.is_object() || !value.contains("dtype") || !value.contains("data") ||
        !value.at("dtype").is_string())
      return;
    const auto tag = value.at("dtype").get<std::string>();
    const bool floating = tag == "float32" || tag == "float64" || tag == "bfloat16" || tag == "float16";
    if (floating && tag != allowed_tag)
      throw input_error(doc.error(field, "the tensor is tagged \"" + tag +
                                             "\" but the case reads its numbers as " + case_type + " (" +
                                             why + "); " + fix)
                            .what());
  };
  for (const auto& [key, value] : doc.json().items()) check(key, value);
  if (nested.empty() || !doc.json().contains(nested) || !doc.json().at(nested).is_array()) return;
  const auto& list = doc.json().at(nested);
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].is_object())
      for (const auto& [key, value] : list[i].items())
        check(nested + "[" + std::to_string(i) + "]." + key, value);
}

/// @brief a scalar field: a JSON number, or a 0-d tensor {"dtype", "shape": [], "data": x}
/// (what PyTorch's torch.tensor(0.125) is, written as a tensor). "NaN", "Infinity" and
/// "-Infinity" are read as such (a 0-d tensor's data may be one of them); the caller refuses
/// what it must.
inline double read_scalar(const io::json_document& doc, const std::string& field, const std::string& what) {
  const auto& s = doc.json().at(field);
  if (s.is_number()) return s.get<double>();
  if (s.is_object()) {
    const auto t = io::read_tensor<double>(doc, field, s);
    if (!t.shape.empty())
      throw input_error(doc.error(field, "expected " + what +
                                             ": a number or a 0-d tensor (shape []), got a tensor of shape " +
                                             io::detail::shape_text(t.shape))
                            .what());
    return t.data[0];
  }
  throw input_error(
      doc.error(field, "expected " + what +
                           " (a number or a 0-d tensor {\"dtype\", \"shape\": [], \"data\"}), got " +
                           s.dump())
          .what());
}

/// @brief `scale`, read by read_scalar, must be finite in T, the type it multiplies the scores
/// in: NaN or an infinity, or a double past T's largest finite value (1e39 in float32), is
/// refused naming the field (the scores would all be NaN or infinite)
template <class T>
[[nodiscard]] T read_finite_scale(const io::json_document& doc, const std::string& field = "scale") {
  const double v = read_scalar(doc, field, "a finite number");
  if (!std::isfinite(v) || !std::isfinite(static_cast<T>(v)))
    throw input_error(
        doc.error(field,
                  "expected a finite number" +
                      std::string(std::isfinite(v)
                                      ? " within " + std::string(io::dtype_name<T>()) +
                                            "'s range (its largest is " +
                                            io::detail::shortest<T>(std::numeric_limits<T>::max()) + ")"
                                      : "") +
                      ", got " + (std::isnan(v) ? std::string("NaN") : doc.json().at(field).dump()))
            .what());
  return static_cast<T>(v);
}

/// the arithmetic type a case asks for
enum class dtype { float32, float64 };

/// @brief the case's optional top-level "dtype": "float32" (the default) or "float64"
[[nodiscard]] inline dtype read_dtype(const io::json_document& doc) {
  if (!doc.json().contains("dtype")) return dtype::float32;
  const auto& d = doc.json().at("dtype");
  if (d == "float32") return dtype::float32;
  if (d == "float64") return dtype::float64;
  throw input_error(doc.error("dtype", "expected \"float32\" or \"float64\", got " + d.dump()).what());
}

/// the line a command prints on stdout after writing a file an option named (--html, --svg):
/// "wrote page.html (open file:///abs/page.html in a browser)"; the page's address so that a
/// learner can paste it (spaces and '%' escaped, the rest as it is)
[[nodiscard]] inline std::string wrote_line(const std::string& path, bool page) {
  std::string line = "wrote " + path;
  if (page) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(path, ec);
    std::string url = "file://";
    for (char c : (ec ? path : abs.string()))
      url += c == ' ' ? std::string("%20") : c == '%' ? std::string("%25") : std::string(1, c);
    line += " (open " + url + " in a browser)";
  }
  return line + "\n";
}

}  // namespace qkv::cli
