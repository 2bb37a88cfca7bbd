// safetensors.hpp: read and write .safetensors files (Hugging Face's tensor file format).
//
// The format: 8 bytes, the little-endian length N of a JSON header; N bytes of JSON; then the
// data section. The header maps each tensor's name to {"dtype", "shape", "data_offsets":
// [begin, end]} (byte offsets into the data section, row-major, little-endian); the optional
// "__metadata__" maps strings to strings.
//
// The reader reads the header only, checks every offset and length against the file's size
// (with overflow-safe arithmetic) before it trusts it, and then reads tensors, or rows of a
// tensor (an embedding table), with a seek: the rest of the file is never loaded. A malformed
// file gives a safetensors_error naming the file and the field, never a crash or a read out of
// bounds. F64, F32, F16 and BF16 convert to float or double (so do the integer types and BOOL).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../runtime/half.hpp"

namespace qkv::io {

/// a malformed or unusable .safetensors file, or a request it cannot satisfy; the message
/// names the file, the tensor and the field
struct safetensors_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace safetensors_detail {

struct dtype_info {
  std::string_view name;
  std::uint64_t size;  // bytes per element
};
// the dtypes of the format; F8_E5M2 and F8_E4M3 are known (their files open) but not converted
inline constexpr dtype_info dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
                                        {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
                                        {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}};

inline std::optional<std::uint64_t> dtype_size(std::string_view name) {
  for (const auto& d : dtypes)
    if (d.name == name) return d.size;
  return std::nullopt;
}

// a * b, or nothing on overflow
inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

inline std::uint64_t load_le(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

inline void store_le(std::uint64_t v, std::size_t n, std::string& out) {
  for (std::size_t i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace safetensors_detail

/// one tensor of a file: where its bytes are in the data section
struct safetensors_tensor_info {
  std::string name;
  std::string dtype;                 // "F32", "F16", "BF16", "F64", ...
  std::vector<std::uint64_t> shape;  // row-major; [] is a scalar
  std::uint64_t begin = 0, end = 0;  // byte offsets in the data section
  std::uint64_t dtype_size = 0;      // bytes per element

  [[nodiscard]] std::uint64_t elements() const noexcept { return (end - begin) / dtype_size; }
};

/// a .safetensors file (or buffer) whose header has been read and checked
class safetensors_file {
 public:
  /// largest header accepted (the format's own limit)
  static constexpr std::uint64_t max_header_bytes = 100'000'000;

  /// opens a file and reads its header; throws safetensors_error naming the file
  [[nodiscard]] static safetensors_file open(const std::string& path) {
    safetensors_file f;
    f.name_ = path;
    auto in = std::make_shared<std::ifstream>(path, std::ios::binary);
    if (!*in) throw safetensors_error("cannot open '" + path + "'");
    in->seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(in->tellg());
    if (size < 0) throw safetensors_error("cannot read the size of '" + path + "'");
    f.file_ = std::move(in);
    f.size_ = static_cast<std::uint64_t>(size);
    f.read_header();
    return f;
  }

  /// the same from bytes in memory (`name` names them in errors)
  [[nodiscard]] static safetensors_file from_bytes(std::string bytes, std::string name = "<buffer>") {
    safetensors_file f;
    f.name_ = std::move(name);
    f.size_ = bytes.size();
    f.bytes_ = std::make_shared<const std::string>(std::move(bytes));
    f.read_header();
    return f;
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::uint64_t file_size() const noexcept { return size_; }
  /// the tensors, in the order of their data offsets
  [[nodiscard]] const std::vector<safetensors_tensor_info>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

  [[nodiscard]] const safetensors_tensor_info* find(std::string_view tensor) const {
    for (const auto& t : tensors_)
      if (t.name == tensor) return &t;
    return nullptr;
  }

  [[nodiscard]] const safetensors_tensor_info& info(std::string_view tensor) const {
    if (const auto* t = find(tensor)) return *t;
    throw safetensors_error(name_ + ": no tensor named '" + std::string(tensor) + "' (" +
                            std::to_string(tensors_.size()) + " tensors in the file)");
  }

  /// a whole tensor, converted to T (float or double), row-major
  template <class T>
  [[nodiscard]] std::vector<T> read(std::string_view tensor) const {
    const auto& t = info(tensor);
    return convert<T>(t, t.begin, t.elements());
  }

  /// rows [first, first + count) of a tensor of rank >= 1 (rows are the first dimension),
  /// converted to T; only those bytes are read
  template <class T>
  [[nodiscard]] std::vector<T> read_rows(std::string_view tensor, std::uint64_t first,
                                         std::uint64_t count) const {
    const auto& t = info(tensor);
    if (t.shape.empty())
      throw safetensors_error(name_ + ": tensor '" + t.name + "' is a scalar: it has no rows");
    const std::uint64_t rows = t.shape[0];
    if (first > rows || count > rows - first) {
      throw safetensors_error(name_ + ": tensor '" + t.name + "' has " + std::to_string(rows) +
                              " rows; rows " + std::to_string(first) + ".." + std::to_string(first) + "+" +
                              std::to_string(count) + " are out of range");
    }
    const std::uint64_t row_elements = rows == 0 ? 0 : t.elements() / rows;
    // within the tensor, which was checked against the file: no overflow
    return convert<T>(t, t.begin + first * row_elements * t.dtype_size, count * row_elements);
  }

  /// the raw little-endian bytes of a tensor
  [[nodiscard]] std::string raw(std::string_view tensor) const {
    const auto& t = info(tensor);
    std::string out(static_cast<std::size_t>(t.end - t.begin), '\0');
    read_bytes(data_start_ + t.begin, out.size(), out.data());
    return out;
  }

 private:
  std::string name_;
  std::uint64_t size_ = 0;
  std::uint64_t data_start_ = 0;
  std::shared_ptr<std::ifstream> file_;       // when reading a file
  std::shared_ptr<const std::string> bytes_;  // when reading from memory
  std::vector<safetensors_tensor_info> tensors_;
  std::map<std::string, std::string> metadata_;

  [[noreturn]] void fail(const std::string& what) const { throw safetensors_error(name_ + ": " + what); }

  // reads n bytes at an offset that the caller has checked: offset + n <= size_
  void read_bytes(std::uint64_t offset, std::size_t n, char* dst) const {
    if (offset > size_ || n > size_ - offset) fail("internal error: a read past the end of the file");
    if (n == 0) return;
    if (bytes_) {
      std::memcpy(dst, bytes_->data() + offset, n);
      return;
    }
    file_->clear();
    file_->seekg(static_cast<std::streamoff>(offset));
    file_->read(dst, static_cast<std::streamsize>(n));
    if (!*file_)
      fail("the file ended early or changed while reading (at byte " + std::to_string(offset) + ")");
  }

  void read_header() {
    using nlohmann::json;
    if (size_ < 8)
      fail("the file has " + std::to_string(size_) +
           " bytes; a safetensors file starts with an 8-byte header length");
    unsigned char len_bytes[8];
    read_bytes(0, 8, reinterpret_cast<char*>(len_bytes));
    const std::uint64_t n = safetensors_detail::load_le(len_bytes, 8);
    if (n > size_ - 8) {
      fail("the header length " + std::to_string(n) + " goes past the end of the file (" +
           std::to_string(size_ - 8) + " bytes after the length)");
    }
    if (n > max_header_bytes)
      fail("the header length " + std::to_string(n) + " is above the format's limit of 100 MB");
    if (n < 2) fail("the header length " + std::to_string(n) + " is too small for a JSON object");
    std::string text(static_cast<std::size_t>(n), '\0');
    read_bytes(8, text.size(), text.data());
    data_start_ = 8 + n;
    const std::uint64_t data_size = size_ - data_start_;

    // parse, refusing duplicate names at the top level (a JSON parser would keep the last one)
    std::set<std::string> seen;
    std::optional<std::string> duplicate;
    json header;
    try {
      header = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
        if (depth == 1 && event == json::parse_event_t::key && !seen.insert(parsed.get<std::string>()).second)
          duplicate = parsed.get<std::string>();
        return true;
      });
    } catch (const json::exception& e) { fail(std::string("the header is not valid JSON: ") + e.what()); }
    if (duplicate) fail("the header names '" + *duplicate + "' twice");
    if (!header.is_object()) fail("the header is not a JSON object");

    for (const auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        if (!value.is_object()) fail("__metadata__ is not an object");
        for (const auto& [k, v] : value.items()) {
          if (!v.is_string()) fail("__metadata__['" + k + "'] is not a string");
          metadata_[k] = v.get<std::string>();
        }
        continue;
      }
      const std::string where = "tensor '" + key + "'";
      if (!value.is_object()) fail(where + " is not an object");
      if (!value.contains("dtype") || !value["dtype"].is_string()) fail(where + " has no dtype string");
      if (!value.contains("shape") || !value["shape"].is_array()) fail(where + " has no shape array");
      if (!value.contains("data_offsets") || !value["data_offsets"].is_array() ||
          value["data_offsets"].size() != 2)
        fail(where + " has no data_offsets [begin, end]");
      safetensors_tensor_info t;
      t.name = key;
      t.dtype = value["dtype"].get<std::string>();
      const auto size = safetensors_detail::dtype_size(t.dtype);
      if (!size) fail(where + " has an unknown dtype '" + t.dtype + "'");
      t.dtype_size = *size;
      std::uint64_t elements = 1;
      for (const auto& d : value["shape"]) {
        if (!d.is_number_unsigned())
          fail(where + ": the shape " + value["shape"].dump() + " is not a list of sizes");
        t.shape.push_back(d.get<std::uint64_t>());
        const auto e = safetensors_detail::checked_mul(elements, t.shape.back());
        if (!e) fail(where + ": the shape " + value["shape"].dump() + " has too many elements");
        elements = *e;
      }
      const auto& off = value["data_offsets"];
      if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        fail(where + ": data_offsets " + off.dump() + " are not byte offsets");
      t.begin = off[0].get<std::uint64_t>();
      t.end = off[1].get<std::uint64_t>();
      if (t.begin > t.end) fail(where + ": data_offsets " + off.dump() + " end before they begin");
      if (t.end > data_size) {
        fail(where + ": data_offsets " + off.dump() + " go past the end of the data (" +
             std::to_string(data_size) + " bytes): the file is truncated or the offsets are wrong");
      }
      const auto bytes = safetensors_detail::checked_mul(elements, t.dtype_size);
      if (!bytes || *bytes != t.end - t.begin) {
        fail(where + ": the shape " + value["shape"].dump() + " of " + t.dtype + " needs " +
             (bytes ? std::to_string(*bytes) : std::string("too many")) + " bytes, but data_offsets " +
             off.dump() + " hold " + std::to_string(t.end - t.begin));
      }
      tensors_.push_back(std::move(t));
    }
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    for (std::size_t i = 1; i < tensors_.size(); ++i) {
      if (tensors_[i].begin < tensors_[i - 1].end) {
        fail("tensors '" + tensors_[i - 1].name + "' and '" + tensors_[i].name + "' overlap (bytes " +
             std::to_string(tensors_[i - 1].begin) + ".." + std::to_string(tensors_[i - 1].end) + " and " +
             std::to_string(tensors_[i].begin) + ".." + std::to_string(tensors_[i].end) + ")");
      }
    }
  }

  template <class T>
  std::vector<T> convert(const safetensors_tensor_info& t, std::uint64_t byte_offset,
                         std::uint64_t count) const {
    static_assert(std::is_floating_point_v<T>, "safetensors tensors convert to float or double");
    const std::uint64_t n_bytes = count * t.dtype_size;  // within the tensor: checked
    std::string raw(static_cast<std::size_t>(n_bytes), '\0');
    read_bytes(data_start_ + byte_offset, raw.size(), raw.data());
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
    std::vector<T> out(static_cast<std::size_t>(count));
    const auto& d = t.dtype;
    using safetensors_detail::load_le;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const unsigned char* q = p + i * t.dtype_size;
      if (d == "F32")
        out[i] = static_cast<T>(std::bit_cast<float>(static_cast<std::uint32_t>(load_le(q, 4))));
      else if (d == "F64")
        out[i] = static_cast<T>(std::bit_cast<double>(load_le(q, 8)));
      else if (d == "F16")
        out[i] = static_cast<T>(runtime::half_bits_to_float(static_cast<std::uint16_t>(load_le(q, 2))));
      else if (d == "BF16")
        out[i] = static_cast<T>(runtime::bfloat16_bits_to_float(static_cast<std::uint16_t>(load_le(q, 2))));
      else if (d == "I64")
        out[i] = static_cast<T>(static_cast<std::int64_t>(load_le(q, 8)));
      else if (d == "I32")
        out[i] = static_cast<T>(static_cast<std::int32_t>(static_cast<std::uint32_t>(load_le(q, 4))));
      else if (d == "I16")
        out[i] = static_cast<T>(static_cast<std::int16_t>(static_cast<std::uint16_t>(load_le(q, 2))));
      else if (d == "I8")
        out[i] = static_cast<T>(static_cast<std::int8_t>(q[0]));
      else if (d == "U64" || d == "U32" || d == "U16" || d == "U8")
        out[i] = static_cast<T>(load_le(q, t.dtype_size));
      else if (d == "BOOL")
        out[i] = q[0] ? T(1) : T(0);
      else
        fail("tensor '" + t.name + "': dtype " + d + " cannot be converted to floating point");
    }
    return out;
  }
};

/// a tensor to write: name, dtype, shape and its little-endian bytes
struct safetensors_tensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::string bytes;
};

/// a tensor from floats, stored as "F32", "F16" or "BF16" (rounded to nearest even)
[[nodiscard]] inline safetensors_tensor make_safetensors_tensor(std::string name,
                                                                std::vector<std::uint64_t> shape,
                                                                const std::vector<float>& values,
                                                                std::string dtype = "F32") {
  safetensors_tensor t{std::move(name), std::move(dtype), std::move(shape), {}};
  for (float v : values) {
    if (t.dtype == "F32")
      safetensors_detail::store_le(std::bit_cast<std::uint32_t>(v), 4, t.bytes);
    else if (t.dtype == "F16")
      safetensors_detail::store_le(runtime::float_to_half_bits(v), 2, t.bytes);
    else if (t.dtype == "BF16")
      safetensors_detail::store_le(runtime::float_to_bfloat16_bits(v), 2, t.bytes);
    else
      throw safetensors_error("tensor '" + t.name + "': floats are written as F32, F16 or BF16, not " +
                              t.dtype);
  }
  return t;
}

/// a tensor from doubles, stored as "F64"
[[nodiscard]] inline safetensors_tensor make_safetensors_tensor(std::string name,
                                                                std::vector<std::uint64_t> shape,
                                                                const std::vector<double>& values) {
  safetensors_tensor t{std::move(name), "F64", std::move(shape), {}};
  for (double v : values) safetensors_detail::store_le(std::bit_cast<std::uint64_t>(v), 8, t.bytes);
  return t;
}

/// the bytes of a .safetensors file holding these tensors, in this order (the header is padded
/// with spaces so that the data starts at a multiple of 8 bytes, as the reference writer does)
[[nodiscard]] inline std::string safetensors_bytes(const std::vector<safetensors_tensor>& tensors,
                                                   const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || header.contains(t.name))
      throw safetensors_error("cannot write two tensors named '" + t.name + "'");
    const auto size = safetensors_detail::dtype_size(t.dtype);
    if (!size) throw safetensors_error("tensor '" + t.name + "': unknown dtype '" + t.dtype + "'");
    std::uint64_t elements = 1;
    for (auto d : t.shape) {
      const auto e = safetensors_detail::checked_mul(elements, d);
      if (!e) throw safetensors_error("tensor '" + t.name + "': the shape has too many elements");
      elements = *e;
    }
    const auto bytes = safetensors_detail::checked_mul(elements, *size);
    if (!bytes || *bytes != t.bytes.size()) {
      throw safetensors_error("tensor '" + t.name + "': its shape needs " +
                              (bytes ? std::to_string(*bytes) : std::string("too many")) + " bytes of " +
                              t.dtype + ", it has " + std::to_string(t.bytes.size()));
    }
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string json = header.dump();
  while ((8 + json.size()) % 8 != 0) json += ' ';
  std::string out;
  safetensors_detail::store_le(json.size(), 8, out);
  out += json;
  for (const auto& t : tensors) out += t.bytes;
  return out;
}

/// writes a .safetensors file; throws safetensors_error naming the file if it cannot
inline void write_safetensors(const std::string& path, const std::vector<safetensors_tensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  const std::string bytes = safetensors_bytes(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw safetensors_error("cannot create '" + path + "'");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw safetensors_error("cannot write '" + path + "'");
}

}  // namespace qkv::io
