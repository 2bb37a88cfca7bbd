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
  for (std::size_t k = 0; k < m.size(); ++k)
    m.data()[k] = std::bit_cast<float>(std::uint32_t(gen() & 0x7f7fffffu) | (k % 2 ? 0x80000000u : 0u));
  m(0, 0) = -std::numeric_limits<float>::infinity();
  m(0, 1) = std::numeric_limits<float>::denorm_min();
  m(0, 2) = 0.1f;
  m(0, 3) = std::numeric_limits<float>::infinity();
  m(0, 4) = std::numeric_limits<float>::max();
  m(0, 5) = -std::numeric_limits<float>::max();
  const auto doc = io::json_document::parse(io::to_json_string(m), "memory");
  CHECK(doc.json().at("dtype") == "float32");
  CHECK(doc.json().at("data")[0][0] == "-Infinity");  // JSON has no infinities: a string
  CHECK(doc.json().at("data")[0][3] == "Infinity");
  // read the way the format promises: parse as double, round to float
  const auto back = io::read_matrix<float>(doc, "m", doc.json());
  std::size_t differ = 0;
  for (std::size_t k = 0; k < m.size(); ++k)
    differ += std::bit_cast<std::uint32_t>(back.data()[k]) != std::bit_cast<std::uint32_t>(m.data()[k]);
  CHECK(differ == 0);
  // 0.1f is written as the double equal to it, not as "0.1"
  CHECK(io::to_json_string(rt::dynamic_matrix<float>{{0.1f}}).find("0.10000000149011612") !=
        std::string::npos);
}

TEST_CASE("float64 values are written in shortest round-trip form") {
  const rt::dynamic_matrix<double> m{{0.1, 1.0 / 3, 1e-300}, {-2.5, 6.02214076e23, 0}};
  const std::string s = io::to_json_string(m);
  CHECK(
      s ==
      R"({"dtype": "float64", "shape": [2, 3], "data": [[0.1, 0.3333333333333333, 1e-300], [-2.5, 6.02214076e+23, 0]]})");
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
  CHECK_THROWS_WITH_AS(
      (void)io::read_matrix_field<float>(doc, "wq"),
      "case.json: field 'wq': data[1] must be an array of 3 (shape [2, 3]), got an array of 2",
      io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "x"),
                       "case.json: field 'x': element [1][1] must be a number or \"NaN\", \"Infinity\", "
                       "\"-Infinity\", got \"a\"",
                       io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_vector<float>(doc, "b", doc.json().at("b"), 4),
                       "case.json: field 'b': expected shape [4], got shape [3]", io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "m"),
                       "case.json: field 'm': dtype must be \"float32\" or \"float64\", got \"int8\"",
                       io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "v", "T x d"),
                       "case.json: field 'v': expected a 2-d tensor (T x d), got shape [3]", io::json_error);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<float>(doc, "nope", "T x d"),
                       "case.json: field 'nope': missing (expected a T x d tensor)", io::json_error);
  CHECK_THROWS_AS((void)io::json_document::parse("{\"x\": [1, 2", "broken.json"), io::json_error);
  CHECK_THROWS_WITH_AS((void)io::json_document::load("/nonexistent/case.json"),
                       "/nonexistent/case.json: cannot open the file", io::json_error);
}

TEST_CASE("masks read from booleans or 0/1") {
  const auto doc =
      io::json_document::parse(R"({"allowed": [[true, false], [1, 0]], "bad": [[2]]})", "c.json");
  const auto m = io::read_matrix_field<unsigned char>(doc, "allowed");
  CHECK(m(0, 0) == 1);
  CHECK(m(0, 1) == 0);
  CHECK(m(1, 0) == 1);
  CHECK_THROWS_WITH_AS((void)io::read_matrix_field<unsigned char>(doc, "bad"),
                       "c.json: field 'bad': element [0][0] must be true or false (or 0 or 1), got a number",
                       io::json_error);
}

TEST_CASE("NaN and the infinities are written as strings and read back as themselves") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const rt::dynamic_matrix<double> m{{nan, inf, -inf, -nan}};
  const std::string s = io::to_json_string(m);
  CHECK(s == R"({"dtype": "float64", "shape": [1, 4], "data": [["NaN", "Infinity", "-Infinity", "NaN"]]})");
  const auto doc = io::json_document::parse(s, "memory");
  const auto back = io::read_matrix<double>(doc, "m", doc.json());
  CHECK(std::isnan(back(0, 0)));
  CHECK(back(0, 1) == inf);
  CHECK(back(0, 2) == -inf);
  CHECK(std::isnan(back(0, 3)));  // the sign of a NaN is not kept
  const auto f = io::read_matrix<float>(doc, "m", doc.json());
  CHECK(std::isnan(f(0, 0)));
  CHECK(f(0, 1) == std::numeric_limits<float>::infinity());
  CHECK(f(0, 2) == -std::numeric_limits<float>::infinity());
}

TEST_CASE("null is refused in a tensor of values and reads as -inf only where a mask asks for it") {
  const auto doc = io::json_document::parse(R"({"wq": [[1, null]], "mask": [[0, null]]})", "c.json");
  CHECK_THROWS_WITH_AS(
      (void)io::read_matrix_field<float>(doc, "wq"),
      "c.json: field 'wq': element [0][1] is null, which this field does not take (null means -inf only "
      "in a mask; write \"-Infinity\", \"Infinity\" or \"NaN\" for those values)",
      io::json_error);
  const auto mask = io::read_matrix_field<float>(doc, "mask", "T x S", io::null_means::minus_infinity);
  CHECK(mask(0, 0) == 0);
  CHECK(mask(0, 1) == -std::numeric_limits<float>::infinity());
}

TEST_CASE("a number beyond float32's range is refused in a float32 tensor and read in a float64 one") {
  // float32's largest finite value is (2 - 2^-23) 2^127 = 3.4028234663852886e38: 3.4028235e38
  // is above it by less than half an ulp (2^103 = 1.0e31) and rounds to it, but the rule is the
  // one `qkv torch` applies: |x| <= 3.4028234663852886e38, nothing more
  const auto doc = io::json_document::parse(
      R"({"a": [[1e39]], "b": [[-3.4028234663852886e38, 3.4028234663852886e38]], "c": [[1e-50]]})", "c.json");
  CHECK_THROWS_WITH_AS(
      (void)io::read_matrix_field<float>(doc, "a"),
      "c.json: field 'a': element [0][0] = 1e+39 does not fit in float32 (its largest finite value "
      "is 3.4028235e+38; write \"Infinity\" or \"-Infinity\" for an infinity)",
      io::json_error);
  CHECK(io::read_matrix_field<double>(doc, "a")(0, 0) == 1e39);
  const auto b = io::read_matrix_field<float>(doc, "b");
  CHECK(b(0, 0) == -std::numeric_limits<float>::max());
  CHECK(b(0, 1) == std::numeric_limits<float>::max());
  CHECK(io::read_matrix_field<float>(doc, "c")(0, 0) == 0.0f);  // below the smallest subnormal: rounds to 0
}

TEST_CASE("a key twice in one object is refused, named by its path") {
  CHECK_THROWS_WITH_AS(
      (void)io::json_document::parse(R"({"x": [[1]], "wq": [[1]], "x": [[2]]})", "c.json"),
      "c.json: field 'x': the key appears twice in one object (each key once: which one would be meant?)",
      io::json_error);
  CHECK_THROWS_WITH_AS(
      (void)io::json_document::parse(R"({"layers": [{"a": 1}, {"b": [1, {"c": 2}], "d": {"e": 1, "e": 2}}]})",
                                     "c.json"),
      "c.json: field 'layers[1].d.e': the key appears twice in one object (each key once: which one would be "
      "meant?)",
      io::json_error);
  // the same key in different objects is fine
  CHECK_NOTHROW((void)io::json_document::parse(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})",
                                               "c.json"));
}

TEST_CASE("a directory is named as a directory, and a file over the byte limit is refused") {
  CHECK_THROWS_WITH_AS((void)io::json_document::load(QKV_TEST_DATA),
                       QKV_TEST_DATA ": is a directory, not a JSON file", io::json_error);
  // /dev/zero never ends: the limit stops the read
  CHECK_THROWS_WITH_AS(
      (void)io::json_document::load("/dev/zero", 100000, "--max-elements"),
      "/dev/zero: the file is more than 100000 bytes, the limit (raise it with --max-elements N)",
      io::limit_error);
}

TEST_CASE("negative zero is written -0.0 and reads back with its sign") {
  // to_chars gives "-0", which a JSON parser reads as the integer 0: the sign would be lost
  const rt::dynamic_matrix<float> m{{-0.0f, 0.0f}};
  const std::string s = io::to_json_string(m);
  CHECK(s == R"({"dtype": "float32", "shape": [1, 2], "data": [[-0.0, 0]]})");
  const auto doc = io::json_document::parse(s, "memory");
  const auto back = io::read_matrix<float>(doc, "m", doc.json());
  CHECK(std::signbit(back(0, 0)));
  CHECK(!std::signbit(back(0, 1)));
}
