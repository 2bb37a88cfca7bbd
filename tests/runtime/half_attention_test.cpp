// multihead attention() of bfloat16 and float16 inputs (multihead.hpp, "16-bit inputs"): the
// float attention() of the widened inputs, bit for bit, on both paths and with chapter two's
// options; the conversions themselves are checked against PyTorch's .to() in decoder_torch_test.cpp.
#include <doctest/doctest.h>

#include <cstring>
#include <optional>
#include <vector>

#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using qkv::testing::same_bits;
using rt::dynamic_matrix;

namespace {

template <class S>
dynamic_matrix<S> narrowed(const dynamic_matrix<float>& m) {
  dynamic_matrix<S> out(m.rows(), m.cols());
  for (std::size_t k = 0; k < m.size(); ++k) out.data()[k] = S(m.data()[k]);
  return out;
}
template <class S>
dynamic_matrix<float> widened(const dynamic_matrix<S>& m) {  // element by element, as a user would
  dynamic_matrix<float> out(m.rows(), m.cols());
  for (std::size_t k = 0; k < m.size(); ++k) out.data()[k] = static_cast<float>(m.data()[k]);
  return out;
}
template <class S>
rt::linear_weights<S> narrowed(const rt::linear_weights<float>& w) {
  rt::linear_weights<S> out{narrowed<S>(w.weight), {}, w.layout};
  for (float b : w.bias) out.bias.push_back(S(b));
  return out;
}
template <class S>
rt::linear_weights<float> widened(const rt::linear_weights<S>& w) {
  rt::linear_weights<float> out{widened(w.weight), {}, w.layout};
  for (S b : w.bias) out.bias.push_back(static_cast<float>(b));
  return out;
}

bool same_result(const rt::multihead_result<float>& a, const rt::multihead_result<float>& b) {
  bool same = same_bits(a.queries, b.queries) && same_bits(a.keys, b.keys) && same_bits(a.values, b.values) &&
              same_bits(a.concat, b.concat) && same_bits(a.output, b.output) && a.scale == b.scale &&
              a.weights.size() == b.weights.size();
  for (std::size_t h = 0; same && h < a.weights.size(); ++h)
    same = same_bits(a.weights[h], b.weights[h]) && same_bits(a.scores[h], b.scores[h]);
  return same;
}

}  // namespace

TEST_CASE_TEMPLATE(
    "attention() of bfloat16 / float16 inputs is the float attention() of their values, bit for bit", S,
    rt::bfloat16, rt::float16) {
  // Why bit for bit: every bfloat16 and float16 number is exactly a float, so widening changes
  // no value, and the 16-bit overload then runs the float overload on those floats: the same
  // operations on the same operands. Float32 accumulation is the float path's own.
  // 8 query heads of 8 on 2 key/value heads, d_model 24, 40 queries over a 33-row context and
  // self-attention of 300 tokens (three key blocks); with causal lower_right, window, ALiBi and RoPE
  const std::size_t H = 8, HK = 2, dh = 8, dm = 24;
  rt::attention_weights<S> w;
  w.q = narrowed<S>(
      rt::linear_weights<float>{random_matrix<float>(H * dh, dm, 91, 0.3), std::vector<float>(H * dh, 0.1f)});
  w.k = narrowed<S>(rt::linear_weights<float>{random_matrix<float>(HK * dh, dm, 92, 0.3), {}});
  w.v = narrowed<S>(rt::linear_weights<float>{random_matrix<float>(HK * dh, dm, 93, 0.3),
                                              std::vector<float>(HK * dh, -0.2f)});
  w.o = narrowed<S>(rt::linear_weights<float>{random_matrix<float>(dm, H * dh, 94, 0.3), {}});
  rt::attention_weights<float> wf{widened(w.q), widened(w.k), widened(w.v), widened(*w.o)};
  const auto x = narrowed<S>(random_matrix<float>(40, dm, 95)),
             c = narrowed<S>(random_matrix<float>(33, dm, 96));
  const auto long_x = narrowed<S>(random_matrix<float>(300, dm, 97));
  for (const bool keep : {true, false})
    for (const bool decoder : {false, true}) {
      CAPTURE(keep);
      CAPTURE(decoder);
      rt::attention_options<float> opt;
      opt.heads = H;
      opt.kv_heads = HK;
      opt.keep_weights = keep;
      if (decoder) {
        opt.causal = true;
        opt.alignment = rt::causal_alignment::lower_right;
        opt.window = 17;
        opt.alibi = true;
        opt.rope = rt::rope_options{};
      }
      CHECK(same_result(rt::attention(x, c, w, opt), rt::attention(widened(x), widened(c), wf, opt)));
      CHECK(same_result(rt::self_attention(long_x, w, opt), rt::self_attention(widened(long_x), wf, opt)));
    }
  // without options: the 16-bit overload (one head), not the float template with T = S
  const rt::attention_weights<S> one{w.q, w.q, w.q, std::nullopt};
  const rt::attention_weights<float> one_f{wf.q, wf.q, wf.q, std::nullopt};
  const rt::multihead_result<float> r = rt::self_attention(x, one);
  CHECK(same_result(r, rt::self_attention(widened(x), one_f)));
  CHECK(same_result(rt::attention(x, c, one), rt::attention(widened(x), widened(c), one_f)));
}

TEST_CASE("16-bit attention() keeps the float path's shape errors, naming both shapes") {
  rt::attention_weights<rt::bfloat16> w;
  w.q = narrowed<rt::bfloat16>(rt::linear_weights<float>{random_matrix<float>(8, 6, 1), {}});
  w.k = w.q;
  w.v = w.q;
  const auto x = narrowed<rt::bfloat16>(random_matrix<float>(3, 5, 2));  // 5 columns, the weights take 6
  CHECK_THROWS_AS((void)rt::self_attention(x, w), rt::shape_error);
}
