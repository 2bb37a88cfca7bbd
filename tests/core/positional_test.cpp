// The sinusoidal positional encoding (core/positional.hpp) against the PyTorch tutorial's
// formula evaluated by PyTorch 1.13 in float64 (tests/data/encoder/positional.json, made by
// scripts/fixtures/encoder_fixtures.py: div_term = exp(arange(0, d, 2) * -(log(10000) / d))).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <qkv/core/matrix.hpp>
#include <qkv/core/positional.hpp>

TEST_CASE("the sinusoidal positional encoding equals the PyTorch tutorial's in float64") {
  std::ifstream in(std::string(QKV_TEST_DATA) + "/encoder/positional.json");
  REQUIRE(in);
  const auto j = nlohmann::json::parse(in).at("positional_encoding");
  REQUIRE(j.at("shape") == nlohmann::json::array({100, 8}));
  qkv::matrix<double, 100, 8> want;
  for (std::size_t p = 0; p < 100; ++p)
    for (std::size_t c = 0; c < 8; ++c) want(p, c) = j.at("data").at(p).at(c).get<double>();
  const auto pe = qkv::sinusoidal_positional_encoding<double, 100, 8>();
  const auto pe32 = qkv::sinusoidal_positional_encoding<float, 100, 8>();
  // both compute the angle pos * exp(-2i ln(10000) / d) in double: the frequency is within
  // ~3 roundings (exp's 1 ulp, the product and quotient), the angle within 4 u |angle| + one
  // more rounding, and sin/cos (1 ulp each side) move by at most that, plus 2 u each: so
  // |ours - theirs| <= 2 (5 u pos + 2 u) for pos up to 99, u = 2^-53
  const double u = 0x1p-53;
  for (std::size_t p = 0; p < 100; ++p)
    for (std::size_t j = 0; j < 8; ++j) {
      const double bound = 2 * (5 * u * double(p) + 2 * u);
      CHECK(std::abs(pe(p, j) - want(p, j)) <= bound);
      // float: the double value rounded once, so within half a float ulp (2^-24 relative) more
      CHECK(std::abs(double(pe32(p, j)) - want(p, j)) <= bound + 0x1p-24 * std::abs(want(p, j)));
    }
}
