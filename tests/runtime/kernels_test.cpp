// The runtime path's building blocks: dynamic matrices and their conversions, the packed matrix
// product (against a plain fma chain, bit for bit), its epilogue, the thread pool, the row softmax.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <qkv/core/matrix.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using rt::dynamic_matrix;

namespace {

/// the summation order gemm.hpp promises: acc = fma(a(i,k), b(k,j), acc), k = 0 .. K-1, from 0
/// (a multiply and an add when the target has no FMA: rt::fmadd is the same either way)
template <class T>
dynamic_matrix<T> fma_chain_product(rt::matrix_view<const T> a, rt::matrix_view<const T> b) {
  dynamic_matrix<T> c(a.rows, b.cols);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.cols; ++j) {
      T acc = 0;
      for (std::size_t k = 0; k < a.cols; ++k) acc = rt::fmadd(a(i, k), b(k, j), acc);
      c(i, j) = acc;
    }
  return c;
}

std::string what_of(const std::exception& e) { return e.what(); }

}  // namespace

TEST_CASE("a dynamic matrix converts from and back to qkv::matrix unchanged") {
  constexpr qkv::matrix<float, 2, 3> m{{{1, 2, 3}, {4, 5, 6}}};
  const auto d = rt::to_dynamic(m);
  CHECK(d.rows() == 2);
  CHECK(d.cols() == 3);
  CHECK(d(1, 2) == 6);
  CHECK(reinterpret_cast<std::uintptr_t>(d.data()) % rt::alignment == 0);
  CHECK((d.to_fixed<2, 3>() == m));
  // a shape mismatch names both shapes
  try {
    (void)d.to_fixed<3, 2>();
    FAIL("to_fixed<3, 2> of a 2x3 matrix must throw");
  } catch (const rt::shape_error& e) {
    CHECK(what_of(e).find("2x3") != std::string::npos);
    CHECK(what_of(e).find("3x2") != std::string::npos);
  }
  CHECK_THROWS_AS((dynamic_matrix<float>{{1, 2}, {3}}), rt::shape_error);
}

TEST_CASE_TEMPLATE("the packed product equals a plain fma chain bit for bit, any shape and layout", T, float,
                   double) {
  // shapes around the tile edges (6 rows, 2 registers of columns, 256-deep blocks); 24 x 64 x 263
  // is whole 12 x 32 tiles (AVX-512's assembly kernel) with a last block of 7 = 4 + 3 depths
  const std::size_t shapes[][3] = {{1, 1, 1},     {3, 4, 3},    {6, 16, 7},   {7, 17, 5},
                                   {13, 45, 300}, {50, 9, 513}, {64, 64, 64}, {5, 70, 0},
                                   {20, 33, 70},  {16, 40, 9},  {24, 64, 263}};
  unsigned seed = 1;
  for (const auto& s : shapes) {
    const std::size_t M = s[0], N = s[1], K = s[2];
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    const auto a = random_matrix<T>(M, K, seed++);
    const auto b = random_matrix<T>(K, N, seed++);
    const auto bt = random_matrix<T>(N, K, seed++);  // used as btᵀ
    dynamic_matrix<T> c(M, N);
    rt::matrix_product<T>(a.view(), b.view(), c.view());
    CHECK(c == fma_chain_product<T>(a.view(), b.view()));
    rt::matrix_product<T>(a.view(), transposed(bt.view()), c.view());
    CHECK(c == fma_chain_product<T>(a.view(), transposed(bt.view())));
    // a transposed left operand too: (aᵀ)ᵀ b
    const auto at = copy_of(transposed(a.view()));
    rt::matrix_product<T>(transposed(at.view()), b.view(), c.view());
    CHECK(c == fma_chain_product<T>(a.view(), b.view()));
  }
}

TEST_CASE("the product's epilogue scales, then adds the bias, after the sum") {
  const auto a = random_matrix<float>(9, 40, 11);
  const auto b = random_matrix<float>(40, 21, 12);
  std::vector<float> bias(21);
  for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = 0.25f * float(j) - 2;
  dynamic_matrix<float> c(9, 21);
  rt::epilogue<float> e;
  e.scale = 0.125f;
  e.scaled = true;
  e.bias = bias.data();
  rt::matrix_product<float>(a.view(), b.view(), c.view(), e);
  const auto plain = fma_chain_product<float>(a.view(), b.view());
  for (std::size_t i = 0; i < 9; ++i)
    for (std::size_t j = 0; j < 21; ++j) CHECK(c(i, j) == plain(i, j) * 0.125f + bias[j]);
}

TEST_CASE("a product of shapes that do not fit throws and names both shapes") {
  const dynamic_matrix<float> a(3, 4), b(5, 2);
  try {
    (void)rt::matrix_product(a, b);
    FAIL("must throw");
  } catch (const rt::shape_error& e) {
    CHECK(what_of(e).find("3x4") != std::string::npos);
    CHECK(what_of(e).find("5x2") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS((void)rt::matrix_product_transposed(a, b), doctest::Contains("a is 3x4 and b is 5x2"),
                       rt::shape_error);
}

TEST_CASE("products with 1 and 2 threads are identical bit for bit") {
  const auto a = random_matrix<float>(130, 300, 21);
  const auto w = random_matrix<float>(200, 300, 22);
  rt::thread_pool one(1), two(2);
  dynamic_matrix<float> c1(130, 200), c2(130, 200), c3(130, 200);
  rt::matrix_product<float>(a.view(), transposed(w.view()), c1.view(), {}, &one);
  rt::matrix_product<float>(a.view(), transposed(w.view()), c2.view(), {}, &two);
  rt::matrix_product<float>(a.view(), transposed(w.view()), c3.view(), {}, nullptr);
  CHECK(c1 == c2);
  CHECK(c1 == c3);
  // and a tall, narrow one (split over rows)
  const auto t = random_matrix<double>(500, 64, 23);
  const auto u = random_matrix<double>(64, 8, 24);
  dynamic_matrix<double> d1(500, 8), d2(500, 8);
  rt::matrix_product<double>(t.view(), u.view(), d1.view(), {}, &one);
  rt::matrix_product<double>(t.view(), u.view(), d2.view(), {}, &two);
  CHECK(d1 == d2);
}

TEST_CASE("the pool runs every task once and passes on a task's exception") {
  rt::thread_pool pool(2);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(hits.size(), [&](std::size_t t) { hits[t]++; });
  int wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);
  CHECK_THROWS_WITH(pool.parallel_for(10,
                                      [](std::size_t t) {
                                        if (t == 7) throw std::runtime_error("task 7 failed");
                                      }),
                    "task 7 failed");
  pool.resize(1);
  CHECK(pool.size() == 1);
  // workers started after earlier jobs wait for the next one (they once took a stale job)
  pool.parallel_for(4, [](std::size_t) {});
  pool.resize(2);
  std::atomic<int> count{0};
  pool.parallel_for(100, [&](std::size_t) { count++; });
  CHECK(count.load() == 100);
  pool.resize(1);
  pool.resize(2);
  pool.parallel_for(100, [&](std::size_t) { count++; });
  CHECK(count.load() == 200);
}

TEST_CASE_TEMPLATE("softmax of equal logits is uniform", T, float, double) {
  dynamic_matrix<T> m(3, 5, T(2.5));
  const auto w = rt::softmax_rows(m);
  for (std::size_t k = 0; k < w.size(); ++k) CHECK(w.data()[k] == T(0.2));
}

TEST_CASE("softmax stays finite for huge logits and gives 0 to a row of -inf") {
  const float inf = std::numeric_limits<float>::infinity();
  dynamic_matrix<float> m{{1000, 999, -1000}, {-inf, -inf, -inf}, {-inf, 0, -inf}};
  const auto w = rt::softmax_rows(m);
  // e^0 / (e^0 + e^-1) = 1 / (1 + 0.36788) = 0.7310586; e^-1 / ... = 0.2689414
  CHECK(w(0, 0) == doctest::Approx(0.7310586).epsilon(1e-6));
  CHECK(w(0, 1) == doctest::Approx(0.2689414).epsilon(1e-6));
  CHECK(w(0, 2) == 0.0f);
  CHECK(w(1, 0) == 0.0f);
  CHECK(w(1, 1) == 0.0f);
  CHECK(w(1, 2) == 0.0f);
  CHECK(w(2, 1) == 1.0f);
}

TEST_CASE_TEMPLATE("the row softmax is within its derived bound of a double-precision softmax", T, float,
                   double) {
  // rows of 1 .. 40 entries: every tail length of the vector loop
  for (std::size_t n = 1; n <= 40; ++n) {
    CAPTURE(n);
    const auto x = random_matrix<T>(4, n, unsigned(100 + n), 3.0);
    const auto w = rt::softmax_rows(x);
    for (std::size_t i = 0; i < 4; ++i) {
      double m = -1e300, lo = 1e300, sum = 0;
      for (std::size_t j = 0; j < n; ++j) {
        m = std::max(m, double(x(i, j)));
        lo = std::min(lo, double(x(i, j)));
      }
      for (std::size_t j = 0; j < n; ++j) sum += std::exp(double(x(i, j)) - m);
      // core/bounds.hpp's bound with exact inputs and exp within 2 ulp: (2 (4 + range) + n) u
      const double u = qkv::testing::unit<T>;
      const double rel = 1.01 * (2 * (4 + (m - lo)) + double(n)) * u;
      for (std::size_t j = 0; j < n; ++j) {
        const double exact = std::exp(double(x(i, j)) - m) / sum;
        CHECK(std::abs(double(w(i, j)) - exact) <= rel * exact);
      }
    }
  }
}

TEST_CASE_TEMPLATE("packing a transposed operand gives its panels element by element, any depth and width", T,
                   float, double) {
  // b = wᵀ with w's rows contiguous (attention's k, a column block of a wider matrix like W5's
  // heads): the float panels are transposed 4 x 4 in registers with AVX; every element must land
  // where the definition puts it, depths that are not multiples of 4 and partial panels included
  using blk = rt::detail::gemm_blocking<T>;
  constexpr std::size_t NR = blk::nr;
  const auto wide = random_matrix<T>(3 * NR + 5, 300, 90);
  for (std::size_t kc : {1u, 3u, 4u, 7u, 64u, 255u, 256u})
    for (std::size_t nc : {NR, NR + 5, 2 * NR, 3 * NR + 5})
      for (std::size_t k0 : {0u, 5u}) {
        CAPTURE(kc);
        CAPTURE(nc);
        CAPTURE(k0);
        // columns k0 .. k0 + kc of w's rows 0 .. nc: b(k, n) = w(n, k0 + k)
        const rt::matrix_view<const T> b = transposed(rt::column_block(wide.view(), k0, kc));
        const std::size_t panels = (nc + NR - 1) / NR;
        std::vector<T> packed(panels * NR * kc, T(-1));
        rt::detail::pack_b<T>(b, 0, kc, 0, nc, packed.data());
        bool same = true;
        for (std::size_t q = 0; q < panels; ++q)
          for (std::size_t k = 0; k < kc; ++k)
            for (std::size_t n = 0; n < NR; ++n) {
              const T want = q * NR + n < nc ? wide(q * NR + n, k0 + k) : T(0);
              same = same && packed[q * NR * kc + k * NR + n] == want;
            }
        CHECK(same);
      }
}

TEST_CASE_TEMPLATE("a prepacked operand gives the plain fma chain's bits, with its epilogue, any shape", T,
                   float, double) {
  // few rows (the unpacked-rows case, K <= 256), many rows, depths across the 256-deep blocks,
  // column counts around the panel width; b given as b and as wᵀ
  const std::size_t shapes[][3] = {{1, 1, 1},    {3, 3, 4},     {6, 24, 16},  {6, 28, 16},   {12, 33, 256},
                                   {5, 70, 257}, {13, 45, 300}, {50, 9, 513}, {128, 96, 64}, {24, 64, 263}};
  unsigned seed = 60;
  for (const auto& s : shapes) {
    const std::size_t M = s[0], N = s[1], K = s[2];
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    const auto a = random_matrix<T>(M, K, seed++);
    const auto b = random_matrix<T>(K, N, seed++);
    const auto w = random_matrix<T>(N, K, seed++);
    std::vector<T> bias(N);
    for (std::size_t j = 0; j < N; ++j) bias[j] = T(0.5) * T(j) - 3;
    const rt::packed_operand<T> pb(b.view()), pw(transposed(w.view()));
    CHECK(pb.rows() == K);
    CHECK(pb.cols() == N);
    dynamic_matrix<T> c(M, N);
    rt::matrix_product<T>(a.view(), pb, c.view());
    CHECK(c == fma_chain_product<T>(a.view(), b.view()));
    rt::matrix_product<T>(a.view(), pw, c.view());
    const auto plain = fma_chain_product<T>(a.view(), transposed(w.view()));
    CHECK(c == plain);
    // the epilogue: scale, then bias, after the whole chain
    rt::epilogue<T> e;
    e.scale = T(0.125);
    e.scaled = true;
    e.bias = bias.data();
    rt::matrix_product<T>(a.view(), pw, c.view(), e);
    bool same = true;
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) same = same && c(i, j) == T(plain(i, j) * T(0.125)) + bias[j];
    CHECK(same);
    // threads only split the work
    rt::thread_pool two(2);
    dynamic_matrix<T> c2(M, N);
    rt::matrix_product<T>(a.view(), pw, c2.view(), e, &two);
    CHECK(c2 == c);
  }
  // a shape that does not fit names both shapes
  const rt::packed_operand<T> p(random_matrix<T>(5, 2, 1).view());
  dynamic_matrix<T> c(3, 2);
  CHECK_THROWS_WITH_AS(rt::matrix_product<T>(random_matrix<T>(3, 4, 2).view(), p, c.view()),
                       doctest::Contains("a is 3x4 and b is 5x2"), rt::shape_error);
}

TEST_CASE_TEMPLATE("a product that reads a in place (attention's tiles) gives the fma chain's bits", T, float,
                   double) {
  // 20 and 16 rows end in a tile of 8 and 4 rows with AVX-512 (MR = 12) and of 2 and 4 with AVX2
  // (MR = 6): the kernels of fewer rows, on their whole-tile path; 24 x 64 x 263: whole 12 x 32
  // tiles (the assembly kernel with AVX-512) whose last depth block, 7, is one step of 4 and 3 of 1
  const std::size_t shapes[][3] = {{1, 1, 1},      {7, 17, 5},   {13, 45, 300}, {50, 9, 513},
                                   {384, 64, 128}, {20, 33, 70}, {16, 40, 9},   {24, 64, 263}};
  unsigned seed = 80;
  for (const auto& s : shapes) {
    const std::size_t M = s[0], N = s[1], K = s[2];
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    const auto a = random_matrix<T>(M, K, seed++);
    const auto w = random_matrix<T>(N, K, seed++);
    dynamic_matrix<T> c(M, N);
    rt::detail::product_block<T>(a.view(), transposed(w.view()), c.view(), rt::epilogue<T>{}, 0, M, 0, N,
                                 false, nullptr, true);
    CHECK(c == fma_chain_product<T>(a.view(), transposed(w.view())));
    // continuing the chains (accumulate) from c: the chain of [a a] against [wᵀ; wᵀ]
    rt::detail::product_block<T>(a.view(), transposed(w.view()), c.view(), rt::epilogue<T>{}, 0, M, 0, N,
                                 true, nullptr, true);
    dynamic_matrix<T> aa(M, 2 * K), ww(N, 2 * K);
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t k = 0; k < K; ++k) aa(i, k) = aa(i, K + k) = a(i, k);
    for (std::size_t j = 0; j < N; ++j)
      for (std::size_t k = 0; k < K; ++k) ww(j, k) = ww(j, K + k) = w(j, k);
    CHECK(c == fma_chain_product<T>(aa.view(), transposed(ww.view())));
  }
}

TEST_CASE_TEMPLATE("vexp gives a lane the same bits on its fast path and its wide path", T, float, double) {
  // the fast path runs when every lane has |x| <= fast_limit; one lane at 88.5 (float) or 709.5
  // (double) sends the whole vector down the wide path, which must not change the other lanes
  using V = rt::simd<T>;
  const T far = std::is_same_v<T, float> ? T(88.5) : T(709.5);
  const T limit = rt::detail::exp_constants<T>::fast_limit;
  int differ = 0, count = 0;
  for (T x = -limit; x <= limit; x += limit / T(4096.3)) {
    V mixed(far);
    mixed[0] = x;
    const T fast = rt::vexp(V(x))[0];
    differ += rt::vexp(mixed)[0] != fast;
    differ += rt::detail::vexp_wide(V(x))[0] != fast;
    ++count;
  }
  CHECK(count > 8000);
  CHECK(differ == 0);
}
