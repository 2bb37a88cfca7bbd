// Checked element access (dynamic_matrix.hpp): this file is compiled with -DQKV_CHECKED, so
// m(i, j) and view(i, j) throw std::out_of_range naming the index and the shape. The sanitizer
// and TSan builds of scripts/test.sh turn the same checks on through _GLIBCXX_ASSERTIONS, so
// every runtime test there runs checked.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using rt::dynamic_matrix;

static_assert(rt::checked_access, "this test is built with -DQKV_CHECKED");

TEST_CASE(
    "with QKV_CHECKED an index past the rows or the columns throws std::out_of_range naming it and the "
    "shape") {
  dynamic_matrix<float> m(3, 4);
  m(2, 3) = 1.0f;  // the last element: fine
  CHECK(m(2, 3) == 1.0f);
  CHECK_THROWS_WITH_AS((void)m(3, 0), "dynamic_matrix: element (3, 0) of a 3x4 matrix", std::out_of_range);
  // (0, 4) is inside the storage (it is element (1, 0)): only a per-dimension check catches it
  CHECK_THROWS_WITH_AS((void)m(0, 4), "dynamic_matrix: element (0, 4) of a 3x4 matrix", std::out_of_range);
  const auto& c = m;
  CHECK_THROWS_AS((void)c(5, 5), std::out_of_range);
  // views: a head's columns of a wider matrix, and a transposed view
  const auto head = rt::column_block(m.view(), 2, 2);  // 3x2 window on columns 2..3
  CHECK(head(2, 1) == 1.0f);
  CHECK_THROWS_WITH_AS((void)head(0, 2), "matrix_view: element (0, 2) of a 3x2 matrix", std::out_of_range);
  const auto t = rt::transposed(m.view());
  CHECK(t(3, 2) == 1.0f);
  CHECK_THROWS_AS((void)t(2, 3), std::out_of_range);
}

TEST_CASE("with QKV_CHECKED the kernels run unchanged: attention on both paths, in bounds everywhere") {
  // every kernel reads through checked views here: a stray index would throw
  const auto x = qkv::testing::random_matrix<float>(70, 24, 1);
  rt::attention_weights<float> w;
  for (auto* l : {&w.q, &w.k, &w.v}) l->weight = qkv::testing::random_matrix<float>(24, 24, 2, 0.2);
  for (const bool keep : {true, false}) {
    rt::attention_options<float> opt;
    opt.heads = 3;
    opt.causal = true;
    opt.keep_weights = keep;
    CHECK_NOTHROW((void)rt::attention(x, x, w, opt));
  }
}

TEST_CASE(
    "with QKV_CHECKED attention over no keys at all gives 0 on both paths, reading no element past the end") {
  // context with 0 rows: every query has no key (fully masked), so its output is 0
  const auto x = qkv::testing::random_matrix<float>(3, 4, 3);
  const dynamic_matrix<float> none(0, 4);
  rt::attention_weights<float> w;
  for (auto* l : {&w.q, &w.k, &w.v}) l->weight = qkv::testing::random_matrix<float>(4, 4, 4, 0.5);
  for (const bool keep : {true, false}) {
    rt::attention_options<float> opt;
    opt.keep_weights = keep;
    const auto r = rt::attention(x, none, w, opt);
    CHECK(r.output == dynamic_matrix<float>(3, 4));
  }
}
