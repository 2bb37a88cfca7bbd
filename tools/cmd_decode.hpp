// cmd_decode.hpp: `qkv decode CASE.json [--json] [--max-elements N] [--max-cache-bytes N]`:
// causal decoding through the runtime's KV cache (runtime/kv_cache.hpp), as a decoder language
// model runs it: the first `prompt` tokens' keys and values appended and their queries attended
// at once, then one token at a time (append its key and value, attend its query), and every
// output row compared with full causal attention of the whole sequence.
//
// The case gives the projections (q, k, v: one row per token), so a case is one layer of one
// sequence: q (T, heads * d_k), k (T, kv_heads * d_k), v (T, kv_heads * d_v). Query head h reads
// key/value head h / (heads / kv_heads) (grouped-query attention). Storage float32, bfloat16 or
// float16: 16-bit storage rounds each key and value to nearest even when appended.
//
// The comparison (docs/cli.md, "qkv decode"; docs/numerics.md, "KV cache"): the reference is
// full causal attention, aligned lower_right, of the T tokens on the keys and values as stored
// (rounded for 16-bit storage), the runtime's scaled_dot_product_attention per head.
//   - kernel "attend" (runtime::attend on each step, and the prompt): bit for bit.
//   - kernel "decode_attend" (the one-token fast path; the prompt still goes through attend):
//     within twice the standard-model bound of a float run (both runs are within it of the
//     exact result; decode_attend sums in another order). The bound is computed here per output
//     element, as tests/runtime/decoder_torch_test.cpp derives it (Higham 3.1, the softmax bound
//     of core/bounds.hpp with exp within 2 ulp).
// With `rope` (attend's field: layout, base, rotary_dim, position_offset) the cache rotates each
// key at its position on append (kv_cache::set_rope) and rope_queries each query at the same
// position; the reference rotates q and k whole with apply_rope (the key in float, then stored),
// and the relation is the same: a row's rotation depends only on that row and its position.
// If the relation does not hold the tool says so and exits 1 (a runtime bug, never seen).
//
// Limits, checked after the case is read and before the cache exists: the cache's bytes
// (kv_heads x capacity x (d_k + d_v) x the storage's size) <= --max-cache-bytes (default 2^30),
// which kv_cache's constructor checks again before it allocates; the scores computed
// (heads x T x T: the work of decoding, of the reference and of the bound) and every output (the
// rows, the reference, --json's bound) <= --max-elements numbers.
#pragma once

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/io/limit.hpp>
#include <qkv/runtime/decode.hpp>  // decode_attend, and kv_cache.hpp
#include <qkv/runtime/multihead.hpp>

#include "cli.hpp"
#include "cmd_attend.hpp"  // torch_str

namespace qkv::cli {

namespace decode_detail {

namespace rt = qkv::runtime;

inline constexpr std::string_view usage =
    "qkv decode CASE.json [--json] [--max-elements N] [--max-cache-bytes N]";
/// the default of --max-cache-bytes: 1 GiB
inline constexpr std::uint64_t default_max_cache_bytes = std::uint64_t{1} << 30;

enum class storage { float32, bfloat16, float16 };
enum class kernel { decode_attend, attend };

struct decode_case {
  std::string file;
  rt::dynamic_matrix<float> q, k, v;
  std::size_t heads = 1, kv_heads = 1, dk = 0, dv = 0, prompt = 1, capacity = 0, window = 0;
  bool alibi = false;
  std::optional<float> scale;
  std::optional<rt::rope_options> rope;  // the case's `rope` (kv_cache::set_rope), or none
  storage store = storage::float32;
  kernel kern = kernel::decode_attend;
};

inline const std::set<std::string>& known_fields() {
  static const std::set<std::string> f{"q",      "k",        "v",       "heads",  "kv_heads",
                                       "prompt", "capacity", "storage", "kernel", "window",
                                       "alibi",  "scale",    "rope"};
  return f;
}

inline std::string storage_name(storage s) {
  return s == storage::float32 ? "float32" : s == storage::bfloat16 ? "bfloat16" : "float16";
}
inline std::size_t storage_bytes(storage s) { return s == storage::float32 ? 4 : 2; }

/// read and check every field (exit 2 naming the file and the field)
inline decode_case read_case(const qkv::io::json_document& doc, std::uint64_t max_cache_bytes) {
  const auto& j = doc.json();
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  if (!j.is_object())
    throw input_error(doc.file() +
                      ": expected one JSON object with the fields q, k, v, ... (docs/cli.md), got " +
                      qkv::io::detail::kind_of(j));
  for (const auto& [key, value] : j.items())
    if (!known_fields().count(key))
      throw err(key,
                "unknown field; the fields are q, k, v, heads, kv_heads, prompt, capacity, storage, kernel, "
                "window, "
                "alibi, scale, rope");
  for (const char* f : {"q", "k", "v"})
    if (!j.contains(f)) throw err(f, "missing (required: q, k, v)");
  // q, k and v are float32 (the cache's storage is a separate field): a tensor tagged with
  // another floating type is refused, never read silently as float32 (cli.hpp)
  check_tensor_dtypes(doc, "float32", "float32",
                      "qkv decode computes in float32; \"storage\" sets only the cache's type",
                      "give its numbers as float32 (tag it \"float32\" or leave it untagged)");
  decode_case c;
  c.file = doc.file();
  auto whole = [&](const char* field, std::size_t lo, std::size_t hi, const std::string& what) {
    const auto& x = j.at(field);
    if (!x.is_number_unsigned() || x.get<std::uint64_t>() < lo || x.get<std::uint64_t>() > hi)
      throw err(field, "expected " + what + ", got " + x.dump());
    return static_cast<std::size_t>(x.get<std::uint64_t>());
  };
  const std::size_t big = std::numeric_limits<std::uint32_t>::max();
  if (j.contains("heads")) c.heads = whole("heads", 1, big, "a positive whole number (query heads)");
  c.kv_heads = c.heads;
  if (j.contains("kv_heads")) {
    const auto& h = j.at("kv_heads");
    if (!h.is_number_unsigned() || h.get<std::uint64_t>() == 0 || c.heads % h.get<std::uint64_t>() != 0)
      throw err("kv_heads",
                "expected a positive whole number that divides heads = " + std::to_string(c.heads) +
                    " (query head h reads key/value head h / (heads / kv_heads)), got " + h.dump());
    c.kv_heads = h.get<std::size_t>();
  }
  c.q = qkv::io::read_matrix_field<float>(doc, "q", "T x heads*d_k, one token's query per row");
  if (c.q.rows() == 0 || c.q.cols() == 0)
    throw err("q", "expected at least one token and one column, got " + c.q.shape());
  if (c.q.cols() % c.heads != 0)
    throw err("q",
              "expected heads x d_k columns (" + std::to_string(c.heads) + " heads), got " + c.q.shape());
  c.dk = c.q.cols() / c.heads;
  const std::size_t T = c.q.rows();
  c.k = qkv::io::read_matrix_field<float>(doc, "k", "T x kv_heads*d_k");
  if (c.k.rows() != T || c.k.cols() != c.kv_heads * c.dk)
    throw err("k", "expected " + rt::shape_string(T, c.kv_heads * c.dk) + " (a key per token of q " +
                       c.q.shape() + ", " + std::to_string(c.kv_heads) +
                       " key/value heads of d_k = " + std::to_string(c.dk) + "), got " + c.k.shape());
  c.v = qkv::io::read_matrix_field<float>(doc, "v", "T x kv_heads*d_v");
  if (c.v.rows() != T || c.v.cols() == 0 || c.v.cols() % c.kv_heads != 0)
    throw err("v", "expected " + std::to_string(T) + " rows (a value per token of q " + c.q.shape() +
                       ") of kv_heads x d_v = " + std::to_string(c.kv_heads) + " x d_v columns, got " +
                       c.v.shape());
  c.dv = c.v.cols() / c.kv_heads;
  if (j.contains("prompt"))
    c.prompt = whole("prompt", 1, T,
                     "a whole number from 1 to the " + std::to_string(T) +
                         " tokens (the tokens appended and attended at once before decoding one by one)");
  c.capacity = T;
  if (j.contains("capacity"))
    c.capacity = whole("capacity", T, big,
                       "a whole number of cache positions, at least the " + std::to_string(T) + " tokens");
  if (j.contains("window"))
    c.window = whole("window", 0, big,
                     "a whole number (0 = none; else a token at position p sees keys j with p - window < j)");
  if (j.contains("alibi")) {
    const auto& a = j.at("alibi");
    if (!a.is_boolean()) throw err("alibi", "expected true or false, got " + a.dump());
    c.alibi = a.get<bool>();
  }
  if (j.contains("scale"))
    c.scale = read_finite_scale<float>(doc);  // a number or a 0-d tensor, finite in float
  if (j.contains("rope")) {  // attend's field (same members, same checks), minus key_position_offset
    const auto& r = j.at("rope");
    if (r.is_object() && r.contains("key_position_offset"))
      throw err("rope.key_position_offset",
                "a token's query and key sit at one position here (the cache rotates the key "
                "at append, rope_queries the query at the same position): give position_offset only");
    attend_detail::parsed_case pc;
    attend_detail::read_rope(doc, pc, c.dk, T, T);
    c.rope = pc.rope;
  }
  if (j.contains("storage")) {
    const auto& s = j.at("storage");
    if (s == "float32")
      c.store = storage::float32;
    else if (s == "bfloat16")
      c.store = storage::bfloat16;
    else if (s == "float16")
      c.store = storage::float16;
    else
      throw err(
          "storage",
          "expected \"float32\", \"bfloat16\" or \"float16\" (the cache's element type), got " + s.dump());
  }
  if (j.contains("kernel")) {
    const auto& s = j.at("kernel");
    if (s == "decode_attend")
      c.kern = kernel::decode_attend;
    else if (s == "attend")
      c.kern = kernel::attend;
    else
      throw err(
          "kernel",
          "expected \"decode_attend\" (the one-token fast path) or \"attend\" (the general kernels), got " +
              s.dump());
  }
  // the cache's bytes, before it exists (kv_cache's constructor checks max_bytes again)
  const long double bytes = static_cast<long double>(c.kv_heads) * static_cast<long double>(c.capacity) *
                            static_cast<long double>(c.dk + c.dv) *
                            static_cast<long double>(storage_bytes(c.store));
  if (bytes > static_cast<long double>(max_cache_bytes)) {
    std::ostringstream b;
    b.precision(20);
    b << bytes;
    throw err(j.contains("capacity") ? "capacity" : "q",
              "the cache would take " + std::to_string(c.kv_heads) + " heads x " +
                  std::to_string(c.capacity) + " positions x (" + std::to_string(c.dk) + " + " +
                  std::to_string(c.dv) + ") x " + std::to_string(storage_bytes(c.store)) +
                  " bytes = " + b.str() + " bytes, above the limit of " + std::to_string(max_cache_bytes) +
                  " (raise it with --max-cache-bytes N)");
  }
  return c;
}

/// x as the cache stores it: rounded to S and back (exact both ways for float)
template <rt::storage_type S>
rt::dynamic_matrix<float> as_stored(const rt::dynamic_matrix<float>& x) {
  rt::dynamic_matrix<float> r(x.rows(), x.cols());
  for (std::size_t e = 0; e < x.size(); ++e) r.data()[e] = static_cast<float>(S(x.data()[e]));
  return r;
}

/// n u / (1 - n u), u = 2^-24 (float)
inline double gamma_float(std::size_t n) {
  const double u = std::ldexp(1.0, -24);
  return double(n) * u / (1 - double(n) * u);
}

/// @brief per output element, the standard-model bound on |a float run - the exact result| of
/// causal attention (T = S, so lower_right = upper_left) with the window and ALiBi, on the keys
/// and values as stored; the derivation is tests/runtime/decoder_torch_test.cpp's `bound`
/// (dot product gamma(d) sum|q||k|, scale rounded twice and multiplied 3u|s|, two additions
/// 2u(|s| + |a|), softmax within 2 ulp per exp and one rescale per key block, the weighted sum
/// gamma(S + 2)). Computed in double, once, O(T^2 H (d_k + d_v)).
inline rt::dynamic_matrix<double> float_bound(const decode_case& c, const rt::dynamic_matrix<float>& qr,
                                              const rt::dynamic_matrix<float>& kr,
                                              const rt::dynamic_matrix<float>& vr, float scale) {
  const std::size_t T = c.q.rows(), H = c.heads, group = c.heads / c.kv_heads, d = c.dk, D = c.dv;
  const double u = std::ldexp(1.0, -24);
  const auto slopes = rt::alibi_slopes(H);
  const std::size_t blocks = (T + rt::key_block - 1) / rt::key_block;
  rt::dynamic_matrix<double> out(T, H * D);
  std::vector<double> z(T), w(T);
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t g = h / group;
    for (std::size_t i = 0; i < T; ++i) {
      const std::size_t first = c.window && c.window <= i ? i + 1 - c.window : 0;
      double m = -std::numeric_limits<double>::infinity(), lo = -m, worst = 0, sum = 0;
      for (std::size_t j = first; j <= i; ++j) {
        double acc = 0, mag = 0;
        for (std::size_t x = 0; x < d; ++x) {
          const double p = double(qr(i, h * d + x)) * double(kr(j, g * d + x));
          acc += p;
          mag += std::abs(p);
        }
        const double s = acc * double(scale), a = c.alibi ? slopes[h] * (double(j) - double(i)) : 0.0;
        z[j] = s + a;
        worst = std::max(worst, std::abs(double(scale)) * gamma_float(d) * mag + 3 * u * std::abs(s) +
                                    2 * u * (std::abs(s) + std::abs(a)));
        m = std::max(m, z[j]);
        lo = std::min(lo, z[j]);
      }
      const std::size_t n = i + 1 - first;
      for (std::size_t j = first; j <= i; ++j) sum += std::exp(z[j] - m);
      const double rel = 1.01 * (2 * worst + (2 * (4 + (m - lo)) + double(n) + 5.0 * double(blocks)) * u);
      for (std::size_t j = first; j <= i; ++j) w[j] = std::exp(z[j] - m) / sum;
      for (std::size_t col = 0; col < D; ++col) {
        double mag = 0, prop = 0;
        for (std::size_t j = first; j <= i; ++j) {
          const double vv = std::abs(double(vr(j, g * D + col)));
          mag += w[j] * (1 + rel) * vv;
          prop += w[j] * rel * vv;
        }
        out(i, h * D + col) = gamma_float(T + 2) * mag + prop;
      }
    }
  }
  return out;
}

struct decode_result {
  rt::dynamic_matrix<float> rows, full;  // the decoded rows; full causal attention of the sequence
  rt::dynamic_matrix<double> bound;      // per element: bound(float) (kernel decode_attend only)
  double max_diff = 0;                   // max |rows - full|
  double worst_ratio = 0;                // max |rows - full| / (2 bound) (decode_attend)
  bool bit_for_bit = true, holds = true;
  std::size_t cache_bytes = 0;
};

template <rt::storage_type S>
decode_result run_decode(const decode_case& c, std::uint64_t max_cache_bytes) {
  const std::size_t T = c.q.rows(), H = c.heads, HK = c.kv_heads;
  decode_result r;
  rt::kv_cache<S> cache(1, HK, c.dk, c.dv, c.capacity, static_cast<std::size_t>(max_cache_bytes));
  cache.set_rope(c.rope);  // append rotates each key at its position (none: stored as given)
  auto q = c.q;            // the queries, rotated by rope_queries block by block as they are attended
  r.cache_bytes = HK * c.capacity * (c.dk + c.dv) * sizeof(S);
  rt::cache_attention_options opt;
  opt.heads = H;
  opt.window = c.window;
  opt.alibi = c.alibi;
  if (c.scale) opt.scale = *c.scale;
  const auto slopes = c.alibi ? rt::alibi_slopes(H) : std::vector<double>{};
  r.rows = rt::dynamic_matrix<float>(T, H * c.dv);
  // the prompt: appended and attended at once (T = prompt queries, lower_right)
  cache.append(0, rt::row_block(c.k.view(), 0, c.prompt), rt::row_block(c.v.view(), 0, c.prompt));
  rt::rope_queries(cache, 0, rt::row_block(q.view(), 0, c.prompt));
  rt::attend(cache, 0, rt::row_block(q.view(), 0, c.prompt), rt::row_block(r.rows.view(), 0, c.prompt), opt,
             slopes);
  for (std::size_t t = c.prompt; t < T; ++t) {  // then one token at a time
    cache.append(0, rt::row_block(c.k.view(), t, 1), rt::row_block(c.v.view(), t, 1));
    const auto qt = rt::row_block(q.view(), t, 1);
    rt::rope_queries(cache, 0, qt);
    const auto out = rt::row_block(r.rows.view(), t, 1);
    if (c.kern == kernel::attend)
      rt::attend(cache, 0, qt, out, opt, slopes);
    else
      rt::decode_attend(cache, 0, qt, out, opt, slopes);
  }
  // the reference: full causal attention of the T tokens on the stored keys and values; with
  // rope, q and k rotated whole by apply_rope (positions position_offset ..; the key rotated in
  // float, then stored: rounded once for 16-bit storage, as append does)
  auto qr = c.q, kf = c.k;
  if (c.rope) {
    rt::apply_rope<float>(qr.view(), c.dk, *c.rope, c.rope->position_offset);
    rt::apply_rope<float>(kf.view(), c.dk, *c.rope, c.rope->position_offset);
  }
  const auto kr = as_stored<S>(kf), vr = as_stored<S>(c.v);
  const float scale = c.scale ? *c.scale : rt::default_scale<float>(c.dk);
  r.full = rt::dynamic_matrix<float>(T, H * c.dv);
  const std::size_t group = H / HK;
  for (std::size_t h = 0; h < H; ++h) {
    rt::attention_mask m;
    m.causal = true;
    m.alignment = rt::causal_alignment::lower_right;
    m.window = c.window;
    if (c.alibi) m.alibi_slope = slopes[h];
    const std::size_t g = h / group;
    rt::scaled_dot_product_attention<float>(
        rt::column_block(rt::matrix_view<const float>(qr.view()), h * c.dk, c.dk),
        rt::column_block(rt::matrix_view<const float>(kr.view()), g * c.dk, c.dk),
        rt::column_block(rt::matrix_view<const float>(vr.view()), g * c.dv, c.dv),
        rt::column_block(r.full.view(), h * c.dv, c.dv), scale, m, nullptr, nullptr, nullptr);
  }
  // the same bits, or both NaN (a NaN's payload is not the relation's business)
  auto same = [](float a, float b) {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) ||
           (std::isnan(a) && std::isnan(b));
  };
  for (std::size_t e = 0; e < r.rows.size(); ++e) {
    const float a = r.rows.data()[e], b = r.full.data()[e];
    r.bit_for_bit = r.bit_for_bit && same(a, b);
    r.max_diff = std::max(r.max_diff, std::abs(double(a) - double(b)));
  }
  if (c.kern == kernel::attend) {
    r.holds = r.bit_for_bit;
  } else {
    // the prompt's rows come from attend: bit for bit; the steps within twice the bound
    r.bound = float_bound(c, qr, kr, vr, scale);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t x = 0; x < H * c.dv; ++x) {
        const double d = std::abs(double(r.rows(i, x)) - double(r.full(i, x))), b = 2 * r.bound(i, x);
        const bool ok = same(r.rows(i, x), r.full(i, x)) || (i >= c.prompt && d <= b);
        if (!ok) r.holds = false;
        if (b > 0) r.worst_ratio = std::max(r.worst_ratio, d / b);
      }
  }
  return r;
}

inline std::string text_output(const decode_case& c, const decode_result& r) {
  const std::size_t T = c.q.rows();
  std::ostringstream o;
  std::ostringstream sc;
  sc << (c.scale ? double(*c.scale) : double(rt::default_scale<float>(c.dk)));
  o << "qkv decode " << c.file << ": " << T << " tokens, " << c.heads
    << (c.heads == 1 ? " query head" : " query heads") << " on " << c.kv_heads << " key/value "
    << (c.kv_heads == 1 ? "head" : "heads") << " (d_k = " << c.dk << ", d_v = " << c.dv << "), cache storage "
    << storage_name(c.store) << " (" << c.capacity << " positions, " << r.cache_bytes << " bytes), kernel "
    << (c.kern == kernel::attend ? "attend" : "decode_attend") << ", scale " << sc.str()
    << (c.scale ? "" : " = 1/sqrt(" + std::to_string(c.dk) + ")") << ", window "
    << (c.window ? std::to_string(c.window) : std::string("none")) << ", ALiBi " << (c.alibi ? "on" : "off")
    << ", RoPE ";
  if (c.rope) {
    const auto& ro = *c.rope;
    o << (ro.layout == rt::rope_layout::half_split ? "half_split" : "interleaved") << " (base " << ro.base
      << ", " << (ro.rotary_dim ? ro.rotary_dim : c.dk) << " of " << c.dk << " columns, tokens at positions "
      << ro.position_offset << ".." << ro.position_offset + T - 1
      << ": each key rotated by the cache on append, each query by rope_queries)";
  } else {
    o << "off";
  }
  o << "\n\n";
  auto row = [&](std::size_t i) {
    rt::dynamic_matrix<float> m(1, r.rows.cols());
    for (std::size_t x = 0; x < m.cols(); ++x) m(0, x) = r.rows(i, x);
    return attend_detail::torch_str(m);
  };
  o << "Prompt: tokens 0.." << c.prompt - 1
    << " appended to the cache, their queries attended at once (runtime::attend, "
    << "causal aligned lower_right)\n";
  for (std::size_t i = 0; i < c.prompt; ++i) o << "token " << i << ": output = " << row(i) << "\n";
  if (c.prompt < T)
    o << "\nDecoding: each token's key and value appended, its query attended against the cache ("
      << (c.kern == kernel::attend ? "runtime::attend" : "runtime::decode_attend, the one-token fast path")
      << ")\n";
  for (std::size_t i = c.prompt; i < T; ++i)
    o << "token " << i << " (cache length " << i + 1 << "): output = " << row(i) << "\n";
  o << "\nCompared with full causal attention (aligned lower_right) of the same " << T
    << " tokens on the keys and values"
    << (c.store == storage::float32 ? "" : " as stored (rounded to " + storage_name(c.store) + ")") << ": ";
  std::ostringstream d;
  d << r.max_diff;
  if (c.kern == kernel::attend) {
    o << (r.bit_for_bit
              ? "bit for bit (every row; the runtime's relation for attend, docs/numerics.md \"KV cache\")"
              : "NOT bit for bit (max |difference| " + d.str() + "): the runtime's relation does not hold")
      << "\n";
  } else {
    std::ostringstream w;
    w << r.worst_ratio;
    o << (r.bit_for_bit ? "bit for bit" : "max |difference| " + d.str())
      << "; the prompt's rows bit for bit (attend), "
      << "the decoded rows within twice the derived float bound (decode_attend sums in another order; "
      << "docs/numerics.md \"KV cache\"): " << (r.holds ? "holds" : "DOES NOT HOLD")
      << ", worst |difference| / (2 bound) = " << w.str() << "\n";
  }
  return o.str();
}

inline std::string json_output(const decode_case& c, const decode_result& r) {
  std::string s = "{\"storage\": \"" + storage_name(c.store) + "\", \"kernel\": \"" +
                  (c.kern == kernel::attend ? "attend" : "decode_attend") +
                  "\", \"prompt\": " + std::to_string(c.prompt) +
                  ", \"cache_bytes\": " + std::to_string(r.cache_bytes) +
                  ",\n \"bit_for_bit\": " + (r.bit_for_bit ? "true" : "false") +
                  ", \"holds\": " + (r.holds ? "true" : "false") + ", \"max_abs_difference\": ";
  qkv::io::write_number(s, r.max_diff);
  s += ",\n \"outputs\": ";
  qkv::io::write_tensor(s, r.rows);
  s += ",\n \"full_causal\": ";
  qkv::io::write_tensor(s, r.full);
  if (c.kern == kernel::decode_attend) {
    s += ",\n \"bound\": ";
    qkv::io::write_tensor(s, r.bound);
  }
  return s + "}\n";
}

/// read, check the limits, decode, compare; writes nothing (the fuzz target calls it). Defined
/// in tools/cmd_decode.cpp, compiled once for the tool and the fuzz replay
std::string make_output(const qkv::io::json_document& doc, bool as_json, const limits& lim,
                        std::uint64_t max_cache_bytes, bool* holds = nullptr);

}  // namespace decode_detail

/// `qkv decode CASE.json [--json] [--max-elements N] [--max-cache-bytes N]`
int cmd_decode(const args& a);  // tools/cmd_decode.cpp

}  // namespace qkv::cli
