// page.hpp: the learner's page: one self-contained HTML file (CSS and JavaScript inline, no
// network request of any kind, opens from file://, prints) with a walkthrough's steps in order,
// each step's prose, every matrix as a labelled table whose every cell explains itself (hover,
// click or keyboard focus) with the actual numbers, the proofs of the values the example proves,
// and heatmaps of the weights per head with a head selector, a colour legend, masked entries
// hatched, and an SVG download.
//
//   qkv::io::page p("Illustrated: Self-Attention");
//   p.step("Step 4: attention scores", "querys @ keys.T, no scaling");
//   p.matrix("querys", querys).rows(p.labels("q", 3));
//   p.matrix("keys", keys);
//   p.matrix("attn_scores", scores).how(qkv::io::page_how::dot("querys", "keys", 3));
//   p.heatmap("weights", {"attn_scores_softmax"});
//   qkv::io::write_text_file("page.html", p.str());
//
// The page embeds the matrices as JSON; its script draws the tables and heatmaps and computes
// every explanation from those numbers (a score: the dot product's terms and their sum; a
// scaled score: the scale; a weight: e^(s - max) over the row's sum; an output: the weighted
// sum of the values), so no explanation is illustrative. How each matrix was computed is
// declared with page_how.
//
// Size (page_limits): up to 65,536 numbers in all matrices the page is complete (a tutorial
// page is a few KB). Above that it is summarised: a matrix larger than 8 in a dimension shows
// its first and last 4 rows and columns; the page embeds the rows (and the value columns) the
// shown cells' explanations need, and heatmaps are downsampled to at most 64 x 64 blocks per
// head. The page says so where it happens.
#pragma once

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "page_script.hpp"
#include "svg.hpp"

namespace qkv::io {

/// when a page stops being complete (see the file comment)
struct page_limits {
  std::size_t full_numbers = 65536;  // numbers in all matrices before the page summarises
  std::size_t edge = 4;              // a summarised matrix shows its first and last `edge` rows/columns
  std::size_t whole_side = 16;       // ... of a dimension above this; one of at most this is shown whole
                                     // (BERT's 9 tokens: all 9 rows and columns of each 9 x 9 head)
  std::size_t heatmap_side = 64;     // heatmap cells per side before downsampling
};

/// how a matrix was computed, for its cells' explanations (the page computes them from the data)
struct page_how {
  std::string
      op;  // "" (given), "dot", "matmul", "rowdot", "scale", "softmax", "softmax_backward", "add", "relu",
           // "layernorm", "transpose", "hconcat", "rope",
           // "softmax_naive", "block", "softmax_all", "online_state", "online_p", "online_output",
           // "online_attention", "round16", "interleave", "deinterleave", "cast", "colsum", "sgd",
           // "cross_entropy", "embedding_backward", "embedding", "flash_row_max", "flash_row_sum",
           // "flash_weights", "logsumexp", "logsumexp_weights", "flash_over_keys", "flash_over_queries",
           // "key_padding_mask", "padded_divide"
  std::string a, b;    // operand matrix ids (scale: b, when set, the terms added after scaling)
  std::string bias;    // optional bias matrix id (1 x n), added to column j (scale: a key padding mask)
  std::size_t n = 0;   // terms of each sum
  std::size_t ac = 0;  // first column of A used (a head's slice)
  std::size_t br = 0;  // matmul: first row of B used
  std::size_t bc = 0;  // first column of B used
  double scale = 1;    // "scale": the factor
  double divisor = 0;  // "scale": nonzero when the step divides by it (scale is then 1 / divisor)
  std::string note;    // "scale": how the factor came ("1/sqrt(64)")
  std::string mask;    // "scale": why a key is masked (empty: no mask)

  /// C(i, j) = sum_m A(i, ac + m) B(j, bc + m): scores (q . k), a projection x W^T (out_in)
  static page_how dot(std::string a, std::string b, std::size_t n, std::size_t ac = 0, std::size_t bc = 0,
                      std::string bias = {}) {
    page_how h;
    h.op = "dot", h.a = std::move(a), h.b = std::move(b), h.n = n, h.ac = ac, h.bc = bc,
    h.bias = std::move(bias);
    return h;
  }
  /// C(i, j) = sum_m A(i, ac + m) B(br + m, bc + j): weights @ values, a projection x W (in_out)
  static page_how matmul(std::string a, std::string b, std::size_t n, std::size_t ac = 0, std::size_t br = 0,
                         std::size_t bc = 0, std::string bias = {}) {
    page_how h;
    h.op = "matmul", h.a = std::move(a), h.b = std::move(b), h.n = n, h.ac = ac, h.br = br, h.bc = bc;
    h.bias = std::move(bias);
    return h;
  }
  /// C(i, j) = scale A(i, j) (+ B(i, j) when `added` names a matrix: a bias, ALiBi), or -inf
  /// where the key is masked (`mask_note` says why)
  static page_how scaled(std::string a, double scale, std::string how_scale, std::string mask_note = {},
                         std::string added = {}) {
    page_how h;
    h.op = "scale", h.a = std::move(a), h.scale = scale, h.note = std::move(how_scale);
    h.mask = std::move(mask_note), h.b = std::move(added);
    return h;
  }
  /// C(i, j) = A(i, j) / divisor (+ B(i, j) when `added` names a matrix), or -inf where the key is
  /// masked: the scale as the core's divided() and PyTorch's `scores / d_k**0.5` compute it (a
  /// division rounds differently from a product with 1 / divisor)
  static page_how divided(std::string a, double divisor, std::string how_scale, std::string mask_note = {},
                          std::string added = {}) {
    page_how h =
        scaled(std::move(a), 1 / divisor, std::move(how_scale), std::move(mask_note), std::move(added));
    h.divisor = divisor;
    return h;
  }
  /// divided(), then -inf in every column j where row `row` of the key padding mask `padding` (a
  /// key_padding_mask() matrix: 1 = padding) is 1: a padded sequence's scaled scores, whose mask
  /// follows its length (core/flat_steps.hpp's padded_divide, kind 54)
  static page_how padded_divided(std::string a, double divisor, std::string how_scale, std::string mask_note,
                                 std::string padding, std::size_t row) {
    page_how h = divided(std::move(a), divisor, std::move(how_scale), std::move(mask_note));
    h.bias = std::move(padding), h.br = row;
    return h;
  }
  /// C(b, j) = 1 where key j of sequence b is padding (j >= lengths(0, b)), else 0: PyTorch's
  /// key_padding_mask from the lengths (batch.hpp's key_padding_mask; core/flat_steps.hpp's
  /// key_padding_mask, kind 53), `lengths` a (1, B) matrix
  static page_how key_padding_mask(std::string lengths) {
    page_how h;
    h.op = "key_padding_mask", h.a = std::move(lengths);
    return h;
  }
  /// rotary position embeddings of row i (RoPE, runtime/rope.hpp): in each head of `head_dim`
  /// columns, the first `rotary_dim` are rotated in pairs (`layout`: "half_split" pairs c and
  /// c + r/2, "interleaved" 2c and 2c + 1): C = A(i, a) cos - A(i, b) sin for the first of a pair,
  /// A(i, b) cos + A(i, a) sin for the second, with cos = Cos(i, pair), sin = Sin(i, pair);
  /// columns past rotary_dim are A's
  static page_how rope(std::string a, std::string cos, std::string sin, std::size_t head_dim,
                       std::size_t rotary_dim, std::string layout) {
    page_how h;
    h.op = "rope", h.a = std::move(a), h.b = std::move(cos), h.bias = std::move(sin), h.n = head_dim;
    h.ac = rotary_dim, h.note = std::move(layout);
    return h;
  }
  /// C(i, 0) = sum_m A(i, ac + m) B(i, bc + m): a row of A dotted with the same row of B
  /// (the softmax backward's D = rowsum(dO ∘ O)), a column of T
  static page_how row_dot(std::string a, std::string b, std::size_t n, std::size_t ac = 0,
                          std::size_t bc = 0) {
    page_how h;
    h.op = "rowdot", h.a = std::move(a), h.b = std::move(b), h.n = n, h.ac = ac, h.bc = bc;
    return h;
  }
  /// C(i, j) = A(i, j) (B(i, j) - D(i, 0)): the softmax's backward (SoftmaxBackward0), A the
  /// weights P, B their gradient dP, `d` the column D = rowsum(dP ∘ P); where masked (`mask_note`
  /// says why), P = 0 and C exactly 0
  static page_how softmax_backward(std::string weights, std::string d_weights, std::string d,
                                   std::string mask_note = {}) {
    page_how h;
    h.op = "softmax_backward", h.a = std::move(weights), h.b = std::move(d_weights), h.bias = std::move(d);
    h.mask = std::move(mask_note);
    return h;
  }
  /// C(i, j) = A(i, j) + B(i, j) (a residual connection)
  static page_how add(std::string a, std::string b) {
    page_how h;
    h.op = "add", h.a = std::move(a), h.b = std::move(b);
    return h;
  }
  /// C(i, j) = A(j, i) (a vector as a row or a column)
  static page_how transposed(std::string a) {
    page_how h;
    h.op = "transpose", h.a = std::move(a);
    return h;
  }
  /// C(i, j) = A(row + i, col + j): a block of A (a row of the queries, a head's columns)
  static page_how block(std::string a, std::size_t row, std::size_t col = 0) {
    page_how h;
    h.op = "block", h.a = std::move(a), h.br = row, h.bc = col;
    return h;
  }
  /// C(i, j) = A(i, j) for j < A's columns, else B(i, j - A's columns): two matrices side by side
  /// (the heads' contexts, concatenated)
  static page_how hconcat(std::string a, std::string b) {
    page_how h;
    h.op = "hconcat", h.a = std::move(a), h.b = std::move(b);
    return h;
  }
  /// C(i, j) = max(0, A(i, j))
  static page_how relu(std::string a) {
    page_how h;
    h.op = "relu", h.a = std::move(a);
    return h;
  }
  /// C(i, j) = (A(i, j) - mean_i) / sqrt(var_i + eps) W(0, j) + bias(0, j) over row i of A (LayerNorm:
  /// the biased variance); `weight` and `bias` are (1, n) matrix ids
  static page_how layer_norm(std::string a, double eps, std::string weight, std::string bias) {
    page_how h;
    h.op = "layernorm", h.a = std::move(a), h.scale = eps, h.b = std::move(weight), h.bias = std::move(bias);
    return h;
  }
  /// C(i, j) = e^(A(i, j) - max_k A(i, k)) / sum_k e^(A(i, k) - max_k A(i, k))
  static page_how softmax(std::string a) {
    page_how h;
    h.op = "softmax", h.a = std::move(a);
    return h;
  }
  /// C(i, j) = e^A(i, j) / sum_k e^A(i, k): the textbook formula, no maximum subtracted
  /// (naive_softmax_rows; the same value in exact arithmetic, other roundings in float)
  static page_how naive_softmax(std::string a) {
    page_how h;
    h.op = "softmax_naive", h.a = std::move(a);
    return h;
  }
  /// C(i, j) = e^(A(i, j) - max) / sum over every cell of e^(A - max): one softmax over the whole
  /// matrix (softmax_all: tutorial 000's numpy cell; the matrix sums to 1, a row does not)
  static page_how softmax_all(std::string a) {
    page_how h;
    h.op = "softmax_all", h.a = std::move(a);
    return h;
  }
  /// flash attention's online softmax after a block of n keys (core/online_softmax.hpp): row i is
  /// the running state [block max, m, rescale, l, o (B's columns)] from the state before it
  /// (`before`, its own shape; empty: the first block, m = -inf, l = 0, o = 0), the scores
  /// A(i, first_score .. + n) and the values B(first_key .. + n): m = max(m_old, block max), rescale
  /// = e^(m_old - m), l = l_old rescale + sum e^(s - m), o = o_old rescale + sum e^(s - m) v
  static page_how online_state(std::string scores, std::string values, std::string before, std::size_t n,
                               std::size_t first_score, std::size_t first_key) {
    page_how h;
    h.op = "online_state", h.a = std::move(scores), h.b = std::move(values), h.bias = std::move(before),
    h.n = n;
    h.ac = first_score, h.br = first_key;
    return h;
  }
  /// C(i, j) = e^(A(i, first + j) - m), m = S(i, 1) of the state S (column 1: the running maximum)
  static page_how online_p(std::string scores, std::string state, std::size_t first = 0) {
    page_how h;
    h.op = "online_p", h.a = std::move(scores), h.b = std::move(state), h.ac = first;
    return h;
  }
  /// C(i, j) = A(i, j) / l, l = S(i, 3) of the state S (column 3: the running sum): o / l
  static page_how online_output(std::string o, std::string state) {
    page_how h;
    h.op = "online_output", h.a = std::move(o), h.b = std::move(state);
    return h;
  }
  /// C(i, j) = A(i, j) rounded to `type` ("bfloat16" or "float16": to nearest, ties to even) and
  /// read back as a float, exactly (core/half.hpp: a batch's q, k, v kept in 16 bits)
  static page_how rounded16(std::string a, std::string type) {
    page_how h;
    h.op = "round16", h.a = std::move(a), h.note = std::move(type);
    return h;
  }
  /// C(i, 2q) = A(i, q), C(i, 2q + 1) = A(i, q + cols / 2): each row's two halves as pairs (RoPE's
  /// half_split columns laid out as interleaved ones)
  static page_how interleave(std::string a) {
    page_how h;
    h.op = "interleave", h.a = std::move(a);
    return h;
  }
  /// C(i, q) = A(i, 2q), C(i, q + cols / 2) = A(i, 2q + 1): interleave's inverse
  static page_how deinterleave(std::string a) {
    page_how h;
    h.op = "deinterleave", h.a = std::move(a);
    return h;
  }
  /// every row of the scores A over the values B by the online softmax in blocks of `block` keys
  /// (online_attention: flash attention's output, the weights never materialised)
  static page_how online_attention(std::string scores, std::string values, std::size_t block) {
    page_how h;
    h.op = "online_attention", h.a = std::move(scores), h.b = std::move(values), h.n = block;
    return h;
  }
  /// C(i, j) = A(i, j) in C's type, as matrix_cast converts (core/flat_steps.hpp's cast, kind
  /// 40): a float32 matrix as double (exactly), a float's exact value as a rational (exactly())
  static page_how cast(std::string a) {
    page_how h;
    h.op = "cast", h.a = std::move(a);
    return h;
  }
  /// C(0, j) = A(0, j) + A(1, j) + ...: the sum of each column (matrix.hpp's column_sums, a
  /// bias's gradient; core/flat_steps.hpp's column_sums, kind 41)
  static page_how column_sums(std::string a) {
    page_how h;
    h.op = "colsum", h.a = std::move(a);
    return h;
  }
  /// C(i, j) = W(i, j) - lr G(i, j), one rounding (torch.optim.SGD's step: sgd.hpp's sgd_step;
  /// core/flat_steps.hpp's sgd, kind 42); `lr` in the parameters' type
  static page_how sgd(std::string w, std::string g, double lr) {
    page_how h;
    h.op = "sgd", h.a = std::move(w), h.b = std::move(g), h.scale = lr;
    return h;
  }
  /// C(i, 0) = -log softmax(A)(i, t_i): each position's cross-entropy loss (cross_entropy's
  /// losses; core/flat_steps.hpp's cross_entropy_losses, kind 43), A the logits, `targets` a
  /// (1, rows) matrix of the target ids
  static page_how cross_entropy_losses(std::string logits, std::string targets) {
    page_how h;
    h.op = "cross_entropy", h.a = std::move(logits), h.b = std::move(targets);
    return h;
  }
  /// C = the gradient of an embedding table: 0, then row ids(k) += row k of `d_out` (embed_backward;
  /// core/flat_steps.hpp's embedding_backward, kind 44), `ids` a (1, len) matrix of token ids
  static page_how embedding_backward(std::string d_out, std::string ids) {
    page_how h;
    h.op = "embedding_backward", h.a = std::move(d_out), h.b = std::move(ids);
    return h;
  }
  /// C = W after the first step of AdamW (zero moments): W decay + step_size m / (sqrt(v) /
  /// sqrt(bc2) + eps), m = (1 - beta1) g, v = (1 - beta2) g g (adamw.hpp's adamw_step;
  /// core/flat_steps.hpp's adamw, kind 57); `scalars` a (1, 8) matrix of the step's scalars in
  /// the parameters' type (adamw_step_scalars: 1 - lr wd, beta1, 1 - beta1, beta2, 1 - beta2,
  /// -(lr / bc1), sqrt(bc2), eps)
  static page_how adamw(std::string w, std::string g, std::string scalars) {
    page_how h;
    h.op = "adamw", h.a = std::move(w), h.b = std::move(g), h.bias = std::move(scalars);
    return h;
  }
  /// C(k, j) = table(ids(k), j): an embedding's rows for the tokens (embed, nn.Embedding;
  /// core/flat_steps.hpp's embedding, kind 45), `ids` a (1, len) matrix of token ids
  static page_how embedding(std::string table, std::string ids) {
    page_how h;
    h.op = "embedding", h.a = std::move(table), h.b = std::move(ids);
    return h;
  }
  /// C(i, 0) = m_i: flash attention's running maximum of row i of the scores after its last block
  /// of `block` keys (flash_attention_forward's row_max; core/flat_steps.hpp's flash_statistic,
  /// kind 46)
  static page_how flash_row_max(std::string scores, std::size_t block) {
    page_how h;
    h.op = "flash_row_max", h.a = std::move(scores), h.n = block;
    return h;
  }
  /// C(i, 0) = l_i: flash attention's running sum of e^(s - m) over row i of the scores, block by
  /// block, rescaled by e^(m_old - m) at each new maximum (flash_attention_forward's row_sum; kind 47)
  static page_how flash_row_sum(std::string scores, std::size_t block) {
    page_how h;
    h.op = "flash_row_sum", h.a = std::move(scores), h.n = block;
    return h;
  }
  /// C(i, j) = e^(S(i, j) - m_i) / l_i: the weight flash's backward recomputes from the kept m and
  /// l, (rows, 1) each (flash_attention_backward; core/flat_steps.hpp's flash_weights, kind 48);
  /// 0 for a masked key
  static page_how flash_weights(std::string scores, std::string row_max, std::string row_sum) {
    page_how h;
    h.op = "flash_weights", h.a = std::move(scores), h.b = std::move(row_max), h.bias = std::move(row_sum);
    return h;
  }
  /// C(i, 0) = m_i + log l_i: FlashAttention-2's one number per query (row_logsumexp; kind 49)
  static page_how logsumexp(std::string row_max, std::string row_sum) {
    page_how h;
    h.op = "logsumexp", h.a = std::move(row_max), h.b = std::move(row_sum);
    return h;
  }
  /// C(i, j) = e^(S(i, j) - L_i): the weight the logsumexp backward recomputes from L (rows, 1)
  /// (flash_attention_backward's second form; kind 50); 0 for a masked key
  static page_how logsumexp_weights(std::string scores, std::string L) {
    page_how h;
    h.op = "logsumexp_weights", h.a = std::move(scores), h.b = std::move(L);
    return h;
  }
  /// C(i, c) = sum over the keys j of A(i, j) B(j, c), a key whose score S(i, j) is -inf skipped,
  /// as flash's backward loop sums dQ = sum_j d_score_ij k_j (kind 51)
  static page_how flash_over_keys(std::string a, std::string b, std::string scores) {
    page_how h;
    h.op = "flash_over_keys", h.a = std::move(a), h.b = std::move(b), h.bias = std::move(scores);
    return h;
  }
  /// C(j, c) = sum over the queries i of A(i, j) B(i, c), a masked score S(i, j) skipped, as
  /// flash's backward loop sums dK = sum_i d_score_ij q_i and dV = sum_i P_ij dO_i (kind 52)
  static page_how flash_over_queries(std::string a, std::string b, std::string scores) {
    page_how h;
    h.op = "flash_over_queries", h.a = std::move(a), h.b = std::move(b), h.bias = std::move(scores);
    return h;
  }
};

/// a static_assert of an example's source (found by scripts/page_notes.py)
struct page_source_proof {
  std::string_view file;
  int line;
  std::string_view text;     // the static_assert, as written
  std::string_view comment;  // the comment lines right above it (the hand arithmetic)
};

/// a "// Step N: ..." comment block of an example's source
struct page_source_step {
  int number;
  std::string_view text;  // the block, comment markers removed
  std::string_view file;
  int line;
};

namespace page_detail {

inline void json_string(std::string& out, std::string_view s) {
  out += '"';
  // xml_escape's UTF-8 cleaning is not wanted here; invalid bytes become U+FFFD
  std::u32string chars;
  try {
    chars = unicode::decode_utf8(s);
  } catch (const unicode::invalid_utf8&) {
    for (unsigned char c : s) chars += c < 0x80 ? static_cast<char32_t>(c) : char32_t{0xFFFD};
  }
  for (char32_t c : chars) {
    switch (c) {
      case U'"': out += "\\\""; break;
      case U'\\': out += "\\\\"; break;
      case U'\n': out += "\\n"; break;
      case U'\t': out += "\\t"; break;
      case U'<': out += "\\u003c"; break;  // never "</script>" inside the data
      case U'>': out += "\\u003e"; break;
      case U'&': out += "\\u0026"; break;
      case 0x2028: out += "\\u2028"; break;
      case 0x2029: out += "\\u2029"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          unicode::append_utf8(c, out);
        }
    }
  }
  out += '"';
}

/// the shortest text that reads back to the same float (or double); non-finite as a string
inline void json_number(std::string& out, double v, bool as_float) {
  if (std::isnan(v)) {
    out += "\"nan\"";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "\"inf\"" : "\"-inf\"";
    return;
  }
  char buf[40];
  const auto r = as_float ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                          : std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

/// @brief the numbers' bits, little-endian float32 (or float64), in base64: 5.3 characters per
/// float32 where its shortest decimal takes about 11 (page::pack_numbers)
inline void json_bits(std::string& out, const std::vector<double>& values, bool as_float) {
  static constexpr char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes;
  bytes.reserve(values.size() * (as_float ? 4 : 8));
  for (double v : values) {
    const std::uint64_t u =
        as_float ? std::bit_cast<std::uint32_t>(static_cast<float>(v)) : std::bit_cast<std::uint64_t>(v);
    for (std::size_t k = 0; k < (as_float ? 4u : 8u); ++k)
      bytes.push_back(static_cast<unsigned char>(u >> (8 * k)));
  }
  out += '"';
  for (std::size_t k = 0; k < bytes.size(); k += 3) {
    const std::uint32_t n = (std::uint32_t{bytes[k]} << 16) |
                            (k + 1 < bytes.size() ? std::uint32_t{bytes[k + 1]} << 8 : 0u) |
                            (k + 2 < bytes.size() ? std::uint32_t{bytes[k + 2]} : 0u);
    out += digits[(n >> 18) & 63];
    out += digits[(n >> 12) & 63];
    out += k + 1 < bytes.size() ? digits[(n >> 6) & 63] : '=';
    out += k + 2 < bytes.size() ? digits[n & 63] : '=';
  }
  out += '"';
}

/// @brief the numbers' bits, little-endian float32 (or float64), in base 85: each 4 bytes (as a
/// little-endian 32-bit number) as 5 characters, most significant digit first, from printable
/// ASCII without " ' & < > \ ` | ~ (JSON- and HTML-safe): 5 characters per float32 where base64
/// takes 5.33 (page::pack_numbers' `rows`: a summarised `qkv attend` page's)
inline void json_b85(std::string& out, const std::vector<double>& values, bool as_float) {
  static constexpr char digits[] =
      "!#$%()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_abcdefghijklmnopqrstuvwxyz{}";
  static_assert(sizeof digits == 86, "85 digits");
  auto word = [&](std::uint32_t u) {
    char c[5];
    for (int k = 4; k >= 0; --k) c[k] = digits[u % 85], u /= 85;
    out.append(c, 5);
  };
  out += '"';
  for (double v : values) {
    if (as_float) {
      word(std::bit_cast<std::uint32_t>(static_cast<float>(v)));
    } else {
      const auto u = std::bit_cast<std::uint64_t>(v);
      word(static_cast<std::uint32_t>(u)), word(static_cast<std::uint32_t>(u >> 32));
    }
  }
  out += '"';
}

/// a number with 2 significant digits (heatmap blocks: colour only, the exact values are in the tables)
inline void json_short(std::string& out, double v) {
  if (!std::isfinite(v)) return json_number(out, v, false);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2g", v);
  out += buf;
}

template <class T>
concept rational_like = requires(const T& r) {
  r.numerator();
  r.denominator();
};

template <class T>
double to_double(const T& v) {
  if constexpr (rational_like<T> && requires { v.template to<double>(); }) {
    return v.template to<double>();  // qkv::exact::rational: correctly rounded, any integer width
  } else if constexpr (rational_like<T>) {
    return static_cast<double>(v.numerator()) / static_cast<double>(v.denominator());
  } else {
    return static_cast<double>(v);
  }
}

template <class T>
std::string exact_text(const T& v) {
  if constexpr (rational_like<T> && requires(std::ostringstream& os) { os << v; }) {
    std::ostringstream os;  // "n/d" in full, whatever the integer width (q128's 2^104 denominators)
    os << v;
    return os.str();
  } else if constexpr (rational_like<T>) {
    const auto n = static_cast<long long>(v.numerator()), d = static_cast<long long>(v.denominator());
    return d == 1 ? std::to_string(n) : std::to_string(n) + "/" + std::to_string(d);
  } else {
    return {};
  }
}

}  // namespace page_detail

/// a page under construction; matrix(), heatmap() etc. add to the current step
class page {
 public:
  struct matrix_entry {
    std::string id, caption;
    std::size_t rows = 0, cols = 0;
    std::vector<double> values;
    std::vector<std::string> exact;  // rationals, per cell, or empty
    std::string dtype = "float32";   // how the numbers are printed: "float32", "float64", "exact"
    std::vector<std::string> row_labels, col_labels;
    page_how how;
    std::vector<double> expected;  // what a proof says the values are (per cell), or empty
    std::string expected_name;     // the expected matrix's name in the source
    double tolerance = -1;  // the proof's tolerance; 0: exact (==); < 0: a bound the static_assert derives
    std::string tolerance_text;
    std::vector<double> truth_ulps;       // the error against the truth, in ulps of dtype, per cell, or empty
    std::vector<std::string> truth_text;  // the truth itself, per cell (a fraction, 50 digits), or empty
    std::string truth_name;               // what the truth is ("the exact rational w_T_2")
    bool derived = false;     // computed, but not by a page_how: not an exact input (page_truth.hpp)
    std::string derived_why;  // derived(): why the page's steps do not compute it (or empty)
    bool hidden = false;      // data only (an operand not shown as a table)
    bool scratch = false;     // the module's working matrix: hidden, its numbers not embedded (scratch())
    bool whole = false;       // embedded whole on a summarised page too (whole())
  };

  /// a handle to the last matrix added, to set its labels, how it was computed, its proof
  class matrix_ref {
   public:
    explicit matrix_ref(matrix_entry& m) : m_(&m) {}
    matrix_ref& rows(std::vector<std::string> l) {
      check_labels(l, m_->rows, "row");
      m_->row_labels = std::move(l);
      return *this;
    }
    matrix_ref& cols(std::vector<std::string> l) {
      check_labels(l, m_->cols, "column");
      m_->col_labels = std::move(l);
      return *this;
    }
    matrix_ref& how(page_how h) {
      m_->how = std::move(h);
      return *this;
    }
    matrix_ref& caption(std::string c) {
      m_->caption = std::move(c);
      return *this;
    }
    matrix_ref& dtype(std::string d) {
      m_->dtype = std::move(d);
      return *this;
    }
    matrix_ref& hidden(bool h = true) {
      m_->hidden = h;
      return *this;
    }
    /// @brief a working matrix of the page's WebAssembly module (io/page_recompute.hpp): hidden,
    /// and its numbers are not embedded (the module computes them from the page's own, as a step
    /// between two that are shown: the 12 heads' contexts concatenated two at a time)
    matrix_ref& scratch(bool on = true) {
      m_->scratch = on;
      m_->hidden = m_->hidden || on;
      return *this;
    }
    /// @brief embedded whole even on a summarised page (every row; packed as bits with
    /// pack_numbers()): an input of the page's WebAssembly module (a summarised `qkv attend`
    /// page's queries, keys and values, tools/attend_page.hpp)
    matrix_ref& whole(bool on = true) {
      m_->whole = on;
      return *this;
    }
    /// computed, but not by a page_how (a rounding, a sine, a concatenation): not an exact input,
    /// so no truth is computed from it (page_truth.hpp)
    matrix_ref& derived(bool d = true) {
      m_->derived = d;
      return *this;
    }
    /// derived(), and why the page's steps do not compute it (what an editable page says when
    /// the matrix keeps the example's numbers after an edit: "a bound, not a computation")
    matrix_ref& derived_because(std::string why) {
      m_->derived = true;
      m_->derived_why = std::move(why);
      return *this;
    }
    /// what the example proves the values are (a matrix of the same shape, its name in the
    /// source) within `tolerance` (0: exactly), `tolerance_text` saying where the bound comes from
    template <class M>
    matrix_ref& proven(const M& expected, std::string expected_name, double tolerance,
                       std::string tolerance_text = {}) {
      if (expected.rows() != m_->rows || expected.cols() != m_->cols)
        throw std::invalid_argument("page: the expected values of '" + m_->id + "' are (" +
                                    std::to_string(expected.rows()) + ", " + std::to_string(expected.cols()) +
                                    "), the matrix is (" + std::to_string(m_->rows) + ", " +
                                    std::to_string(m_->cols) + ")");
      m_->expected.clear();
      for (std::size_t i = 0; i < m_->rows; ++i)
        for (std::size_t j = 0; j < m_->cols; ++j)
          m_->expected.push_back(page_detail::to_double(expected(i, j)));
      m_->expected_name = std::move(expected_name);
      m_->tolerance = tolerance;
      m_->tolerance_text = std::move(tolerance_text);
      return *this;
    }

    /// the error of each value against the truth (an exact rational, a 50-digit value), in ulps
    /// of the matrix's type, computed by the caller without rounding the truth to the type
    /// first (rows * cols, row-major); `texts` the truth per cell (or empty), `name` what it is
    matrix_ref& truth(std::vector<double> ulps, std::vector<std::string> texts, std::string name) {
      if (ulps.size() != m_->rows * m_->cols || (!texts.empty() && texts.size() != ulps.size()))
        throw std::invalid_argument("page: the truth of '" + m_->id + "' has " + std::to_string(ulps.size()) +
                                    " errors and " + std::to_string(texts.size()) + " values for (" +
                                    std::to_string(m_->rows) + ", " + std::to_string(m_->cols) + ")");
      m_->truth_ulps = std::move(ulps);
      m_->truth_text = std::move(texts);
      m_->truth_name = std::move(name);
      return *this;
    }

   private:
    matrix_entry* m_;
    void check_labels(const std::vector<std::string>& l, std::size_t n, const char* what) const {
      if (l.size() != n)
        throw std::invalid_argument("page: matrix '" + m_->id + "' has " + std::to_string(n) + " " + what +
                                    "s but " + std::to_string(l.size()) + " " + what + " labels");
    }
  };

  using how = page_how;  // so that an example's page(Page&) names it without an include

  explicit page(std::string title, page_limits limits = {}) : title_(std::move(title)), limits_(limits) {}

  /// slice n of a stack (depth(), rows(), cols(), (n, i, j)) as a matrix
  template <class S>
  struct slice_of {
    const S* s;
    std::size_t n;
    [[nodiscard]] std::size_t rows() const { return s->rows(); }
    [[nodiscard]] std::size_t cols() const { return s->cols(); }
    [[nodiscard]] decltype(auto) operator()(std::size_t i, std::size_t j) const { return (*s)(n, i, j); }
  };
  template <class S>
  [[nodiscard]] static slice_of<S> slice(const S& s, std::size_t n) {
    return {&s, n};
  }

  /// comment text as paragraphs: wrapped lines joined with a space; a blank line, or a line
  /// starting a list item ("- ", "* "), starts a new line
  [[nodiscard]] static std::string reflow(std::string_view text) {
    std::string out;
    bool blank = false;
    std::size_t start = 0;
    while (start <= text.size()) {
      auto end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(start, end - start);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
      if (line.empty()) {
        blank = !out.empty();
      } else {
        const bool item = line.size() > 1 && (line[0] == '-' || line[0] == '*') && line[1] == ' ';
        if (!out.empty()) out += blank ? "\n\n" : (item ? "\n" : " ");
        out += line;
        blank = false;
      }
      start = end + 1;
    }
    return out;
  }

  /// "q1", "q2", ... "qn"
  [[nodiscard]] static std::vector<std::string> labels(std::string_view prefix, std::size_t n) {
    std::vector<std::string> l;
    l.reserve(n);
    for (std::size_t i = 0; i < n; ++i) l.push_back(std::string(prefix) + std::to_string(i + 1));
    return l;
  }

  /// the introduction, above the steps
  /// @brief what makes the page editable (docs/pages.md, "Editing a page"): a JSON object, written
  /// into the page's data as "edit" as it is given (the caller builds it: the WebAssembly module
  /// in base64, the sizes, which matrices are the inputs and which the module recomputes); or an
  /// object with only "why": the page is not editable, and says why. Empty: nothing is said.
  page& edit(std::string json_object) {
    edit_ = std::move(json_object);
    return *this;
  }

  /// @brief a learner's own sentence on an editable page (docs/pages.md, "Editing an example's
  /// page"): x_id's rows become the rows of table_id (nn.Embedding's weight) that the tutorial's
  /// dictionary rule gives the sentence's words (commas dropped; the distinct words sorted by code
  /// point, numbered from 0), and the words label every row and column the example's words
  /// labelled. A sentence of as many words as x has rows; `rule` says the rule in the page's words.
  page& sentence_input(std::string x_id, std::string table_id, std::string rule) {
    sentence_x_ = std::move(x_id), sentence_table_ = std::move(table_id), sentence_rule_ = std::move(rule);
    return *this;
  }

  /// @brief on a summarised page, embed each float matrix that is embedded whole as its numbers'
  /// bits in base64 ("bits", page_detail::json_bits) rather than as decimals: less than half the
  /// bytes (example 04's (9, 768) matrices, which its editable page must carry within 1 MB)
  /// `rows`: in base 85 ("b85", page_detail::json_b85: 5 characters a float32), the rows and
  /// columns embedded of the other matrices too ("row_b85", "col_b85"), and a downsampled
  /// heatmap's blocks are left to the page's WebAssembly module, which draws them on load from
  /// the weights it computes (a summarised, editable `qkv attend` page's: its queries, keys and
  /// values take most of its weight)
  page& pack_numbers(bool on = true, bool rows = false) {
    pack_ = on;
    pack_rows_ = on && rows;
    return *this;
  }

  page& intro(std::string_view text) {
    intro_ = std::string(text);
    return *this;
  }

  /// the source an example's steps and proofs come from (scripts/page_notes.py reads them
  /// from the example's comments and static_asserts, so that the prose has one source)
  page& source(std::string_view file, std::vector<page_source_step> steps,
               std::vector<page_source_proof> proofs) {
    source_file_ = std::string(file);
    source_steps_ = std::move(steps);
    proofs_ = std::move(proofs);
    return *this;
  }

  /// a new step with its title and prose
  page& step(std::string_view title, std::string_view prose = {}) {
    steps_.push_back({std::string(title), std::string(prose), {}, {}});
    return *this;
  }

  /// a new step whose text is the example's own "// Step N:" comment (see source()); its first
  /// line is the title, the rest the prose
  page& step(int number) {
    for (const auto& s : source_steps_)
      if (s.number == number) {
        // the comment's first sentence (after the "Step N:") is the title, the rest the prose
        // (an unnumbered section's title ends at its first ". " or ": ")
        const std::string text = reflow(s.text);
        const bool numbered =
            text.rfind("Step", 0) == 0 || (!text.empty() && text[0] >= '0' && text[0] <= '9');
        const auto colon = text.find(':');
        std::size_t cut = std::string::npos;
        for (std::size_t q = numbered && colon != std::string::npos ? colon : 0; q + 1 < text.size(); ++q)
          if ((text[q] == '.' || (!numbered && text[q] == ':')) &&
              (text[q + 1] == ' ' || text[q + 1] == '\n') && q > 0 && text[q - 1] != '.' &&
              (q + 2 >= text.size() || text[q + 2] != '.')) {
            cut = q;
            break;
          }
        step(text.substr(0, cut), cut == std::string::npos ? std::string{} : text.substr(cut + 2));
        steps_.back().where = std::string(s.file) + ":" + std::to_string(s.line);
        return *this;
      }
    return step("Step " + std::to_string(number));
  }

  /// a paragraph in the current step
  page& text(std::string_view t) {
    item it;
    it.kind = "text", it.text = std::string(t);
    current().items.push_back(std::move(it));
    return *this;
  }

  /// a matrix from values, row-major (rows * cols); shown as a table in the current step
  matrix_ref matrix(std::string id, std::size_t rows, std::size_t cols, std::vector<double> values) {
    if (values.size() != rows * cols)
      throw std::invalid_argument("page: matrix '" + id + "' is (" + std::to_string(rows) + ", " +
                                  std::to_string(cols) + ") but has " + std::to_string(values.size()) +
                                  " values");
    if (index_.count(id)) throw std::invalid_argument("page: matrix '" + id + "' added twice");
    matrix_entry m;
    m.id = id, m.caption = id, m.rows = rows, m.cols = cols, m.values = std::move(values);
    index_[id] = matrices_.size();
    matrices_.push_back(std::move(m));
    item it;
    it.kind = "matrix", it.text = id;
    current().items.push_back(std::move(it));
    return matrix_ref(matrices_.back());
  }

  /// any matrix type with rows(), cols() and (i, j): qkv::matrix, dynamic_matrix, rationals
  template <class M>
    requires requires(const M& m) {
      m.rows();
      m.cols();
      m(std::size_t{0}, std::size_t{0});
    }
  matrix_ref matrix(std::string id, const M& m) {
    std::vector<double> v;
    std::vector<std::string> exact;
    using V = std::remove_cvref_t<decltype(m(std::size_t{0}, std::size_t{0}))>;
    v.reserve(m.rows() * m.cols());
    for (std::size_t i = 0; i < m.rows(); ++i)
      for (std::size_t j = 0; j < m.cols(); ++j) {
        v.push_back(page_detail::to_double(m(i, j)));
        if constexpr (page_detail::rational_like<V>) exact.push_back(page_detail::exact_text(m(i, j)));
      }
    auto ref = matrix(std::move(id), m.rows(), m.cols(), std::move(v));
    auto& e = matrices_.back();
    e.exact = std::move(exact);
    if constexpr (page_detail::rational_like<V>)
      e.dtype = "exact";
    else if constexpr (std::is_same_v<V, double>)
      e.dtype = "float64";
    return ref;
  }

  /// heatmaps of one matrix per head (all of the same shape); labels from the first matrix
  page& heatmap(std::string title, std::vector<std::string> head_matrix_ids,
                std::vector<std::string> head_names = {}) {
    if (head_matrix_ids.empty()) throw std::invalid_argument("page: heatmap '" + title + "' has no heads");
    for (const auto& id : head_matrix_ids)
      if (!index_.count(id))
        throw std::invalid_argument("page: heatmap '" + title + "' names no matrix '" + id + "'");
    const auto& first = matrices_[index_.at(head_matrix_ids[0])];
    for (const auto& id : head_matrix_ids) {
      const auto& m = matrices_[index_.at(id)];
      if (m.rows != first.rows || m.cols != first.cols)
        throw std::invalid_argument("page: heatmap '" + title + "': '" + id + "' is (" +
                                    std::to_string(m.rows) + ", " + std::to_string(m.cols) + "), '" +
                                    first.id + "' is (" + std::to_string(first.rows) + ", " +
                                    std::to_string(first.cols) + ")");
    }
    if (head_names.empty())
      for (std::size_t h = 0; h < head_matrix_ids.size(); ++h)
        head_names.push_back("head " + std::to_string(h));
    item it;
    it.kind = "heatmap", it.text = std::move(title), it.ids = std::move(head_matrix_ids),
    it.names = std::move(head_names);
    current().items.push_back(std::move(it));
    return *this;
  }

  /// a per-cell mask for the heatmaps (true = masked: drawn hatched), rows * cols, row-major
  page& heatmap_mask(std::vector<bool> masked) {
    auto& it = current().items;
    if (it.empty() || it.back().kind != "heatmap")
      throw std::invalid_argument("page: heatmap_mask without a heatmap");
    const auto& m = matrices_[index_.at(it.back().ids[0])];
    if (masked.size() != m.rows * m.cols)
      throw std::invalid_argument("page: heatmap_mask has " + std::to_string(masked.size()) + " flags for (" +
                                  std::to_string(m.rows) + ", " + std::to_string(m.cols) + ")");
    it.back().mask = std::move(masked);
    return *this;
  }

  /// ask for the 50-digit truth of every computed float32/float64 matrix (io/page_truth.hpp's
  /// add_truth computes it, where Boost.Multiprecision is at hand): the page's caller promises
  /// that every matrix without a page_how is an exact input, or marked derived()
  page& with_truth(bool on = true) {
    truth_ = on;
    return *this;
  }
  [[nodiscard]] bool wants_truth() const { return truth_; }
  /// the matrices so far (io/page_truth.hpp adds their truths)
  [[nodiscard]] std::vector<matrix_entry>& entries() { return matrices_; }
  [[nodiscard]] const std::vector<matrix_entry>& entries() const { return matrices_; }

  /// the numbers of all matrices so far
  [[nodiscard]] std::size_t numbers() const {
    std::size_t n = 0;
    for (const auto& m : matrices_) n += m.rows * m.cols;
    return n;
  }

  /// true when the page summarises (numbers() above the limit)
  [[nodiscard]] bool summarised() const { return numbers() > limits_.full_numbers; }

  [[nodiscard]] const page_limits& limits() const { return limits_; }

  /// @brief per matrix (entries()' order): true when the page embeds all of its numbers (every
  /// matrix of a page that is not summarised; on a summarised one, a matrix whose every row the
  /// shown cells' explanations need, such as BERT's (9, 768) ones); a scratch() matrix never
  [[nodiscard]] std::vector<bool> embedded_whole() const {
    const auto need = needs();
    std::vector<bool> whole(matrices_.size());
    for (std::size_t k = 0; k < matrices_.size(); ++k)
      whole[k] = !matrices_[k].scratch && (!summarised() || need.rows[k].size() == matrices_[k].rows);
    return whole;
  }

  /// the whole page
  [[nodiscard]] std::string str() const {
    std::string data = json();
    std::string s;
    s.reserve(data.size() + 40000);
    s += "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta "
         "charset=\"utf-8\"/>\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
         "'unsafe-inline'; "
         "script-src 'unsafe-inline' 'wasm-unsafe-eval'; img-src data: blob:\"/>\n<title>";
    s += xml_escape(title_);
    s += "</title>\n<style>\n";
    s += page_script::css;
    s += "</style>\n</head>\n<body>\n<header><h1>";
    s += xml_escape(title_);
    s += "</h1></header>\n<main id=\"qkv-main\"><noscript><p>This page draws its tables and figures with "
         "JavaScript (inline, no network).</p></noscript></main>\n<div id=\"qkv-tip\" role=\"tooltip\" "
         "hidden=\"hidden\"></div>\n<footer>Written by qkv. Every number on this page was computed by qkv; "
         "every "
         "explanation is computed from these numbers.</footer>\n<script type=\"application/json\" "
         "id=\"qkv-data\">";
    s += data;
    // the script in a CDATA section behind a line comment: HTML runs it as it is, and the page
    // stays well-formed XML (an XML parser reads it, as tests/cli/attend/run_attend.py does)
    s += "</script>\n<script>//<![CDATA[\n";
    // the script without its whole-line comments (2.4 KB of every page; they are for the reader of
    // page_script.hpp, and the script has no multi-line string a line could start inside)
    // (and an editor only on a page that has a module to run, the one its edit object needs: 9 KB
    // each, that the others do without)
    const bool editable = edit_.find("\"module\":") != std::string::npos;
    auto add_script = [&s](std::string_view js) {
      while (!js.empty()) {
        const auto nl = js.find('\n');
        const auto line = js.substr(0, nl == std::string_view::npos ? js.size() : nl + 1);
        js.remove_prefix(line.size());
        const auto first = line.find_first_not_of(' ');
        if (first == std::string_view::npos || line.substr(first, 2) != "//") s += line;
      }
    };
    const std::string_view js = page_script::js;
    const auto at = js.find("// @@edit@@");
    add_script(js.substr(0, at));
    if (editable) {  // the shared part, then the one editor this page's edit object needs
      add_script(page_script::edit_js);
      const bool steps = edit_.find("\"kind\":\"steps\"") != std::string::npos;
      add_script(steps ? page_script::edit_steps_js : page_script::edit_attend_js);
      if (steps && edit_.find("\"exact\":") != std::string::npos)  // an exact page's part of it
        add_script(page_script::edit_exact_js);
    }
    if (at != std::string_view::npos) add_script(js.substr(at));
    s += "//]]>\n</script>\n</body>\n</html>\n";
    return s;
  }

 private:
  struct item {
    std::string kind;  // "text", "matrix", "heatmap"
    std::string text;  // the paragraph, the matrix id, the heatmap title
    std::vector<std::string> ids, names;
    std::vector<bool> mask;
  };
  struct step_entry {
    std::string title, prose;
    std::vector<item> items;
    std::string where;
  };

  std::string title_, intro_, source_file_;
  std::string edit_;                                         // the "edit" object, or empty
  std::string sentence_x_, sentence_table_, sentence_rule_;  // sentence_input(), or empty
  page_limits limits_;
  bool truth_ = false;
  bool pack_ = false;       // pack_numbers()
  bool pack_rows_ = false;  // pack_numbers(true, true)
  std::vector<step_entry> steps_;
  std::vector<matrix_entry> matrices_;
  std::map<std::string, std::size_t> index_;
  std::vector<page_source_step> source_steps_;
  std::vector<page_source_proof> proofs_;

  step_entry& current() {
    if (steps_.empty()) steps_.push_back({"", "", {}, {}});
    return steps_.back();
  }

  // the indices a summarised dimension of n shows: all of them up to whole_side, else the first
  // and last `edge`
  std::vector<std::size_t> shown(std::size_t n) const {
    std::vector<std::size_t> v;
    if (!summarised() || n <= std::max(2 * limits_.edge, limits_.whole_side)) {
      for (std::size_t i = 0; i < n; ++i) v.push_back(i);
    } else {
      for (std::size_t i = 0; i < limits_.edge; ++i) v.push_back(i);
      for (std::size_t i = n - limits_.edge; i < n; ++i) v.push_back(i);
    }
    return v;
  }

  // a slice "weighted_values[1]" of a stack is proven by a static_assert that names the stack,
  // "weighted_values" (issue 28: example 01's slices were not marked proven); "" for other ids
  static std::string_view stack_of(std::string_view id) {
    const auto open = id.find('[');
    return open != std::string_view::npos && open > 0 && id.back() == ']' ? id.substr(0, open)
                                                                          : std::string_view{};
  }

  // what a word of a static_assert must be to name the matrix `id`
  static bool mentions(std::string_view text, std::string_view id) {
    if (id.empty()) return false;
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (std::size_t p = text.find(id); p != std::string_view::npos; p = text.find(id, p + 1)) {
      const bool left = p == 0 || !word(text[p - 1]);
      const bool right = p + id.size() >= text.size() || !word(text[p + id.size()]);
      if (left && right) return true;
    }
    return false;
  }

  // what each matrix must embed: full rows, full columns (summarised pages only)
  struct embed_needs {
    std::vector<std::set<std::size_t>> rows, cols;
  };
  embed_needs needs() const {
    const bool summary = summarised();
    std::vector<std::set<std::size_t>> need_rows(matrices_.size()), need_cols(matrices_.size());
    for (std::size_t k = 0; k < matrices_.size(); ++k) {
      const auto& m = matrices_[k];
      const auto r = shown(m.rows), c = shown(m.cols);
      need_rows[k].insert(r.begin(), r.end());
      if (m.whole)
        for (std::size_t i = 0; i < m.rows; ++i) need_rows[k].insert(i);
      auto operand = [&](const std::string& id) -> long {
        const auto it = index_.find(id);
        return it == index_.end() ? -1 : static_cast<long>(it->second);
      };
      const long a = operand(m.how.a), b = operand(m.how.b);
      // the rows of A the shown cells read: their own rows, or their columns for a transpose
      // (and never past A's last row: an operand may be shorter than the result)
      if (a >= 0)
        for (std::size_t i : m.how.op == "transpose" ? c : r)
          if (i < matrices_[static_cast<std::size_t>(a)].rows)
            need_rows[static_cast<std::size_t>(a)].insert(i);
      if (b >= 0 && m.how.op == "dot") need_rows[static_cast<std::size_t>(b)].insert(c.begin(), c.end());
      if (b >= 0 &&
          (m.how.op == "scale" || m.how.op == "rope"))  // the added terms, the cos table: the same rows
        for (std::size_t i : r)
          if (i < matrices_[static_cast<std::size_t>(b)].rows)
            need_rows[static_cast<std::size_t>(b)].insert(i);
      if (const long sn = operand(m.how.bias); sn >= 0 && m.how.op == "rope")  // the sin table
        for (std::size_t i : r)
          if (i < matrices_[static_cast<std::size_t>(sn)].rows)
            need_rows[static_cast<std::size_t>(sn)].insert(i);
      if (b >= 0 && m.how.op == "matmul")
        for (std::size_t j : c) need_cols[static_cast<std::size_t>(b)].insert(m.how.bc + j);
    }
    for (const auto& st : steps_)
      for (const auto& it : st.items)
        if (it.kind == "heatmap" && (!summary || heatmap_fits(it)))
          for (const auto& id : it.ids) {
            const auto k = index_.at(id);
            for (std::size_t i = 0; i < matrices_[k].rows; ++i) need_rows[k].insert(i);
          }

    return {std::move(need_rows), std::move(need_cols)};
  }

  std::string json() const {
    using namespace page_detail;
    const bool summary = summarised();
    const auto need = needs();
    const auto& need_rows = need.rows;
    const auto& need_cols = need.cols;
    std::string s = "{\"title\":";
    json_string(s, title_);
    s += ",\"intro\":";
    json_string(s, intro_);
    s += ",\"source\":";
    json_string(s, source_file_);
    s += ",\"summarised\":";
    s += summary ? "true" : "false";
    s += ",\"numbers\":" + std::to_string(numbers());
    s += ",\"limits\":{\"full_numbers\":" + std::to_string(limits_.full_numbers) +
         ",\"edge\":" + std::to_string(limits_.edge) +
         ",\"whole_side\":" + std::to_string(limits_.whole_side) +
         ",\"heatmap_side\":" + std::to_string(limits_.heatmap_side) + "}";
    if (!edit_.empty()) s += ",\"edit\":" + edit_;
    if (!sentence_x_.empty()) {
      s += ",\"sentence\":{\"x\":";
      json_string(s, sentence_x_);
      s += ",\"table\":";
      json_string(s, sentence_table_);
      s += ",\"rule\":";
      json_string(s, sentence_rule_);
      s += "}";
    }
    s += ",\"proofs\":[";
    for (std::size_t p = 0; p < proofs_.size(); ++p) {
      s += p ? ",{\"file\":" : "{\"file\":";
      json_string(s, proofs_[p].file);
      s += ",\"line\":" + std::to_string(proofs_[p].line) + ",\"text\":";
      json_string(s, proofs_[p].text);
      s += ",\"comment\":";
      json_string(s, proofs_[p].comment);
      s += "}";
    }
    s += "],\"matrices\":{";
    for (std::size_t k = 0; k < matrices_.size(); ++k) {
      const auto& m = matrices_[k];
      const bool as_float = m.dtype == "float32";
      if (k) s += ",";
      json_string(s, m.id);
      s += ":{\"caption\":";
      json_string(s, m.caption);
      s += ",\"rows\":" + std::to_string(m.rows) + ",\"cols\":" + std::to_string(m.cols) + ",\"dtype\":";
      json_string(s, m.dtype);
      if (m.hidden) s += ",\"hidden\":true";
      if (m.scratch) {  // the module computes its numbers: none embedded (page_recompute.hpp)
        s += ",\"scratch\":true";
        if (!m.how.op.empty()) {
          s += ",\"how\":{\"op\":";
          json_string(s, m.how.op);
          s += ",\"a\":";
          json_string(s, m.how.a);
          s += ",\"b\":";
          json_string(s, m.how.b);
          s += "}";
        }
        s += "}";
        continue;
      }
      auto labels = [&](const char* key, const std::vector<std::string>& l,
                        const std::vector<std::size_t>& keep) {
        if (l.empty()) return;
        s += ",\"";
        s += key;
        s += "\":{";
        bool first = true;
        for (std::size_t q = 0; q < keep.size(); ++q) {
          if (keep[q] >= l.size()) continue;  // (defensive: every index kept is a row or column)
          if (!first) s += ",";
          first = false;
          s += "\"" + std::to_string(keep[q]) + "\":";
          json_string(s, l[keep[q]]);
        }
        s += "}";
      };
      const auto sr = shown(m.rows), sc = shown(m.cols);
      std::vector<std::size_t> rl(need_rows[k].begin(), need_rows[k].end());
      labels("row_labels", m.row_labels, rl);
      std::vector<std::size_t> cl(sc);
      cl.insert(cl.end(), need_cols[k].begin(), need_cols[k].end());
      std::sort(cl.begin(), cl.end());
      cl.erase(std::unique(cl.begin(), cl.end()), cl.end());
      labels("col_labels", m.col_labels, m.col_labels.empty() ? cl : (summary ? cl : shown(m.cols)));
      auto list = [&](const std::vector<std::size_t>& v) {
        s += "[";
        for (std::size_t q = 0; q < v.size(); ++q) s += (q ? "," : "") + std::to_string(v[q]);
        s += "]";
      };
      s += ",\"shown_rows\":";
      list(sr);
      s += ",\"shown_cols\":";
      list(sc);
      const bool full = !summary || (need_rows[k].size() == m.rows);
      auto cell = [&](std::size_t i, std::size_t j) { json_number(s, m.values[i * m.cols + j], as_float); };
      if (full && pack_rows_ && summary && (m.dtype == "float32" || m.dtype == "float64")) {
        s += ",\"b85\":";
        json_b85(s, m.values, as_float);
      } else if (full && pack_ && summary && (m.dtype == "float32" || m.dtype == "float64")) {
        s += ",\"bits\":";
        json_bits(s, m.values, as_float);
      } else if (full) {
        s += ",\"data\":[";
        for (std::size_t i = 0; i < m.rows; ++i)
          for (std::size_t j = 0; j < m.cols; ++j) {
            if (i || j) s += ",";
            cell(i, j);
          }
        s += "]";
      } else if (pack_rows_ && summary && (m.dtype == "float32" || m.dtype == "float64")) {
        // the embedded rows and columns as bits too (pack_numbers' `rows`)
        std::vector<double> v;
        for (std::size_t i : rl)
          v.insert(v.end(), m.values.begin() + i * m.cols, m.values.begin() + (i + 1) * m.cols);
        s += ",\"row_index\":";
        list(rl);
        s += ",\"row_b85\":";
        json_b85(s, v, as_float);
        v.clear();
        std::vector<std::size_t> cols(need_cols[k].begin(), need_cols[k].end());
        for (std::size_t j : cols)
          for (std::size_t i = 0; i < m.rows; ++i) v.push_back(m.values[i * m.cols + j]);
        s += ",\"col_index\":";
        list(cols);
        s += ",\"col_b85\":";
        json_b85(s, v, as_float);
      } else {
        s += ",\"row_index\":";
        list(rl);
        s += ",\"row_data\":[";
        bool first = true;
        for (std::size_t i : rl)
          for (std::size_t j = 0; j < m.cols; ++j) {
            if (!first) s += ",";
            first = false;
            cell(i, j);
          }
        s += "]";
        std::vector<std::size_t> cols(need_cols[k].begin(), need_cols[k].end());
        s += ",\"col_index\":";
        list(cols);
        s += ",\"col_data\":[";
        first = true;
        for (std::size_t j : cols)
          for (std::size_t i = 0; i < m.rows; ++i) {
            if (!first) s += ",";
            first = false;
            cell(i, j);
          }
        s += "]";
      }
      if (!m.exact.empty()) {
        s += ",\"exact\":{";
        bool first = true;
        for (std::size_t i : sr)
          for (std::size_t j : sc) {
            if (!first) s += ",";
            first = false;
            s += "\"" + std::to_string(i) + "," + std::to_string(j) + "\":";
            json_string(s, m.exact[i * m.cols + j]);
          }
        s += "}";
      }
      if (!m.expected.empty()) {
        s += ",\"expected\":{\"name\":";
        json_string(s, m.expected_name);
        s += ",\"tolerance\":";
        json_number(s, m.tolerance, false);
        s += ",\"tolerance_text\":";
        json_string(s, m.tolerance_text);
        s += ",\"values\":{";
        bool first = true;
        for (std::size_t i : sr)
          for (std::size_t j : sc) {
            if (!first) s += ",";
            first = false;
            s += "\"" + std::to_string(i) + "," + std::to_string(j) + "\":";
            json_number(s, m.expected[i * m.cols + j], false);
          }
        s += "}}";
      }
      if (!m.truth_ulps.empty()) {
        s += ",\"truth\":{\"name\":";
        json_string(s, m.truth_name);
        s += ",\"ulps\":{";
        bool first = true;
        for (std::size_t i : sr)
          for (std::size_t j : sc) {
            if (!first) s += ",";
            first = false;
            s += "\"" + std::to_string(i) + "," + std::to_string(j) + "\":";
            if (std::isfinite(m.truth_ulps[i * m.cols + j])) {
              char buf[40];
              std::snprintf(buf, sizeof buf, "%.6g", m.truth_ulps[i * m.cols + j]);  // 6 digits of an error
              s += buf;
            } else {
              json_number(s, m.truth_ulps[i * m.cols + j], false);
            }
            if (!m.truth_text.empty()) {
              s += ",\"" + std::to_string(i) + "," + std::to_string(j) + "t\":";
              json_string(s, m.truth_text[i * m.cols + j]);
            }
          }
        s += "}}";
      }
      // the static_asserts that name this matrix
      std::vector<std::size_t> pr;
      for (std::size_t p = 0; p < proofs_.size(); ++p)
        if (mentions(proofs_[p].text, m.id) || mentions(proofs_[p].text, stack_of(m.id))) pr.push_back(p);
      if (!pr.empty()) {
        s += ",\"proofs\":";
        list(pr);
      }
      if (!m.how.op.empty()) {
        s += ",\"how\":{\"op\":";
        json_string(s, m.how.op);
        s += ",\"a\":";
        json_string(s, m.how.a);
        s += ",\"b\":";
        json_string(s, m.how.b);
        s += ",\"bias\":";
        json_string(s, m.how.bias);
        s += ",\"n\":" + std::to_string(m.how.n) + ",\"ac\":" + std::to_string(m.how.ac) +
             ",\"br\":" + std::to_string(m.how.br) + ",\"bc\":" + std::to_string(m.how.bc) + ",\"scale\":";
        json_number(s, m.how.scale, false);
        if (m.how.divisor != 0) {
          s += ",\"divisor\":";
          json_number(s, m.how.divisor, false);
        }
        s += ",\"note\":";
        json_string(s, m.how.note);
        s += ",\"mask\":";
        json_string(s, m.how.mask);
        s += "}";
      }
      s += "}";
    }
    s += "},\"steps\":[";
    for (std::size_t q = 0; q < steps_.size(); ++q) {
      const auto& st = steps_[q];
      s += q ? ",{\"title\":" : "{\"title\":";
      json_string(s, st.title);
      s += ",\"prose\":";
      json_string(s, st.prose);
      s += ",\"where\":";
      json_string(s, st.where);
      s += ",\"items\":[";
      for (std::size_t r = 0; r < st.items.size(); ++r) {
        const auto& it = st.items[r];
        s += r ? ",{\"kind\":" : "{\"kind\":";
        json_string(s, it.kind);
        s += ",\"text\":";
        json_string(s, it.text);
        if (it.kind == "heatmap") heatmap_json(s, it, summary && !heatmap_fits(it));
        s += "}";
      }
      s += "]}";
    }
    s += "]}";
    return s;
  }

  // a heatmap no larger than heatmap_side in either dimension is drawn cell by cell even on a
  // summarised page (its matrices are then embedded whole: BERT's 9 x 9 heads)
  bool heatmap_fits(const item& it) const {
    const auto& first = matrices_[index_.at(it.ids[0])];
    return first.rows <= limits_.heatmap_side && first.cols <= limits_.heatmap_side;
  }

  // a heatmap: head names and matrix ids; summarised, the block means and maxima per head
  void heatmap_json(std::string& s, const item& it, bool summary) const {
    using namespace page_detail;
    const auto& first = matrices_[index_.at(it.ids[0])];
    const std::size_t R = first.rows, C = first.cols, side = std::max<std::size_t>(1, limits_.heatmap_side);
    s += ",\"ids\":[";
    for (std::size_t h = 0; h < it.ids.size(); ++h) {
      if (h) s += ",";
      json_string(s, it.ids[h]);
    }
    s += "],\"names\":[";
    for (std::size_t h = 0; h < it.names.size(); ++h) {
      if (h) s += ",";
      json_string(s, it.names[h]);
    }
    s += "]";
    const std::size_t fr = summary ? (R + side - 1) / side : 1, fc = summary ? (C + side - 1) / side : 1;
    const std::size_t br = (R + fr - 1) / fr, bc = (C + fc - 1) / fc;
    s += ",\"block\":[" + std::to_string(fr) + "," + std::to_string(fc) + "]";
    s += ",\"grid\":[" + std::to_string(br) + "," + std::to_string(bc) + "]";
    auto masked = [&](std::size_t i, std::size_t j) { return !it.mask.empty() && it.mask[i * C + j]; };
    // the mask, one character per block: 0 none, 1 every cell masked, 2 some
    if (!it.mask.empty()) {
      s += ",\"mask\":\"";
      for (std::size_t bi = 0; bi < br; ++bi)
        for (std::size_t bj = 0; bj < bc; ++bj) {
          std::size_t n = 0, k = 0;
          for (std::size_t i = bi * fr; i < std::min(R, (bi + 1) * fr); ++i)
            for (std::size_t j = bj * fc; j < std::min(C, (bj + 1) * fc); ++j, ++n) k += masked(i, j);
          s += k == 0 ? '0' : (k == n ? '1' : '2');
        }
      s += "\"";
    }
    if (!summary) return;
    // downsampled: the mean of each block, per head, in 2 significant digits (the colours; the
    // exact values are in the tables)
    s += ",\"blocks\":[";
    for (std::size_t h = 0; h < it.ids.size(); ++h) {
      const auto& m = matrices_[index_.at(it.ids[h])];
      s += h ? ",{\"mean\":[" : "{\"mean\":[";
      if (pack_rows_) {  // pack_numbers' `rows`: none, the page's module computes them
        s += "]}";
        continue;
      }
      for (std::size_t bi = 0; bi < br; ++bi)
        for (std::size_t bj = 0; bj < bc; ++bj) {
          double sum = 0;
          std::size_t n = 0;
          for (std::size_t i = bi * fr; i < std::min(R, (bi + 1) * fr); ++i)
            for (std::size_t j = bj * fc; j < std::min(C, (bj + 1) * fc); ++j, ++n)
              sum += m.values[i * C + j];
          if (bi || bj) s += ",";
          json_short(s, n ? sum / static_cast<double>(n) : 0.0);
        }
      s += "]}";
    }
    s += "]";
    // block labels: the first and last row label of each block
    auto block_labels = [&](const char* key, const std::vector<std::string>& l, std::size_t n, std::size_t f,
                            std::size_t count) {
      s += ",\"";
      s += key;
      s += "\":[";
      for (std::size_t b = 0; b < count; ++b) {
        const std::size_t lo = b * f, hi = std::min(n, (b + 1) * f) - 1;
        std::string t = l.empty() ? std::to_string(lo + 1) : l[lo];
        if (hi != lo) t += "\u2013" + (l.empty() ? std::to_string(hi + 1) : l[hi]);
        if (b) s += ",";
        json_string(s, t);
      }
      s += "]";
    };
    block_labels("block_rows", first.row_labels, R, fr, br);
    block_labels("block_cols", first.col_labels, C, fc, bc);
  }
};

}  // namespace qkv::io
