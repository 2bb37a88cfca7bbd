// NaN and infinity in attention: one policy on every path (docs/numerics.md, "NaN and infinity
// in attention"). Each case runs the runtime's materialised path (keep_weights), its streaming
// path (tiled, and the few-keys case when S <= 32), with 1 and 2 threads, at T = 20, 40, 300
// and 512 (one query block, one key block, three key blocks, two streaming query blocks), and
// the core (constexpr code, run here at run time; tests/static/nonfinite_test.cpp proves what
// both compilers accept in a constant expression). Expected values are the policy's, derived
// per row from which keys a query sees; a row that cannot see the poisoned key must keep the
// bits of the run without it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <qkv/core/attention.hpp>
#include <qkv/core/encoder.hpp>
#include <qkv/core/softmax.hpp>
#include <qkv/runtime/encoder.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using rt::dynamic_matrix;

namespace {

const float nan_f = std::numeric_limits<float>::quiet_NaN();
const float inf_f = std::numeric_limits<float>::infinity();

/// one attention run: which path and how many threads
struct run_kind {
  bool keep_weights;
  std::size_t threads;
  [[nodiscard]] std::string name() const {
    return std::string(keep_weights ? "materialised" : "streaming") + ", " + std::to_string(threads) +
           " thread(s)";
  }
};
const run_kind all_runs[] = {{true, 1}, {true, 2}, {false, 1}, {false, 2}};

bool row_all_nan(const dynamic_matrix<float>& m, std::size_t i) {
  for (std::size_t c = 0; c < m.cols(); ++c)
    if (!std::isnan(m(i, c))) return false;
  return true;
}

bool row_equal_bits(const dynamic_matrix<float>& a, const dynamic_matrix<float>& b, std::size_t i) {
  for (std::size_t c = 0; c < a.cols(); ++c)
    if (!(a(i, c) == b(i, c)) && !(std::isnan(a(i, c)) && std::isnan(b(i, c)))) return false;
  return true;
}

/// per element: 0 finite, 1 NaN, 2 +inf, 3 -inf
std::vector<int> classes(const dynamic_matrix<float>& m) {
  std::vector<int> out(m.size());
  for (std::size_t k = 0; k < m.size(); ++k) {
    const float x = m.data()[k];
    out[k] = std::isnan(x) ? 1 : x == inf_f ? 2 : x == -inf_f ? 3 : 0;
  }
  return out;
}

rt::attention_weights<float> random_weights(std::size_t d, unsigned seed) {
  rt::attention_weights<float> w;
  unsigned s = seed;
  for (auto* l : {&w.q, &w.k, &w.v}) {
    l->weight = random_matrix<float>(d, d, s++, 0.3);
    l->bias.assign(d, 0.01f);
  }
  w.o = rt::linear_weights<float>{random_matrix<float>(d, d, s++, 0.3), std::vector<float>(d, 0.02f)};
  return w;
}

/// how the keys are masked in a case
enum class masking { none, causal, padding };

/// may query i see key j?
bool sees(masking m, std::size_t i, std::size_t j, std::size_t padded) {
  if (m == masking::causal) return j <= i;
  if (m == masking::padding) return j != padded;
  return true;
}

dynamic_matrix<float> multihead(const dynamic_matrix<float>& x, const rt::attention_weights<float>& w,
                                masking m, std::size_t padded, run_kind run) {
  rt::attention_options<float> opt;
  opt.heads = 2;
  opt.keep_weights = run.keep_weights;
  opt.causal = m == masking::causal;
  if (m == masking::padding) {
    rt::mask_matrix allowed(x.rows(), x.rows(), 1);
    for (std::size_t i = 0; i < x.rows(); ++i) allowed(i, padded) = 0;
    opt.allowed = allowed;
  }
  rt::thread_pool pool(run.threads);
  return rt::attention(x, x, w, opt, &pool).output;
}

}  // namespace

TEST_CASE("a NaN token poisons exactly the queries that see it, on every path, tile size and thread count") {
  const std::size_t d = 16;
  const auto w = random_weights(d, 100);
  for (const std::size_t T : {20u, 40u, 300u, 512u}) {
    const auto x = random_matrix<float>(T, d, unsigned(T));
    // token 1 (the case), and a late one (a future key for most queries)
    for (const std::size_t t : {std::size_t(1), T - 3}) {
      for (const float bad : {nan_f, inf_f, -inf_f}) {
        auto xb = x;
        for (std::size_t c = 0; c < d; ++c) xb(t, c) = bad;
        for (const masking m : {masking::none, masking::causal, masking::padding}) {
          std::vector<int> first_classes;
          for (const run_kind run : all_runs) {
            CAPTURE(T);
            CAPTURE(t);
            CAPTURE(bad);
            CAPTURE(int(m));
            CAPTURE(run.name());
            const auto clean = multihead(x, w, m, t, run);
            const auto out = multihead(xb, w, m, t, run);
            std::size_t poisoned = 0, kept = 0;
            for (std::size_t i = 0; i < T; ++i) {
              CAPTURE(i);
              if (i == t || sees(m, i, t, t)) {
                // its query is bad, or it sees the bad key: q k, with inf times weights of both
                // signs, is NaN; the policy makes the row NaN
                CHECK(row_all_nan(out, i));
                ++poisoned;
              } else {
                // it cannot see the bad key: the bits of the clean run
                CHECK(row_equal_bits(out, clean, i));
                ++kept;
              }
            }
            CHECK(poisoned + kept == T);
            // every path and thread count: the same NaN/inf pattern
            if (first_classes.empty())
              first_classes = classes(out);
            else
              CHECK(classes(out) == first_classes);
          }
        }
      }
    }
  }
}

namespace {

/// one head through scaled_dot_product_attention: materialised or streaming, 1 or 2 threads
dynamic_matrix<float> one_head(const dynamic_matrix<float>& q, const dynamic_matrix<float>& k,
                               const dynamic_matrix<float>& v, bool causal, run_kind run,
                               dynamic_matrix<float>* weights_out = nullptr) {
  const std::size_t T = q.rows(), S = k.rows();
  dynamic_matrix<float> out(T, v.cols()), scores(T, S), weights(T, S);
  auto sv = scores.view();
  auto wv = weights.view();
  rt::thread_pool pool(run.threads);
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), 0.25f, {causal, nullptr},
                                          run.keep_weights ? &sv : nullptr, run.keep_weights ? &wv : nullptr,
                                          &pool);
  if (weights_out) *weights_out = weights;
  return out;
}

}  // namespace

TEST_CASE("a NaN or inf value reaches exactly the output elements of the queries that attend to it") {
  for (const std::size_t S : {20u, 40u, 300u, 512u}) {
    CAPTURE(S);
    const std::size_t d = 8, dv = 8;
    const auto q = random_matrix<float>(S, d, 7), k = random_matrix<float>(S, d, 8);
    const auto v = random_matrix<float>(S, dv, 9);
    const std::size_t j = S / 2;  // the key with bad values
    auto vb = v, vz = v;
    vb(j, 2) = nan_f;
    vb(j, 5) = inf_f;
    vb(j, 6) = -inf_f;
    vb(j + 1, 6) = inf_f;  // +inf meets -inf in column 6 for queries seeing both keys
    vz(j, 2) = vz(j, 5) = vz(j, 6) = vz(j + 1, 6) = 0;  // what the kernels compute with
    for (const bool causal : {false, true}) {
      std::vector<int> first_classes;
      for (const run_kind run : all_runs) {
        CAPTURE(causal);
        CAPTURE(run.name());
        const auto out = one_head(q, k, vb, causal, run), ref = one_head(q, k, vz, causal, run);
        for (std::size_t i = 0; i < S; ++i) {
          const bool sees_j = !causal || j <= i, sees_j1 = !causal || j + 1 <= i;
          for (std::size_t c = 0; c < dv; ++c) {
            const float o = out(i, c);
            if (sees_j && c == 2)
              CHECK(std::isnan(o));
            else if (sees_j && c == 5)
              CHECK(o == inf_f);
            else if (c == 6 && sees_j && sees_j1)
              CHECK(std::isnan(o));
            else if (c == 6 && sees_j)
              CHECK(o == -inf_f);
            else if (c == 6 && sees_j1)
              CHECK(o == inf_f);  // (never: causal sees j first)
            else
              CHECK(o == ref(i, c));  // the clean run's bits: a skipped value is never 0 * inf
          }
        }
        if (first_classes.empty())
          first_classes = classes(out);
        else
          CHECK(classes(out) == first_classes);
      }
    }
  }
}

TEST_CASE("a value whose weight underflows to 0 still reaches the output: 0 * NaN is not a skip") {
  // query 0 scores key 1 about 200 below key 0: e^-200 is 0 in float, so the materialised
  // weight is 0, while the streaming path may meet key 1 first; the policy follows the score
  // (finite: the key is attended), so both paths give NaN and +inf
  dynamic_matrix<float> q{{1.0f, 0.0f}}, k{{800.0f, 0.0f}, {0.0f, 1.0f}};
  dynamic_matrix<float> v{{1.0f, 2.0f}, {nan_f, inf_f}};
  for (const run_kind run : all_runs) {
    CAPTURE(run.name());
    dynamic_matrix<float> weights;
    const auto out = one_head(q, k, v, false, run, &weights);
    CHECK(std::isnan(out(0, 0)));
    CHECK(out(0, 1) == inf_f);
    if (run.keep_weights) CHECK(weights(0, 1) == 0.0f);
  }
}

TEST_CASE("a -inf score is masked-like: weight 0 and its value skipped; a +inf score makes the row NaN") {
  // scale 0.25: key 1's score is 0.25 * (1 * -inf) = -inf for query 0, +inf for query 1
  dynamic_matrix<float> q{{1.0f, 0.0f}, {-1.0f, 0.0f}, {0.0f, 1.0f}};
  dynamic_matrix<float> k{{1.0f, 0.0f}, {-inf_f, 0.0f}, {0.0f, 2.0f}};
  dynamic_matrix<float> v{{1.0f, 2.0f}, {nan_f, -inf_f}, {3.0f, 4.0f}};
  for (const run_kind run : all_runs) {
    CAPTURE(run.name());
    dynamic_matrix<float> weights;
    const auto out = one_head(q, k, v, false, run, &weights);
    // query 0: key 1 skipped; softmax over keys 0 and 2 (scores 0.25 and 0): finite
    CHECK(std::isfinite(out(0, 0)));
    CHECK(std::isfinite(out(0, 1)));
    // query 1: +inf score: NaN row
    CHECK(std::isnan(out(1, 0)));
    CHECK(std::isnan(out(1, 1)));
    // query 2: 0 * -inf = NaN in the score of key 1 (fma(0, -inf, 0)): NaN row
    CHECK(std::isnan(out(2, 0)));
    if (run.keep_weights) {
      CHECK(weights(0, 1) == 0.0f);
      CHECK(std::isnan(weights(1, 0)));
    }
  }
  // the same numbers with key 1 masked out give query 0 the same bits
  dynamic_matrix<float> q0{{1.0f, 0.0f}}, k2{{1.0f, 0.0f}, {0.0f, 2.0f}}, v2{{1.0f, 2.0f}, {3.0f, 4.0f}};
  for (const run_kind run : all_runs) {
    const auto a = one_head(q, k, v, false, run), b = one_head(q0, k2, v2, false, run);
    CHECK(a(0, 0) == b(0, 0));
    CHECK(a(0, 1) == b(0, 1));
  }
}

TEST_CASE("the runtime row softmax: NaN or +inf gives a NaN row wherever it sits, -inf gives weight 0") {
  for (const std::size_t n : {1u, 5u, 8u, 13u, 40u}) {
    for (std::size_t at = 0; at < n; ++at) {
      CAPTURE(n);
      CAPTURE(at);
      for (const float bad : {nan_f, inf_f}) {
        std::vector<float> row(n, 1.0f);
        row[at] = bad;
        rt::softmax_row(row.data(), n);
        for (const float x : row) CHECK(std::isnan(x));
      }
      std::vector<float> row(n, 1.0f);
      row[at] = -inf_f;
      rt::softmax_row(row.data(), n);
      CHECK(row[at] == 0.0f);
      if (n > 1) CHECK(row[(at + 1) % n] == doctest::Approx(1.0 / double(n - 1)));
    }
  }
}

TEST_CASE("the core follows the same policy: NaN rows where the runtime has them, masked keys skipped") {
  // 6 tokens, token 4 NaN, causal: queries 0..3 cannot see it
  constexpr std::size_t N = 6, D = 4;
  qkv::matrix<float, N, D> x{};
  const auto xr = random_matrix<float>(N, D, 3), wr = random_matrix<float>(3 * D, D, 4, 0.4);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < D; ++c) x.v[i * D + c] = xr(i, c);
  qkv::matrix<float, D, D> w3[3];
  for (std::size_t p = 0; p < 3; ++p)
    for (std::size_t k = 0; k < D * D; ++k) w3[p].v[k] = wr.data()[p * D * D + k];
  qkv::attention_options<float> o;
  o.causal = true;
  const auto clean = qkv::self_attention(x, w3[0], w3[1], w3[2], qkv::out_in, o);
  auto xb = x;
  for (std::size_t c = 0; c < D; ++c) xb.v[4 * D + c] = nan_f;
  const auto r = qkv::self_attention(xb, w3[0], w3[1], w3[2], qkv::out_in, o);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < D; ++c) {
      CAPTURE(i);
      if (i < 4)
        CHECK(r.context.v[i * D + c] == clean.context.v[i * D + c]);  // the future NaN never reaches it
      else
        CHECK(std::isnan(r.context.v[i * D + c]));
    }
  // and the plain product (context()) is what the issue saw: 0 * NaN poisons every row
  const auto plain = qkv::context(r.weights, r.values);
  CHECK(std::isnan(plain.v[0]));
}

TEST_CASE(
    "the encoder, runtime and core: a padded NaN token changes no other row, with or without kept weights") {
  constexpr std::size_t N = 40, D = 8, H = 2, F = 16;
  qkv::encoder_layer_parameters<float, D, H, F> p;
  unsigned seed = 50;
  const auto fill = [&](auto& m, double sigma) {
    const auto r = random_matrix<float>(1, m.size(), seed++, sigma);
    for (std::size_t k = 0; k < m.size(); ++k) m.v[k] = r.data()[k];
  };
  fill(p.in_proj_weight, 0.3);
  fill(p.in_proj_bias, 0.1);
  fill(p.out_proj_weight, 0.3);
  fill(p.linear1_weight, 0.3);
  fill(p.linear2_weight, 0.3);
  const auto w = rt::to_runtime(p);
  const auto xr = random_matrix<float>(N, D, 60);
  qkv::matrix<float, N, D> x;
  for (std::size_t k = 0; k < N * D; ++k) x.v[k] = xr.data()[k];
  const std::size_t t = 1;
  auto xb = x;
  for (std::size_t c = 0; c < D; ++c) xb.v[t * D + c] = nan_f;
  qkv::matrix<bool, 1, N> padding{};
  padding.v[t] = true;
  for (const bool norm_first : {false, true}) {
    qkv::encoder_options<float> o;
    o.norm_first = norm_first;
    const auto core_clean = qkv::encoder_layer(x, p, o, padding),
               core = qkv::encoder_layer(xb, p, o, padding);
    const auto c = rt::to_runtime_options(p, o);
    for (const run_kind run : all_runs) {
      CAPTURE(norm_first);
      CAPTURE(run.name());
      rt::encoder_run_options ro;
      ro.key_padding = std::vector<unsigned char>(N, 0);
      (*ro.key_padding)[t] = 1;
      ro.keep_weights = run.keep_weights;
      rt::thread_pool pool(run.threads);
      rt::encoder_layer_result<float> tr, tr_clean;
      rt::encoder_layer(rt::to_dynamic(xb), w, c, ro, tr, &pool);
      rt::encoder_layer(rt::to_dynamic(x), w, c, ro, tr_clean, &pool);
      for (std::size_t i = 0; i < N; ++i) {
        CAPTURE(i);
        if (i == t) {
          CHECK(row_all_nan(tr.output, i));
          for (std::size_t k = 0; k < D; ++k) CHECK(std::isnan(core.v[i * D + k]));
        } else {
          CHECK(row_equal_bits(tr.output, tr_clean.output, i));
          for (std::size_t k = 0; k < D; ++k) CHECK(core.v[i * D + k] == core_clean.v[i * D + k]);
        }
      }
    }
  }
}

TEST_CASE(
    "key_padding: a padded NaN token gives the allowed mask's bits and changes no other row, every path and "
    "size") {
  // attention_options::key_padding (S flags) against the (T, S) allowed matrix it stands for, at
  // T = 20 (the few-keys case is not used: S > 32 but for T = 20), 40, 300 and 512; the padded
  // token's own query row is NaN (its query is NaN), every other row keeps the clean run's bits
  const std::size_t d = 16;
  const auto w = random_weights(d, 500);
  for (std::size_t T : {20, 40, 300, 512}) {
    const auto clean = random_matrix<float>(T, d, 510 + unsigned(T));
    auto x = clean;
    const std::size_t padded = T / 2;
    for (std::size_t c = 0; c < d; ++c) x(padded, c) = nan_f;
    for (const run_kind run : all_runs) {
      CAPTURE(T);
      CAPTURE(run.name());
      rt::attention_options<float> opt;
      opt.heads = 2;
      opt.keep_weights = run.keep_weights;
      opt.key_padding = std::vector<unsigned char>(T, 0);
      (*opt.key_padding)[padded] = 1;
      rt::thread_pool pool(run.threads);
      const auto r = rt::attention(x, x, w, opt, &pool).output;
      const auto r_clean = rt::attention(clean, clean, w, opt, &pool).output;
      const auto by_allowed = multihead(x, w, masking::padding, padded, run);
      for (std::size_t i = 0; i < T; ++i) {
        CAPTURE(i);
        CHECK(row_equal_bits(r, by_allowed, i));
        if (i == padded)
          CHECK(row_all_nan(r, i));
        else
          CHECK(row_equal_bits(r, r_clean, i));
      }
    }
  }
}

TEST_CASE("a NaN weight poisons every row that attends to anything; a fully masked row stays 0") {
  const std::size_t T = 40, d = 16;
  auto w = random_weights(d, 200);
  w.q.weight(3, 5) = nan_f;  // one query feature NaN for every token: every score of head 0 NaN
  const auto x = random_matrix<float>(T, d, 201);
  rt::mask_matrix allowed(T, T, 1);
  for (std::size_t j = 0; j < T; ++j) allowed.data()[7 * T + j] = 0;  // query 7 sees nothing
  for (const run_kind run : all_runs) {
    CAPTURE(run.name());
    rt::attention_options<float> opt;
    opt.heads = 2;
    opt.keep_weights = run.keep_weights;
    opt.allowed = allowed;
    rt::thread_pool pool(run.threads);
    const auto r = rt::attention(x, x, w, opt, &pool);
    for (std::size_t i = 0; i < T; ++i) {
      CAPTURE(i);
      for (std::size_t c = 0; c < d / 2; ++c) {  // head 0's columns of concat
        if (i == 7)
          CHECK(r.concat(i, c) == 0.0f);
        else
          CHECK(std::isnan(r.concat(i, c)));
      }
      for (std::size_t c = d / 2; c < d; ++c)
        CHECK((i == 7 ? r.concat(i, c) == 0.0f : std::isfinite(r.concat(i, c))));
    }
  }
}
