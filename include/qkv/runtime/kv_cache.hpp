// kv_cache.hpp: the keys and values of the tokens decoded so far, per layer and per key/value
// head, and the attention of new queries against them (causal decoding, one token at a time).
//
//   append(layer, k, v)   k: (n, H_kv * d_k)  v: (n, H_kv * d_v)  (the new tokens' projections)
//   attend(cache, layer, q, out)
//     q: (T, H * d_k), the last T tokens' queries; out: (T, H * d_v)
//     head h, key/value head g = h / (H / H_kv) (grouped-query attention; H_kv = H: multi-head)
//     out_h = softmax(scale q_h K_gᵀ + causal mask aligned lower_right) V_g   K_g, V_g: (S, d)
// The queries are the last T of the S cached positions: query i sits at position i + S - T and
// sees keys j <= i + S - T (causal_alignment::lower_right, the alignment PyTorch calls
// causal_lower_right; the ONNX Attention-24 op's is_causal with past_key gives it when the new
// keys are the T new tokens' own: j <= i + P, P = S - T past rows).
// Storage: float, bfloat16 or float16 (half.hpp): 16-bit storage rounds each key and value to
// nearest (ties to even) when appended; attention converts back (exactly) and accumulates in
// float. Limits: the capacity (positions per layer) is fixed at construction, where the most
// memory the cache can take, layers x H_kv x capacity x (d_k + d_v) x sizeof(S) bytes,
// is checked against max_bytes before anything is allocated; append past the capacity is a
// size_limit_error naming both lengths, before anything grows.
// Bits: attend runs scaled_dot_product_attention (attention.hpp) on each head with the cache's
// keys and values as K and V, so decoding token by token gives the rows of full causal attention
// bit for bit (float storage; 16-bit: the rows of full attention on the rounded K and V), the
// kernels' per-row arithmetic not depending on the other rows (docs/numerics.md, "KV cache").
// Rotary embeddings (opt-in, rope.hpp): after set_rope(o), append rotates each key at its
// position before storing it: cache row j of a layer sits at position first + j, first =
// o.key_position_offset.value_or(o.position_offset) (0 by default), each of the kv_heads heads
// of d_key columns rotated as apply_rope does (in float; 16-bit storage rounds the rotated key
// once). Queries are the caller's: rope_queries(cache, layer, q) rotates the T new queries at the
// cache's last T positions (first + length - T ..), after their keys were appended and before
// attend/decode_attend, which take q as given. Decoding so gives the rows of attention() with the
// same `rope` (position_offset = key_position_offset = first), bit for bit in float storage.
// decode_attend, the one-token fast path, is in decode.hpp, which includes this header (this one
// does not include it: decode.hpp builds on kv_cache and attend, not the other way round).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention.hpp"
#include "dynamic_matrix.hpp"
#include "half.hpp"
#include "rope.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

/// the default of kv_cache's max_bytes: 16 GiB
inline constexpr std::size_t default_max_cache_bytes = std::size_t(1) << 34;

/// @brief keys and values of `layers` layers, `kv_heads` heads each, growing by appended rows
/// up to `capacity` positions per layer
template <storage_type S = float>
class kv_cache {
 public:
  /// @throws size_limit_error when the full cache would take more than max_bytes (checked
  /// before allocating); shape_error for a zero head count or width
  kv_cache(std::size_t layers, std::size_t kv_heads, std::size_t d_key, std::size_t d_value,
           std::size_t capacity, std::size_t max_bytes = default_max_cache_bytes)
      : layers_(layers), heads_(kv_heads), dk_(d_key), dv_(d_value), capacity_(capacity) {
    if (layers == 0 || kv_heads == 0 || d_key == 0)
      throw shape_error("kv_cache: layers, kv_heads and d_key must be at least 1 (got " +
                        std::to_string(layers) + ", " + std::to_string(kv_heads) + ", " +
                        std::to_string(d_key) + ")");
    const long double bytes = static_cast<long double>(layers) * kv_heads *
                              static_cast<long double>(capacity) * static_cast<long double>(d_key + d_value) *
                              sizeof(S);
    if (bytes > static_cast<long double>(max_bytes))
      throw size_limit_error("kv_cache: " + std::to_string(layers) + " layers x " + std::to_string(kv_heads) +
                             " heads x " + std::to_string(capacity) + " positions x (" +
                             std::to_string(d_key) + " + " + std::to_string(d_value) + ") x " +
                             std::to_string(sizeof(S)) + " bytes need " + bytes_string(bytes) +
                             " bytes, over the limit of " + std::to_string(max_bytes) +
                             " (kv_cache's max_bytes)");
    keys_.resize(layers * kv_heads);
    values_.resize(layers * kv_heads);
    length_.assign(layers, 0);
  }

  [[nodiscard]] std::size_t layers() const { return layers_; }
  [[nodiscard]] std::size_t kv_heads() const { return heads_; }
  [[nodiscard]] std::size_t d_key() const { return dk_; }
  [[nodiscard]] std::size_t d_value() const { return dv_; }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  /// the positions cached in `layer`
  [[nodiscard]] std::size_t length(std::size_t layer) const { return length_.at(layer); }

  /// @brief appends n positions to `layer`: k (n, kv_heads * d_key), v (n, kv_heads * d_value),
  /// head g's columns g * d .. g * d + d - 1; rounded to S (round to nearest, ties to even)
  /// @throws shape_error for other shapes, size_limit_error past the capacity (nothing changes)
  void append(std::size_t layer, matrix_view<const float> k, matrix_view<const float> v) {
    if (layer >= layers_)
      throw shape_error("kv_cache: layer " + std::to_string(layer) + " of " + std::to_string(layers_));
    if (k.cols != heads_ * dk_ || v.cols != heads_ * dv_ || k.rows != v.rows)
      throw shape_error("kv_cache: k is " + k.shape() + " and v is " + v.shape() + " but must be " +
                        shape_string(k.rows, heads_ * dk_) + " and " + shape_string(k.rows, heads_ * dv_) +
                        " (kv_heads x d_key, kv_heads x d_value)");
    const std::size_t n = k.rows, len = length_[layer];
    if (n > capacity_ - len)
      throw size_limit_error("kv_cache: appending " + std::to_string(n) + " positions to the " +
                             std::to_string(len) + " of layer " + std::to_string(layer) +
                             " passes the capacity of " + std::to_string(capacity_));
    if (rope_ && n > 0) {  // rotate the new keys in float at positions first + len .. (rope.hpp), then store
      rotated_.resize(n * heads_ * dk_);
      const matrix_view<float> r{rotated_.data(), n, heads_ * dk_, heads_ * dk_, 1};
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < heads_ * dk_; ++c) r(i, c) = k(i, c);
      apply_rope<float>(r, dk_, *rope_, first_position() + len, nullptr);
      k = r;
    }
    for (std::size_t g = 0; g < heads_; ++g) {
      grow(keys_[layer * heads_ + g], (len + n) * dk_, capacity_ * dk_);
      grow(values_[layer * heads_ + g], (len + n) * dv_, capacity_ * dv_);
      S* kd = keys_[layer * heads_ + g].data() + len * dk_;
      S* vd = values_[layer * heads_ + g].data() + len * dv_;
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t c = 0; c < dk_; ++c) kd[i * dk_ + c] = store(k(i, g * dk_ + c));
        for (std::size_t c = 0; c < dv_; ++c) vd[i * dv_ + c] = store(v(i, g * dv_ + c));
      }
    }
    length_[layer] = len + n;
  }

  /// head g's keys (length(layer), d_key) and values (length(layer), d_value) in `layer`:
  /// valid until the next append
  [[nodiscard]] matrix_view<const S> keys(std::size_t layer, std::size_t g) const {
    return {keys_.at(layer * heads_ + g).data(), length_[layer], dk_, dk_, 1};
  }
  [[nodiscard]] matrix_view<const S> values(std::size_t layer, std::size_t g) const {
    return {values_.at(layer * heads_ + g).data(), length_[layer], dv_, dv_, 1};
  }

  /// forgets every position (the capacity stays; the memory is kept for reuse; the rope stays)
  void clear() { std::fill(length_.begin(), length_.end(), 0); }

  /// @brief from now on append rotates each key at its position (rope.hpp; row j of a layer at
  /// o.key_position_offset.value_or(o.position_offset) + j); std::nullopt: keys stored as given.
  /// Only while the cache is empty (every layer's length 0): the keys held would not match.
  /// @throws shape_error for a rotary_dim that is odd or wider than d_key, or a bad base;
  /// std::logic_error when the cache holds positions
  void set_rope(std::optional<rope_options> o) {
    if (o) (void)detail::rotary_width(*o, dk_);
    for (std::size_t l = 0; l < layers_; ++l)
      if (length_[l] != 0)
        throw std::logic_error("kv_cache::set_rope: layer " + std::to_string(l) + " holds " +
                               std::to_string(length_[l]) +
                               " keys stored without this rotation (clear() first)");
    rope_ = o;
  }
  /// the rotation append applies (std::nullopt: none)
  [[nodiscard]] const std::optional<rope_options>& rope() const { return rope_; }
  /// the position of row 0 of every layer (0 without rope)
  [[nodiscard]] std::size_t first_position() const {
    return rope_ ? rope_->key_position_offset.value_or(rope_->position_offset) : 0;
  }

 private:
  static S store(float x) {
    if constexpr (std::is_same_v<S, float>)
      return x;
    else
      return S(x);
  }
  /// the vector holds `need` elements; its allocation doubles, never past `most`
  static void grow(aligned_vector<S>& x, std::size_t need, std::size_t most) {
    if (need > x.capacity()) x.reserve(std::min(most, std::max(need, 2 * x.capacity())));
    x.resize(need);
  }

  std::size_t layers_, heads_, dk_, dv_, capacity_;
  // [layer * kv_heads + g]: (length, d) row-major, 64-byte aligned (decode_attend's 64-byte row
  // loads then never straddle two cache lines when d x sizeof(S) is a multiple of 64)
  std::vector<aligned_vector<S>> keys_, values_;
  std::vector<std::size_t> length_;
  std::optional<rope_options> rope_ = std::nullopt;
  std::vector<float> rotated_;  // append's rotated keys (n, kv_heads * d_key), reused
};

/// @brief rotates the T new queries q (T, H * d_key) in place as the cache rotated their keys:
/// query row i at position cache.first_position() + length(layer) - T + i (the last T positions:
/// call it after appending their keys, before attend / decode_attend). Each of the H heads of
/// d_key columns is rotated (apply_rope; any thread count, the same bits). A cache without rope
/// leaves q as it is, so a decoder may always call it.
/// @throws shape_error when d_key does not divide q's columns or T > length(layer)
template <storage_type S>
void rope_queries(const kv_cache<S>& cache, std::size_t layer, const matrix_view<float>& q,
                  thread_pool* pool = &default_pool()) {
  if (!cache.rope()) return;
  const std::size_t len = cache.length(layer);
  if (q.rows > len)
    throw shape_error("kv_cache rope_queries: q is " + q.shape() + " but layer " + std::to_string(layer) +
                      " holds only " + std::to_string(len) + " positions (append the queries' keys first)");
  apply_rope<float>(q, cache.d_key(), *cache.rope(), cache.first_position() + len - q.rows, pool);
}

/// how the new queries attend to the cache
struct cache_attention_options {
  std::size_t heads = 1;                      // query heads H; a multiple of the cache's kv_heads
  std::optional<float> scale = std::nullopt;  // default 1/sqrt(d_key)
  std::size_t window = 0;                     // 0 = none; else sliding window (attention_mask::window)
  bool alibi = false;                         // ALiBi with the slopes of alibi_slopes(heads) (multihead.hpp)
};

namespace detail {

/// a cache head's rows as float: the view itself (float storage) or a converted copy in `buf`
template <storage_type S>
matrix_view<const float> as_float(const matrix_view<const S>& m, std::vector<float>& buf) {
  if constexpr (std::is_same_v<S, float>) {
    return m;
  } else {
    buf.resize(m.rows * m.cols);
    to_float(m.data, buf.data(), m.rows * m.cols);
    return {buf.data(), m.rows, m.cols, m.cols, 1};
  }
}

/// the query heads of key/value head g (H / H_kv of them): attend's work for one task
template <storage_type S>
void attend_group(const kv_cache<S>& cache, std::size_t layer, std::size_t g,
                  const matrix_view<const float>& q, const matrix_view<float>& out,
                  const cache_attention_options& opt, const std::vector<double>& slopes) {
  const std::size_t H = opt.heads, dk = cache.d_key(), dv = cache.d_value(), group = H / cache.kv_heads();
  const float scale = opt.scale ? *opt.scale : default_scale<float>(dk);
  attention_mask mask;
  mask.causal = true;
  mask.alignment = causal_alignment::lower_right;
  mask.window = opt.window;
  thread_local std::vector<float> kbuf, vbuf;
  const auto k = as_float(cache.keys(layer, g), kbuf);
  const auto v = as_float(cache.values(layer, g), vbuf);
  for (std::size_t h = g * group; h < (g + 1) * group; ++h) {
    attention_mask m = mask;
    if (opt.alibi) m.alibi_slope = slopes[h];
    scaled_dot_product_attention<float>(column_block(q, h * dk, dk), k, v, column_block(out, h * dv, dv),
                                        scale, m, nullptr, nullptr, nullptr);
  }
}

}  // namespace detail

/// @brief out = attention of the new queries q (T, H * d_key) against layer `layer` of the
/// cache (which already holds their own keys and values: T <= length), causal, aligned
/// lower_right; out: (T, H * d_value). Threads: key/value heads.
/// slopes: ALiBi's per query head (opt.alibi), computed by the caller (alibi_slopes(H)).
/// @throws shape_error naming the shapes that do not fit
template <storage_type S>
void attend(const kv_cache<S>& cache, std::size_t layer, matrix_view<const float> q, matrix_view<float> out,
            const cache_attention_options& opt, const std::vector<double>& slopes = {},
            thread_pool* pool = &default_pool()) {
  const std::size_t H = opt.heads, HK = cache.kv_heads(), dk = cache.d_key(), dv = cache.d_value();
  if (H == 0 || H % HK != 0)
    throw shape_error("kv_cache attend: " + std::to_string(H) + " query heads cannot share " +
                      std::to_string(HK) + " key/value heads (kv_heads must divide heads)");
  const std::size_t S_len = cache.length(layer);
  if (q.cols != H * dk || out.cols != H * dv || out.rows != q.rows)
    throw shape_error("kv_cache attend: q is " + q.shape() + " and out " + out.shape() + " but must be " +
                      shape_string(q.rows, H * dk) + " and " + shape_string(q.rows, H * dv) + " (" +
                      std::to_string(H) + " heads of d_key = " + std::to_string(dk) +
                      " and d_value = " + std::to_string(dv) + ")");
  if (q.rows > S_len)  // the shapes fit: the cache is too short (empty, most often: append first)
    throw shape_error(
        "kv_cache attend: q has " + std::to_string(q.rows) + (q.rows == 1 ? " query" : " queries") +
        " but layer " + std::to_string(layer) + " of the cache holds " + std::to_string(S_len) +
        (S_len == 1 ? " position" : " positions") +
        ": append the new tokens' keys and values first (each query is one of the last cached positions)");
  if (opt.alibi && slopes.size() != H)
    throw shape_error("kv_cache attend: " + std::to_string(slopes.size()) + " ALiBi slopes for " +
                      std::to_string(H) + " heads");
  auto run = [&](std::size_t g) { detail::attend_group(cache, layer, g, q, out, opt, slopes); };
  if (pool && HK > 1 && double(q.rows) * double(S_len) * double(H) * double(dk + dv) >= (1 << 17))
    pool->parallel_for(HK, run);
  else
    for (std::size_t g = 0; g < HK; ++g) run(g);
}

/// @brief a 16-bit (or float) matrix as a float matrix, exactly: the inputs of attention in
/// bfloat16 or float16 (as a model's weights and activations come), for the float kernels
template <storage_type S>
[[nodiscard]] dynamic_matrix<float> to_float(const matrix_view<const S>& m) {
  dynamic_matrix<float> out(m.rows, m.cols);
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) out(i, j) = static_cast<float>(m(i, j));
  return out;
}

/// @brief attention of 16-bit inputs with float accumulation: q, k, v converted to float
/// (exactly), then scaled_dot_product_attention<float> (streaming; out is float). The result is
/// the float attention of the 16-bit numbers, bit for bit.
template <storage_type S>
  requires(!std::is_same_v<S, float>)
void scaled_dot_product_attention(const matrix_view<const S>& q, const matrix_view<const S>& k,
                                  const matrix_view<const S>& v, const matrix_view<float>& out, float scale,
                                  const attention_mask& mask = {}, thread_pool* pool = &default_pool()) {
  const auto qf = to_float(q), kf = to_float(k), vf = to_float(v);
  scaled_dot_product_attention<float>(qf.view(), kf.view(), vf.view(), out, scale, mask, nullptr, nullptr,
                                      pool);
}

}  // namespace qkv::runtime
