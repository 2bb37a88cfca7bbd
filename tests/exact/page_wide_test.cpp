// io/page_wide.hpp with io/page_recompute.hpp: an exact step whose fractions overflow the page
// module's rationals of 64-bit integers is recomputed over 128-bit ones (the wide module,
// wasm/qkv_wide.cpp) when no other step reads it (docs/pages.md, "The exact pages").
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <qkv/core/matrix.hpp>
#include <qkv/exact/rational.hpp>
#include <qkv/io/page_recompute.hpp>
#include <qkv/io/page_wide.hpp>

namespace {
using how = qkv::io::page_how;
using q = qkv::exact::rational<long long>;

// an exact step's result, given on the page as the example's fractions
void exact_result(qkv::io::page& p, const char* id, how h, std::vector<std::string> texts) {
  p.matrix(id, 1, 1, {0.0}).how(std::move(h));
  p.entries().back().dtype = "exact", p.entries().back().exact = std::move(texts);
}
}  // namespace

TEST_CASE("an exact step that overflows 64-bit integers is a 128-bit step when nothing reads it") {
  qkv::io::page p("a wide page");
  p.with_truth();
  p.matrix("big", qkv::matrix<q, 1, 1>{{{3037000500LL}}});
  // 3037000500^2 = 9223372037000250000 > 2^63 - 1 (9223372036854775807): beyond long long,
  // well within Boost's int128_t (2^128 - 1 = 340282366920938463463374607431768211455)
  exact_result(p, "big_squared", how::dot("big", "big", 1), {"9223372037000250000"});
  // read by another step: that step would need the 128-bit values in the 64-bit module
  exact_result(p, "big_fourth", how::dot("big_squared", "big_squared", 1),
               {"85070591732918141055018500062500000000"});
  // 5 x (9 x 10^18)^2 = 4.05 x 10^38 > 2^128 - 1: the fifth term's sum overflows 128 bits too
  p.matrix("row", qkv::matrix<q, 1, 5>{{{9000000000000000000LL, 9000000000000000000LL, 9000000000000000000LL,
                                         9000000000000000000LL, 9000000000000000000LL}}});
  exact_result(p, "row_squared", how::dot("row", "row", 5), {"405000000000000000000000000000000000000"});

  SUBCASE("without the 128-bit steps, the step is stale (what a tool without Boost writes)") {
    const auto plan = qkv::io::plan_recompute(p);
    CHECK_FALSE(plan.wide);
    CHECK(plan.steps.empty());
  }
  SUBCASE("with them: big_squared is a wide step; what reads it, and a sum beyond 128 bits, are stale") {
    const auto plan = qkv::io::plan_recompute(p, qkv::io::wide_exact_q128);
    CHECK(plan.wide);
    REQUIRE(plan.steps.size() == 1);
    CHECK(plan.steps[0].id == "big_squared");
    CHECK(plan.steps[0].wide);
    REQUIRE(plan.stale.size() == 2);
    CHECK(plan.stale[0].first == "big_fourth");
    CHECK(plan.stale[0].second ==
          "it is computed from big_squared, whose fractions need 128-bit integers: the module's 128-bit "
          "steps end there");
    CHECK(plan.stale[1].first == "row_squared");
    CHECK(plan.stale[1].second ==
          "the module's exact step fails on the example's own numbers, in 64-bit and in 128-bit integers: "
          "qkv::exact::rational: a sum or difference overflows the integer type");
    const auto spec = qkv::io::recompute_spec(plan, "AGFzbQ==", 4, {}, {}, 0, "AGFzbQ==", 4);
    CHECK(spec.find("\"wide_module\":\"AGFzbQ==\",\"wide_module_bytes\":4") != std::string::npos);
    CHECK(spec.find("\"masked\":\"\",\"wide\":1}") != std::string::npos);
  }
}

TEST_CASE("the 128-bit step gives the fractions the page writes, and throws where 128 bits overflow") {
  qkv::io::page_step s;
  s.kind = qkv::flat::kind::dot;
  s.sizes = {1, 1, 2, 2, 2, 0, 0, 0};  // (1, 2) . (1, 2): rows, cols, as, bs, n
  // (2^60 / 3)(2^60 / 5) + (1/7)(1/11) = 2^120 / 15 + 1/77 = (77 x 2^120 + 15) / 1155, in lowest
  // terms (77 x 2^120 + 15 is 2 mod 3, 2 mod 5, 1 mod 7, 4 mod 11); 77 x 2^120 ~ 1.0e38 < 2^128
  const std::vector<q> a{q(1152921504606846976LL, 3), q(1, 7)}, b{q(1152921504606846976LL, 5), q(1, 11)};
  const auto t = qkv::io::wide_exact_q128(s, a, b, {});
  REQUIRE(t);
  CHECK(*t == std::vector<std::string>{"102350555675438522213593143641586532367/1155"});
  // 16 terms of 2^62 x 2^62 = 2^124: 15 of them sum to 15 x 2^124 < 2^128, the 16th to 2^128 > 2^128 - 1
  s.sizes = {1, 1, 16, 16, 16, 0, 0, 0};
  const std::vector<q> big(16, q(4611686018427387904LL));
  CHECK_THROWS_AS(qkv::io::wide_exact_q128(s, big, big, {}), std::overflow_error);
  s.kind = qkv::flat::kind::softmax;  // no exact form
  s.sizes = {1, 2, 2, 0, 0, 0, 0, 0};
  CHECK_FALSE(qkv::io::wide_exact_q128(s, a, {}, {}));
}
