// io/json.hpp: tensors written so that every number reads back to the same bits, and reading
// that checks every field and names the file, the field, the expected and the actual.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include <qkv/io/json.hpp>

namespace io = qkv::io;
namespace rt = qkv::runtime;

TEST_CASE("float32 values round-trip bit for bit through double parsing") {
  std::mt19937 gen(7);
  rt::dynamic_matrix<float> m(50, 40);
  for (std::size_t k = 0; k < m.size(); ++k) m.data()[k] = std::bit_cast<float>(std::uint32_t(gen() & 0x7f7fffffu) | (k % 2 ? 0x80000000u : 0u));
  m(0, 0) = -std::numeric_limits<float>::infinity();
  m(0, 1) = std::numeric_limits<float>::denorm_min();
  m(0, 2) = 0.1f;
  const auto doc = io::json_document::parse(io::to_json_string(m), "memory");
  CHECK(doc.json().at("dtype") == "float32");
  CHECK(doc.json().at("data")[0][0].is_null());  // -inf is written null
  // read the way the format promises: parse as double, round to float
  const auto back = io::read_matrix<float>(doc, "m", doc.json());
  std::size_t differ = 0;
  for (std::size_t k = 0; k < m.size(); ++k)
    differ += std::bit_cast<std::uint32_t>(back.data()[k]) != std::bit_cast<std::uint32_t>(m.data()[k]);
  CHECK(differ == 0);
  // 0.1f is written as the double equal to it, not as "0.1"
  CHECK(io::to_json_string(rt::dynamic_matrix<float>{{0.1f}}).find("0.10000000149011612") != std::string::npos);
}

TEST_CASE("float64 values are written in shortest round-trip form") {
  const rt::dynamic_matrix<double> m{{0.1, 1.0 / 3, 1e-300}, {-2.5, 6.02214076e23, 0}};
  const std::string s = io::to_json_string(m);
  CHECK(s == R"({"dtype": "float64", "shape": [2, 3], "data": [[0.1, 0.3333333333333333, 1e-300], [-2.5, 6.02214076e+23, 0]]})");
  const auto doc = io::json_document::parse(s, "memory");
  CHECK(io::read_matrix<double>(doc, "m", doc.json()) == m);
}

TEST_CASE("a stack of heads is a 3-d tensor") {
  std::vector<rt::dynamic_matrix<float>> heads{{{1, 2}}, {{3, 4}}};
  std::string s;
  io::write_tensor(s, heads);
  CHECK(s == R"({"dtype": "float32", "shape": [2, 1, 2], "data": [[[1, 2]], [[3, 4]]]})");
}

TEST_CASE("reading names the file, the field, the expected and the actual shape") {
  const auto doc = io::json_document::parse(
      R"({"wq": {"dtype": "float32", "shape": [2, 3], "data": [[1, 2, 3], [4, 5]]},
          "x": [[1, 2], [3, "a"]], "b": {"dtype": "float32", "shape": [3], "data": [1, 2, 3]},
          "m": {"dtype": "int8", "shape": [1], "data": [1]}, "v": [1, 2, 3]})",
      "case.json");
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "wq"),
                       "case.json: field 'wq': data[1] must be an array of 3 (shape [2, 3]), got an array of 2",
                       io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "x"),
                       "case.json: field 'x': element [1][1] must be a number (or null for -inf), got a string",
                       io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_vector<float>(doc, "b", doc.json().at("b"), 4),
                       "case.json: field 'b': expected shape [4], got shape [3]", io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "m"),
                       "case.json: field 'm': dtype must be \"float32\" or \"float64\", got \"int8\"", io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "v", "T x d"),
                       "case.json: field 'v': expected a 2-d tensor (T x d), got shape [3]", io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "nope", "T x d"),
                       "case.json: field 'nope': missing (expected a T x d tensor)", io::json_error);
  CHECK_THROWS_AS((void)io::json_document::parse("{\"x\": [1, 2", "broken.json"), io::json_error);
  CHECK_THROWS_WITH_AS((void)io::json_document::load("/nonexistent/case.json"),
                       "/nonexistent/case.json: cannot open the file", io::json_error);
}

TEST_CASE("masks read from booleans or 0/1") {
  const auto doc = io::json_document::parse(R"({"allowed": [[true, false], [1, 0]], "bad": [[2]]})", "c.json");
  const auto m = io::read_matrix_field<unsigned char>(doc, "allowed");
  CHECK(m(0, 0) == 1);
  CHECK(m(0, 1) == 0);
  CHECK(m(1, 0) == 1);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<unsigned char>(doc, "bad"),
                       "c.json: field 'bad': element [0][0] must be true or false (or 0 or 1), got a number",
                       io::json_error);
}
