// io/page_recompute.hpp: which matrices of a `qkv explain` page its WebAssembly module recomputes
// (docs/pages.md, "Editing an example's page"): a step is kept only when it gives the page's own
// numbers bit for bit; what is not recomputed says why; editable inputs are those shown and read.
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include <qkv/core/adamw.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/exact/rational.hpp>
#include <qkv/io/page_recompute.hpp>

namespace {

using qkv::io::page;
using how = qkv::io::page_how;

// x (2, 2) and w (2, 2); y = x w: 1 x 5 + 2 x 7 = 19, 1 x 6 + 2 x 8 = 22, 3 x 5 + 4 x 7 = 43,
// 3 x 6 + 4 x 8 = 50 (exact in float32)
page small(bool truth) {
  page p("a test page");
  p.with_truth(truth);
  p.step("inputs");
  p.matrix("x", 2, 2, {1, 2, 3, 4});
  p.matrix("w", 2, 2, {5, 6, 7, 8});
  p.matrix("unused", 1, 2, {1, 1});                                           // read by no step
  p.matrix("y", 2, 2, {19, 22, 43, 50}).how(how::matmul("x", "w", 2));        // right
  p.matrix("y_wrong", 2, 2, {19, 22, 43, 51}).how(how::matmul("x", "w", 2));  // off in (2, 2)
  p.matrix("rounded", 2, 2, {19, 22, 43, 50}).derived();                      // computed elsewhere
  p.matrix("r", 2, 2, {19, 22, 43, 50}).how(how::relu("rounded"));
  return p;
}

}  // namespace

TEST_CASE("a page's steps are recomputed only where they give its own numbers bit for bit") {
  const auto plan = qkv::io::plan_recompute(small(true));
  CHECK(plan.why.empty());
  REQUIRE(plan.steps.size() == 1);
  CHECK(plan.steps[0].id == "y");
  CHECK(plan.steps[0].kind == qkv::flat::kind::matmul);
  CHECK(plan.inputs == std::vector<std::string>{"x", "w"});  // "unused" is read by no step
  REQUIRE(plan.stale.size() == 3);
  CHECK(plan.stale[0].first == "y_wrong");
  CHECK(plan.stale[0].second.find("gives 50 at (2, 2) where the example computed 51") != std::string::npos);
  CHECK(plan.stale[1].first == "rounded");
  CHECK(plan.stale[2].first == "r");
  CHECK(plan.stale[2].second == "it is computed from rounded, which is not recomputed");
  const auto spec = qkv::io::recompute_spec(plan, "AGFzbQ==", 4);
  CHECK(spec.find("\"kind\":\"steps\"") != std::string::npos);
  CHECK(spec.find("\"sizes\":[2,2,2,2,2,0,0,0]") != std::string::npos);
}

TEST_CASE("a page that does not mark its inputs, or has no module, is not editable and says why") {
  const auto plan = qkv::io::plan_recompute(small(false));
  CHECK(plan.steps.empty());
  CHECK(plan.why.find("does not say which of its matrices are inputs and how each other one is computed") !=
        std::string::npos);
  const auto spec = qkv::io::recompute_spec(plan, "", 0);
  CHECK(spec.find("This page is not editable: its example does not say") != std::string::npos);
  CHECK(spec.find("\"module\"") == std::string::npos);
  const auto no_module =
      qkv::io::recompute_spec(qkv::io::plan_recompute(small(true)), "", 0, "no wasm toolchain");
  CHECK(no_module.find("This page is not editable: no wasm toolchain.") != std::string::npos);
}

TEST_CASE("a step whose sizes do not fit its operands is not recomputed") {
  page p("sizes");
  p.with_truth();
  p.matrix("x", 2, 2, {1, 2, 3, 4});
  p.matrix("w", 2, 2, {5, 6, 7, 8});
  p.matrix("y", 2, 2, {19, 22, 43, 50}).how(how::matmul("x", "w", 3));  // 3 terms of a 2-column x
  const auto plan = qkv::io::plan_recompute(p);
  REQUIRE(plan.stale.size() == 1);
  CHECK(plan.stale[0].second == "its sizes do not fit its operands");
  CHECK(!plan.why.empty());
}

TEST_CASE("an exact page's steps are recomputed over rationals, fraction for fraction") {
  using q = qkv::exact::rational<long long>;
  page p("an exact page");
  p.with_truth();
  // x w = [[1/2 x 5 + 2 x 7, 1/2 x 6 + 2 x 8], [3 x 5 + 4 x 7, 3 x 6 + 4 x 8]] = [[33/2, 19], [43, 50]]
  p.matrix("x", qkv::matrix<q, 2, 2>{{{q(1, 2), 2}, {3, 4}}});
  p.matrix("w", qkv::matrix<q, 2, 2>{{{5, 6}, {7, 8}}});
  p.matrix("y", qkv::matrix<q, 2, 2>{{{q(33, 2), 19}, {43, 50}}}).how(how::matmul("x", "w", 2));
  p.matrix("y_wrong", qkv::matrix<q, 2, 2>{{{q(33, 2), 19}, {43, 51}}}).how(how::matmul("x", "w", 2));
  p.matrix("soft", qkv::matrix<q, 2, 2>{{{0, 1}, {0, 1}}}).how(how::softmax("y"));  // no exact form
  // 3037000500^2 = 9223372037000250000 > 2^63 - 1: the step overflows long long on the page's numbers
  p.matrix("big", qkv::matrix<q, 1, 1>{{{3037000500LL}}});
  p.matrix("big_squared", 1, 1, {9223372037000250000.0}).how(how::dot("big", "big", 1));
  p.entries().back().dtype = "exact", p.entries().back().exact = {"9223372037000250000"};
  p.matrix("huge", 1, 1, {1e20});  // an input whose fraction does not fit 64-bit integers
  p.entries().back().dtype = "exact", p.entries().back().exact = {"100000000000000000000"};
  const auto plan = qkv::io::plan_recompute(p);
  CHECK(plan.why.empty());
  CHECK(plan.exact);
  REQUIRE(plan.steps.size() == 1);
  CHECK(plan.steps[0].id == "y");
  CHECK(plan.inputs == std::vector<std::string>{"x", "w"});
  REQUIRE(plan.stale.size() == 4);
  CHECK(plan.stale[0].first == "y_wrong");
  CHECK(plan.stale[0].second.find("gives 50 at (2, 2) where the example has 51") != std::string::npos);
  CHECK(plan.stale[1].first == "soft");
  CHECK(plan.stale[1].second.find("its operation is not exact arithmetic") == 0);
  CHECK(plan.stale[2].first == "big_squared");
  CHECK(
      plan.stale[2].second ==
      "the module's exact step fails on the example's own numbers: qkv::exact::rational: a product overflows "
      "the integer type");
  CHECK(plan.stale[3].first == "huge");
  CHECK(plan.stale[3].second.find("do not fit the module's exact numbers, rationals of 64-bit integers") !=
        std::string::npos);
  const auto spec = qkv::io::recompute_spec(plan, "AGFzbQ==", 4);
  CHECK(spec.find("\"exact\":\"q64\"") != std::string::npos);
}

TEST_CASE("a page with float and exact steps recomputes both, each in its own type") {
  // a float32 product and an exact one on one page: both are steps (the exact editor runs each
  // step with its own type's module entry: 03b's float32 run, double run and exact values)
  using q = qkv::exact::rational<long long>;
  page p("float and exact");
  p.with_truth();
  p.matrix("x", 2, 2, {1, 2, 3, 4});
  p.matrix("w", 2, 2, {5, 6, 7, 8});
  p.matrix("y", 2, 2, {19, 22, 43, 50}).how(how::matmul("x", "w", 2));  // float32, exact in float32
  p.matrix("ex", qkv::matrix<q, 2, 2>{{{q(1, 2), 2}, {3, 4}}});
  p.matrix("ew", qkv::matrix<q, 2, 2>{{{5, 6}, {7, 8}}});
  // ey = ex ew: (1/2) 5 + 2 7 = 33/2, (1/2) 6 + 2 8 = 19; 3 5 + 4 7 = 43, 3 6 + 4 8 = 50
  p.matrix("ey", qkv::matrix<q, 2, 2>{{{q(33, 2), 19}, {43, 50}}}).how(how::matmul("ex", "ew", 2));
  const auto plan = qkv::io::plan_recompute(p);
  CHECK(plan.exact);
  REQUIRE(plan.steps.size() == 2);
  CHECK(plan.steps[0].id == "y");
  CHECK(plan.steps[1].id == "ey");
  CHECK(plan.inputs == std::vector<std::string>{"x", "w", "ex", "ew"});
  CHECK(plan.stale.empty());
}

TEST_CASE("an exact matrix cast to float32 or double is the nearest float, as matrix_cast converts") {
  // 15's true softmax runs start from the page's rationals: 1/3 is 11184811 / 2^25 in float32
  // (0.3333333432674407958984375, the nearer of its two neighbours: 1/3 - 11184810/2^25 = 2^-25/3
  // against 2 2^-25/3) and 0x1.5555555555555p-2 in double; 1/10 is 0.1f and 0.1
  using q = qkv::exact::rational<long long>;
  page p("exact to float");
  p.with_truth();
  p.matrix("ex", qkv::matrix<q, 1, 2>{{{q(1, 3), q(1, 10)}}});
  p.matrix("f32", qkv::matrix<float, 1, 2>{{{0x1.555556p-2f, 0.1f}}}).how(how::cast("ex"));
  p.matrix("f64", qkv::matrix<double, 1, 2>{{{0x1.5555555555555p-2, 0.1}}}).how(how::cast("ex"));
  p.matrix("f32 wrong", qkv::matrix<float, 1, 2>{{{0x1.555554p-2f, 0.1f}}}).how(how::cast("ex"));
  const auto plan = qkv::io::plan_recompute(p);
  REQUIRE(plan.steps.size() == 2);
  CHECK(plan.steps[0].id == "f32");
  CHECK(plan.steps[0].kind == qkv::flat::cast_kind);
  CHECK(plan.steps[1].id == "f64");
  REQUIRE(plan.stale.size() == 1);
  CHECK(plan.stale[0].first == "f32 wrong");
  CHECK(static_cast<float>(q(1, 3)) == 0x1.555556p-2f);
}

namespace {

// a summarised page in small: 3 x 1 numbers in all before it summarises, and a dimension above 2
// shows its first and last 1. x (2, 5) and y (2, 5) have 2 rows, shown whole, and every row of x
// is read by y's shown cells: both are embedded whole; W and W2 (5, 5) are not (2 of their 5 rows:
// those y's and out's shown columns read). y = x Wᵀ with W the identity: y = x (exact); z = y / 2
// (exact: halves of integers); both = [z | z] (a scratch matrix: the module's, not embedded) and
// wide = [both | y]; out = z W2ᵀ.
page summarised_page() {
  page p("summarised", qkv::io::page_limits{3, 1, 2, 64});
  p.with_truth();
  std::vector<double> x, eye(25, 0.0), z, both, wide;
  for (int k = 0; k < 10; ++k) x.push_back(k + 1);
  for (int k = 0; k < 5; ++k) eye[static_cast<std::size_t>(k * 6)] = 1;
  for (double v : x) z.push_back(v / 2);
  for (int i = 0; i < 2; ++i) {
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 5; ++j) both.push_back(z[static_cast<std::size_t>(i * 5 + j)]);
    for (int j = 0; j < 10; ++j) wide.push_back(both[static_cast<std::size_t>(i * 10 + j)]);
    for (int j = 0; j < 5; ++j) wide.push_back(x[static_cast<std::size_t>(i * 5 + j)]);
  }
  p.matrix("x", 2, 5, x);
  p.matrix("W", 5, 5, eye);
  p.matrix("W2", 5, 5, eye);
  p.matrix("y", 2, 5, x).how(how::dot("x", "W", 5));
  p.matrix("z", 2, 5, z).how(how::scaled("y", 0.5, "1/2"));
  p.matrix("both", 2, 10, both).how(how::hconcat("z", "z")).scratch();
  p.matrix("wide", 2, 15, wide).how(how::hconcat("both", "y"));
  p.matrix("out", 2, 5, z).how(how::dot("z", "W2", 5));
  return p;
}

}  // namespace

TEST_CASE("a summarised page recomputes from the matrices it holds whole, and says what it lacks") {
  const page p = summarised_page();
  REQUIRE(p.summarised());
  CHECK(p.embedded_whole() == std::vector<bool>{true, false, false, true, true, false, true, true});
  const auto plan = qkv::io::plan_recompute(p);
  CHECK(plan.why.empty());
  // y is computed from W, which is not on the page, and from x, an input: y is an input here
  CHECK(plan.inputs == std::vector<std::string>{"y"});
  REQUIRE(plan.cut.size() == 1);
  CHECK(plan.cut[0].first == "y");
  CHECK(plan.cut[0].second.find("its operand W (5 x 5, 100 bytes in float32) is not on this page") == 0);
  REQUIRE(plan.steps.size() == 3);  // z, both (scratch: the module computes it), wide
  CHECK(plan.steps[0].id == "z");
  CHECK(plan.steps[1].id == "both");
  CHECK(plan.steps[2].id == "wide");
  CHECK(plan.steps[2].kind == qkv::flat::kind::hconcat);
  // out is computed from z, which is recomputed, and W2, which is not on the page: stale
  REQUIRE(plan.stale.size() == 1);
  CHECK(plan.stale[0].first == "out");
  CHECK(
      plan.stale[0].second ==
      "its operand W2 (5 x 5, 100 bytes in float32) is not on this page, which is summarised (it shows W2's "
      "first and last rows and columns): the module cannot recompute out from z without it");
  const auto spec = qkv::io::recompute_spec(plan, "AGFzbQ==", 4);
  CHECK(spec.find("\"cut\":[{\"id\":\"y\"") != std::string::npos);
  // the scratch matrix: its shape and how, no numbers
  const auto html = p.str();
  const auto at = html.find("\"both\":{");
  REQUIRE(at != std::string::npos);
  const auto entry = html.substr(at, html.find('}', html.find("\"how\":", at)) + 2 - at);
  CHECK(entry.find("\"scratch\":true") != std::string::npos);
  CHECK(entry.find("\"data\"") == std::string::npos);
}

// the steps 17-25 (core/flat_steps.hpp): by hand, scores s = [0, 0, -inf, 0] over values [1, 3, 5,
// 7] in blocks of 2: block 0 m = 0, p = [1, 1], l = 2, o = 1 + 3 = 4; block 1 m = 0, rescale
// e^0 = 1, p = [0, 1], l = 3, o = 4 + 7 = 11; o / l = 11/3 (float32: its nearest float); softmax
// over four equal numbers 0.25 each; bfloat16 ties to even: 1 + 2^-8 -> 1, 1 + 3 2^-8 -> 1 + 2^-6;
// [1, 2, 3, 4]'s halves as pairs [1, 3, 2, 4], and back
TEST_CASE("the online softmax, softmax_all, the roundings and (de)interleave are steps; a check is not") {
  const double inf = std::numeric_limits<double>::infinity();
  page p("steps 17-23");
  p.with_truth();
  p.matrix("s", 1, 4, {0, 0, -inf, 0});
  p.matrix("v", 4, 1, {1, 3, 5, 7});
  p.matrix("run0", 1, 5, {0, 0, 0, 2, 4}).how(how::online_state("s", "v", "", 2, 0, 0));
  p.matrix("run1", 1, 5, {0, 0, 1, 3, 11}).how(how::online_state("s", "v", "run0", 2, 2, 2));
  p.matrix("p1", 1, 2, {0, 1}).how(how::online_p("s", "run1", 2));
  p.matrix("o1", 1, 1, {11}).how(how::block("run1", 0, 4));
  p.matrix("out", 1, 1, {11.0 / 3}).how(how::online_output("o1", "run1"));
  p.matrix("flash", 1, 1, {11.0 / 3}).how(how::online_attention("s", "v", 2));
  p.matrix("x", 2, 2, {0.5, 0.5, 0.5, 0.5});
  p.matrix("all", 2, 2, {0.25, 0.25, 0.25, 0.25}).how(how::softmax_all("x"));
  p.matrix("b", 1, 2, {1.00390625, 1.01171875});
  p.matrix("b16", 1, 2, {1, 1.015625}).how(how::rounded16("b", "bfloat16"));
  p.matrix("d", 1, 1, {0.5}).dtype("float64");
  p.matrix("d16", 1, 1, {0.5}).dtype("float64").how(how::rounded16("d", "bfloat16"));
  p.matrix("h", 1, 4, {1, 2, 3, 4});
  p.matrix("pairs", 1, 4, {1, 3, 2, 4}).how(how::interleave("h"));  // halves [1, 2], [3, 4] as pairs
  p.matrix("halves", 1, 4, {1, 2, 3, 4}).how(how::deinterleave("pairs"));
  p.matrix("bound", 1, 1, {1e-6}).derived_because("it is the example's bound, a check");
  const auto plan = qkv::io::plan_recompute(p);
  std::vector<std::string> ids;
  for (const auto& s : plan.steps) ids.push_back(s.id);
  CHECK(ids == std::vector<std::string>{"run0", "run1", "p1", "o1", "out", "flash", "all", "b16", "pairs",
                                        "halves"});
  REQUIRE(plan.steps.size() == 10);
  CHECK(plan.steps[0].kind == qkv::flat::kind::online_state);
  CHECK(plan.steps[1].c == "run0");
  CHECK(plan.steps[5].kind == qkv::flat::kind::online_attention);
  CHECK(plan.steps[6].kind == qkv::flat::kind::softmax_all);
  CHECK(plan.steps[7].kind == qkv::flat::kind::round_bfloat16);
  CHECK(plan.steps[8].kind == qkv::flat::kind::interleave);
  CHECK(plan.steps[9].kind == qkv::flat::kind::deinterleave);
  REQUIRE(plan.stale.size() == 2);
  CHECK(plan.stale[0].first == "d16");
  CHECK(plan.stale[0].second == "a rounding to 16 bits is a float32 step");
  CHECK(plan.stale[1].first == "bound");
  CHECK(plan.stale[1].second == "it is the example's bound, a check");
}

// kind 57 (example 17's W_q after AdamW): the step from W, its gradient and a (1, 8) matrix of the
// step's scalars is kept when it gives adamw_step's numbers (computed here by adamw_step itself:
// W = [1, -0.5], g = [2, 0] -> about [0.9999 - 0.01, -0.5 0.9999]); scalars of another size are
// not read, and the step says why
TEST_CASE("AdamW's first step is a step from its scalars, kept when it gives adamw_step's numbers") {
  const auto sc = qkv::adamw_step_scalars<float>({.lr = 0.01}, 1);
  const qkv::matrix<float, 1, 2> w{{{1.f, -0.5f}}}, g{{{2.f, 0.f}}};
  const auto after = qkv::adamw_step(qkv::adamw_parameter<float, 1, 2>{w}, g, {.lr = 0.01}).w;
  CHECK(after(0, 1) == -0.5f * 0.9999f);  // g = 0: the decay alone, one rounding
  page p("adamw");
  p.with_truth();
  p.matrix("W", 1, 2, {1, -0.5});
  p.matrix("g", 1, 2, {2, 0});
  p.matrix("scalars", 1, 8,
           {sc.decay, sc.beta1, sc.alpha1, sc.beta2, sc.value2, sc.step_size, sc.bc2_sqrt, sc.eps});
  p.matrix("seven", 1, 7, {sc.decay, sc.beta1, sc.alpha1, sc.beta2, sc.value2, sc.step_size, sc.bc2_sqrt});
  p.matrix("W after", 1, 2, {after(0, 0), after(0, 1)}).how(how::adamw("W", "g", "scalars"));
  p.matrix("W after (7)", 1, 2, {after(0, 0), after(0, 1)}).how(how::adamw("W", "g", "seven"));
  const auto plan = qkv::io::plan_recompute(p);
  REQUIRE(plan.steps.size() == 1);
  CHECK(plan.steps[0].id == "W after");
  CHECK(plan.steps[0].kind == qkv::flat::adamw_kind);
  CHECK(plan.steps[0].c == "scalars");
  REQUIRE(plan.inputs.size() >= 3);  // "seven" too when a stale step's operand counts as read
  CHECK(std::vector<std::string>(plan.inputs.begin(), plan.inputs.begin() + 3) ==
        std::vector<std::string>{"W", "g", "scalars"});
  REQUIRE(plan.stale.size() == 1);
  CHECK(plan.stale[0].second == "its sizes do not fit its operands");
}
