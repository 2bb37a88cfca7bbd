// json.hpp: the tool's tensor JSON: {"dtype", "shape", "data"}, read with every field checked
// and written so that every number reads back to the same bits.
//
// Format (docs/cli.md; the format of tests/data/reference/):
//   {"dtype": "float32", "shape": [2, 3], "data": [[1, 2, 3], [4, 5, 6]]}
// data is nested row-major to match shape; [] is a scalar. float32 values are written as the
// shortest decimal of the double that equals them (std::to_chars((double)f)): parsing it as a
// double and rounding to float gives back the same bits. float64 values are written in shortest
// round-trip form. JSON has no infinities and no NaN: they are written as the strings "NaN",
// "Infinity" and "-Infinity" (the spellings of JSON5 and of Python's float()), and those strings
// read back as themselves (a NaN's sign and payload are not kept: it reads as the quiet NaN).
//
// Reading is strict, so that a file means one thing:
// - a number that does not fit the type is refused (1e39 in a float32 tensor: float32's largest
//   finite value is 3.4028235e38; the same rule as `qkv torch`); a tiny one rounds (to 0), as
//   PyTorch rounds it;
// - null is refused, unless the field is one where -inf is meant (null_means::minus_infinity:
//   an additive mask), where it reads as -inf;
// - a key that appears twice in one object is refused (nlohmann would keep the last silently);
// - a file that is a directory, or longer than the caller's byte limit, is refused by name.
// Reading also accepts a bare nested array ([[1, 2], [3, 4]]) and, for masks, booleans.
// Every error is a json_error naming the file, the field, what was expected and what was found.
#pragma once

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "../runtime/dynamic_matrix.hpp"
#include "limit.hpp"

namespace qkv::io {

/// bad JSON input: what() names the file, the field, the expected and the actual
struct json_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// the dtype name of a number type: "float32", "float64"
template <class T>
[[nodiscard]] constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float32";
  else if constexpr (std::is_same_v<T, double>)
    return "float64";
  else if constexpr (std::is_same_v<T, unsigned char> || std::is_same_v<T, bool>)
    return "bool";
  else
    return "unknown";
}

// ---------------------------------------------------------------------------------------------
// writing

/// how a non-finite number is spelt in the tool's JSON: "NaN", "Infinity", "-Infinity"
[[nodiscard]] inline const char* non_finite_text(double d) {
  return std::isnan(d) ? "\"NaN\"" : d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
}

/// append one number: shortest round trip of (double)x; -0 as -0.0 (a JSON reader takes "-0" for
/// the integer 0); NaN and the infinities as the strings "NaN", "Infinity", "-Infinity"
template <class T>
void write_number(std::string& out, T x) {
  if constexpr (std::is_same_v<T, unsigned char> || std::is_same_v<T, bool>) {
    out += x ? "true" : "false";
  } else {
    const double d = static_cast<double>(x);
    if (!std::isfinite(d)) {
      out += non_finite_text(d);
      return;
    }
    if (d == 0 && std::signbit(d)) {  // "-0" would read back as the integer 0, losing the sign
      out += "-0.0";
      return;
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);
    out.append(buf, r.ptr);
  }
}

/// a (rows, cols) tensor: {"dtype": ..., "shape": [rows, cols], "data": [[...], ...]}
template <class T>
void write_tensor(std::string& out, const runtime::dynamic_matrix<T>& m) {
  out += "{\"dtype\": \"";
  out += dtype_name<T>();
  out += "\", \"shape\": [" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "], \"data\": [";
  for (std::size_t i = 0; i < m.rows(); ++i) {
    out += i ? ", [" : "[";
    for (std::size_t j = 0; j < m.cols(); ++j) {
      if (j) out += ", ";
      write_number(out, m(i, j));
    }
    out += "]";
  }
  out += "]}";
}

/// a stack of n same-shaped matrices as an (n, rows, cols) tensor; rows, cols are used when n = 0
template <class T>
void write_tensor(std::string& out, const std::vector<runtime::dynamic_matrix<T>>& s, std::size_t rows = 0,
                  std::size_t cols = 0) {
  if (!s.empty()) {
    rows = s[0].rows();
    cols = s[0].cols();
  }
  out += "{\"dtype\": \"";
  out += dtype_name<T>();
  out += "\", \"shape\": [" + std::to_string(s.size()) + ", " + std::to_string(rows) + ", " +
         std::to_string(cols) + "], \"data\": [";
  for (std::size_t n = 0; n < s.size(); ++n) {
    out += n ? ", [" : "[";
    for (std::size_t i = 0; i < rows; ++i) {
      out += i ? ", [" : "[";
      for (std::size_t j = 0; j < cols; ++j) {
        if (j) out += ", ";
        write_number(out, s[n](i, j));
      }
      out += "]";
    }
    out += "]";
  }
  out += "]}";
}

/// a vector as a 1-d tensor
template <class T>
void write_tensor(std::string& out, const std::vector<T>& v) {
  out += "{\"dtype\": \"";
  out += dtype_name<T>();
  out += "\", \"shape\": [" + std::to_string(v.size()) + "], \"data\": [";
  for (std::size_t j = 0; j < v.size(); ++j) {
    if (j) out += ", ";
    write_number(out, v[j]);
  }
  out += "]}";
}

/// the tensor as a string
template <class M>
[[nodiscard]] std::string to_json_string(const M& m) {
  std::string s;
  write_tensor(s, m);
  return s;
}

// ---------------------------------------------------------------------------------------------
// reading

/// @brief a parsed JSON document that remembers its file name for error messages
class json_document {
 public:
  /// read and parse `path`; json_error naming the file on failure ("is a directory", "cannot
  /// open the file"); limit_error when it holds more than max_bytes (read in pieces, so a
  /// device such as /dev/zero stops there too); `option` is how the caller's user raises it
  static json_document load(const std::string& path,
                            std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max(),
                            std::string_view option = "") {
    // "-": standard input (named so in messages), read under the same limit
    const bool std_in = path == "-";
    const std::string name = std_in ? std::string("standard input") : path;
    std::error_code ec;
    if (!std_in && std::filesystem::is_directory(path, ec))
      throw json_error(path + ": is a directory, not a JSON file");
    std::ifstream file;
    if (!std_in) {
      file.open(path, std::ios::binary);
      if (!file) throw json_error(path + ": cannot open the file");
    }
    std::istream& in = std_in ? std::cin : file;
    std::string text;
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      const auto n = static_cast<std::uint64_t>(in.gcount());
      if (text.size() + n > max_bytes)
        throw limit_error(
            name + ": the " + (std_in ? "input" : "file") + " is more than " + std::to_string(max_bytes) +
            " bytes, the limit" +
            (option.empty() ? std::string() : " (raise it with " + std::string(option) + " N)"));
      text.append(buf, static_cast<std::size_t>(n));
    }
    if (in.bad()) throw json_error(name + ": cannot read the " + (std_in ? "input" : "file"));
    return parse(text, name);
  }

  /// parse text; `name` stands for the file in messages. A key twice in one object is an error
  /// naming it ("field 'config.nhead': the key appears twice in one object").
  static json_document parse(const std::string& text, const std::string& name) {
    json_document d;
    d.file_ = name;
    // the open objects and arrays, to name a duplicate key by its path
    struct frame {
      bool object;
      std::set<std::string> keys;
      std::string key;        // object: the key being read
      std::size_t index = 0;  // array: the element being read
    };
    std::vector<frame> open;
    struct duplicate {
      std::string field;
    };
    auto path_of = [&open](const std::string& last) {
      std::string p;
      for (std::size_t k = 0; k + 1 < open.size(); ++k)
        p +=
            open[k].object ? (p.empty() ? "" : ".") + open[k].key : "[" + std::to_string(open[k].index) + "]";
      return p + (p.empty() ? "" : ".") + last;
    };
    auto element_done = [&open] {
      if (!open.empty() && !open.back().object) ++open.back().index;
    };
    using event = nlohmann::json::parse_event_t;
    const nlohmann::json::parser_callback_t check = [&](int, event e, nlohmann::json& parsed) {
      switch (e) {
        case event::object_start:
        case event::array_start: open.push_back(frame{e == event::object_start, {}, {}, 0}); break;
        case event::key: {
          auto k = parsed.get<std::string>();
          if (!open.back().keys.insert(k).second) throw duplicate{path_of(k)};
          open.back().key = std::move(k);
          break;
        }
        case event::object_end:
        case event::array_end:
          open.pop_back();
          element_done();
          break;
        case event::value: element_done(); break;
      }
      return true;
    };
    try {
      d.json_ = nlohmann::json::parse(text, check);
    } catch (const duplicate& e) {
      throw d.error(e.field,
                    "the key appears twice in one object (each key once: which one would be meant?)");
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e400
      throw json_error(name + ": not valid JSON: " + e.what());
    }
    return d;
  }

  [[nodiscard]] const nlohmann::json& json() const { return json_; }
  [[nodiscard]] const std::string& file() const { return file_; }

  /// the error for `field`: "FILE: field 'wq': MESSAGE"
  [[nodiscard]] json_error error(const std::string& field, const std::string& message) const {
    return json_error(file_ + ": field '" + field + "': " + message);
  }

 private:
  std::string file_;
  nlohmann::json json_;
};

/// what null means in a tensor: refused (every field holding values), or -inf (a field where
/// -inf is meant: an additive mask)
enum class null_means { error, minus_infinity };

/// @brief x fits in T: |x| at most T's largest finite value (float32: 3.4028235e38). The rule
/// `qkv torch` applies to its LO, HI, MEAN and STD.
template <class T>
[[nodiscard]] constexpr bool fits(double x) {
  const double top = static_cast<double>(std::numeric_limits<T>::max());
  return x >= -top && x <= top;
}

namespace detail {

[[nodiscard]] inline std::string kind_of(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array of " + std::to_string(j.size());
  return "an object";
}

[[nodiscard]] inline std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

/// the shortest decimal that reads back as x (3.4028235e+38 for float32's largest)
template <class T>
[[nodiscard]] std::string shortest(T x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

/// the most dimensions a tensor may have (a bound on the recursion, too)
inline constexpr std::size_t max_rank = 8;

/// the shape of a bare nested array, from its first elements (flatten checks the rest)
inline void infer_shape(const json_document& doc, const std::string& field, const nlohmann::json& j,
                        std::vector<std::size_t>& shape, std::size_t depth) {
  if (!j.is_array()) return;
  if (depth >= max_rank)
    throw doc.error(field, "arrays nested deeper than " + std::to_string(max_rank) + " levels");
  if (depth == shape.size()) shape.push_back(j.size());
  if (j.empty()) return;
  infer_shape(doc, field, j[0], shape, depth + 1);
}

/// flatten data to values, checking it against shape at every level
template <class T>
void flatten(const json_document& doc, const std::string& field, const nlohmann::json& j,
             const std::vector<std::size_t>& shape, std::size_t depth, std::string at, std::vector<T>& out,
             null_means nulls) {
  if (depth == shape.size()) {
    if constexpr (std::is_same_v<T, unsigned char>) {
      if (j.is_boolean())
        out.push_back(j.get<bool>() ? 1 : 0);
      else if (j.is_number_integer() && (j.get<long long>() == 0 || j.get<long long>() == 1))
        out.push_back(static_cast<unsigned char>(j.get<long long>()));
      else
        throw doc.error(field, "element " + at + " must be true or false (or 0 or 1), got " + kind_of(j));
    } else {
      constexpr T inf = std::numeric_limits<T>::infinity();
      if (j.is_number()) {
        const double v = j.get<double>();
        if (!fits<T>(v))
          throw doc.error(field, "element " + at + " = " + j.dump() + " does not fit in " + dtype_name<T>() +
                                     " (its largest finite value is " +
                                     shortest(std::numeric_limits<T>::max()) +
                                     "; write \"Infinity\" or \"-Infinity\" for an infinity)");
        out.push_back(static_cast<T>(v));
      } else if (j.is_string() && j == "NaN") {
        out.push_back(std::numeric_limits<T>::quiet_NaN());
      } else if (j.is_string() && j == "Infinity") {
        out.push_back(inf);
      } else if (j.is_string() && j == "-Infinity") {
        out.push_back(-inf);
      } else if (j.is_null() && nulls == null_means::minus_infinity) {
        out.push_back(-inf);
      } else if (j.is_null()) {
        throw doc.error(field, "element " + at +
                                   " is null, which this field does not take (null means -inf only in a "
                                   "mask; write \"-Infinity\", \"Infinity\" or \"NaN\" for those values)");
      } else {
        throw doc.error(field, "element " + at +
                                   " must be a number or \"NaN\", \"Infinity\", \"-Infinity\", got " +
                                   (j.is_string() ? j.dump() : kind_of(j)));
      }
    }
    return;
  }
  if (!j.is_array() || j.size() != shape[depth])
    throw doc.error(field, "data" + at + " must be an array of " + std::to_string(shape[depth]) + " (shape " +
                               shape_text(shape) + "), got " + kind_of(j));
  for (std::size_t k = 0; k < j.size(); ++k)
    flatten(doc, field, j[k], shape, depth + 1, at + "[" + std::to_string(k) + "]", out, nulls);
}

}  // namespace detail

/// @brief a tensor read from JSON: its shape and its values in row-major order
template <class T>
struct tensor {
  std::vector<std::size_t> shape;
  std::vector<T> data;
};

/// @brief read j (field `field` of doc) as a tensor of T: a {"dtype","shape","data"} object or a
/// bare nested array. Checks every level of data against shape.
template <class T>
[[nodiscard]] tensor<T> read_tensor(const json_document& doc, const std::string& field,
                                    const nlohmann::json& j, null_means nulls = null_means::error) {
  tensor<T> t;
  const nlohmann::json* data = &j;
  if (j.is_object()) {
    for (const char* key : {"shape", "data"})
      if (!j.contains(key)) throw doc.error(field, std::string("the tensor has no \"") + key + "\"");
    if (j.contains("dtype")) {
      const auto& dt = j.at("dtype");
      if (!dt.is_string()) throw doc.error(field, "dtype must be a string, got " + detail::kind_of(dt));
      const std::string d = dt.get<std::string>();
      const bool want_bool = std::is_same_v<T, unsigned char>;
      const bool ok =
          want_bool ? (d == "bool" || d == "int64") : (d == "float32" || d == "float64" || d == "int64");
      if (!ok)
        throw doc.error(field, std::string("dtype must be ") +
                                   (want_bool ? "\"bool\"" : "\"float32\" or \"float64\"") + ", got \"" + d +
                                   "\"");
    }
    const auto& s = j.at("shape");
    if (!s.is_array()) throw doc.error(field, "shape must be an array of sizes, got " + detail::kind_of(s));
    if (s.size() > detail::max_rank)
      throw doc.error(field, "shape has " + std::to_string(s.size()) + " dimensions, at most " +
                                 std::to_string(detail::max_rank) + " are supported");
    for (const auto& e : s) {
      if (!e.is_number_unsigned())
        throw doc.error(field, "shape must hold non-negative integers, got " + detail::kind_of(e));
      t.shape.push_back(e.get<std::size_t>());
    }
    data = &j.at("data");
  } else if (j.is_array()) {
    detail::infer_shape(doc, field, j, t.shape, 0);
  } else {
    throw doc.error(field, "expected a tensor {\"dtype\", \"shape\", \"data\"} or a nested array, got " +
                               detail::kind_of(j));
  }
  detail::flatten(doc, field, *data, t.shape, 0, "", t.data, nulls);
  return t;
}

/// @brief read a 2-d tensor as a matrix; `expected` describes the wanted shape in messages
/// ("T x d"). A 1-d tensor of n is read as 1 x n when allow_vector is set.
template <class T>
[[nodiscard]] runtime::dynamic_matrix<T> read_matrix(const json_document& doc, const std::string& field,
                                                     const nlohmann::json& j,
                                                     const std::string& expected = "rows x cols",
                                                     null_means nulls = null_means::error) {
  auto t = read_tensor<T>(doc, field, j, nulls);
  if (t.shape.size() != 2)
    throw doc.error(field,
                    "expected a 2-d tensor (" + expected + "), got shape " + detail::shape_text(t.shape));
  runtime::dynamic_matrix<T> m(t.shape[0], t.shape[1]);
  for (std::size_t k = 0; k < t.data.size(); ++k) m.data()[k] = t.data[k];
  return m;
}

/// @brief read a 1-d tensor (a bias) of exactly n values
template <class T>
[[nodiscard]] std::vector<T> read_vector(const json_document& doc, const std::string& field,
                                         const nlohmann::json& j, std::size_t n) {
  auto t = read_tensor<T>(doc, field, j);
  if (t.shape.size() == 2 && t.shape[0] == 1) t.shape = {t.shape[1]};  // a 1 x n row is fine
  if (t.shape.size() != 1 || t.shape[0] != n)
    throw doc.error(field,
                    "expected shape [" + std::to_string(n) + "], got shape " + detail::shape_text(t.shape));
  return t.data;
}

/// @brief a field of the document's top-level object as a matrix of T (see read_matrix)
template <class T>
[[nodiscard]] runtime::dynamic_matrix<T> read_matrix_field(const json_document& doc, const std::string& field,
                                                           const std::string& expected = "rows x cols",
                                                           null_means nulls = null_means::error) {
  if (!doc.json().is_object() || !doc.json().contains(field))
    throw doc.error(field, "missing (expected a " + expected + " tensor)");
  return read_matrix<T>(doc, field, doc.json().at(field), expected, nulls);
}

}  // namespace qkv::io
