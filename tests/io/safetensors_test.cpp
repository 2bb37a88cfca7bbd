// runtime tests of io/safetensors.hpp: conversions, round trips through files the test makes,
// row reads, and malformed files that must give a clear safetensors_error.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <qkv/io/safetensors.hpp>

using namespace qkv::io;
// the 16-bit conversions safetensors reads and writes with are runtime/half.hpp's
using qkv::runtime::bfloat16_bits_to_float;
using qkv::runtime::float_to_bfloat16_bits;
using qkv::runtime::float_to_half_bits;
using qkv::runtime::half_bits_to_float;

namespace {

// a file in the temporary directory, removed at the end of the test
struct temp_file {
  std::string path;
  explicit temp_file(const std::string& name)
      : path(
            (std::filesystem::temp_directory_path() / ("qkv_test_" + std::to_string(::getpid()) + "_" + name))
                .string()) {}
  ~temp_file() { std::remove(path.c_str()); }
  void write(const std::string& bytes) const {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

// a file from a header text and data bytes, the way the format lays them out
std::string file_from(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string out;
  for (float f : v) {
    const auto u = std::bit_cast<std::uint32_t>(f);
    for (int i = 0; i < 4; ++i) out += static_cast<char>((u >> (8 * i)) & 0xFF);
  }
  return out;
}

}  // namespace

TEST_CASE("a file laid out by hand as the format specifies reads back") {
  // header length 8 bytes LE, then the JSON, then two F32: 1.0 = 0x3F800000, -2.5 = 0xC0200000
  const std::string bytes =
      file_from(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                std::string("\x00\x00\x80\x3f\x00\x00\x20\xc0", 8));
  const auto f = safetensors_file::from_bytes(bytes);
  REQUIRE(f.tensors().size() == 1);
  CHECK(f.info("a").shape == std::vector<std::uint64_t>{2});
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.read<float>("a") == std::vector<float>{1.0f, -2.5f});
  CHECK(f.read<double>("a") == std::vector<double>{1.0, -2.5});
}

TEST_CASE("half to float is exact and float to half rounds every half back to itself") {
  // 1.0 = 0x3C00, -2 = 0xC000, 65504 = 0x7BFF (largest), 2^-24 = 0x0001 (smallest subnormal),
  // 2^-14 = 0x0400 (smallest normal)
  CHECK(half_bits_to_float(0x3C00) == 1.0f);
  CHECK(half_bits_to_float(0xC000) == -2.0f);
  CHECK(half_bits_to_float(0x7BFF) == 65504.0f);
  CHECK(half_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_bits_to_float(0x0400) == std::ldexp(1.0f, -14));
  CHECK(std::isinf(half_bits_to_float(0x7C00)));
  CHECK(std::isnan(half_bits_to_float(0x7E00)));
  int mismatches = 0;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_bits_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    if (float_to_half_bits(f) != h) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("float to half rounds to nearest, ties to even, and overflows to infinity") {
  // 1 + 2^-11 is halfway between 1 (0x3C00, even) and 1 + 2^-10 (0x3C01): ties to even -> 0x3C00
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);
  // 1 + 3*2^-11 is halfway between 0x3C01 (odd) and 0x3C02 (even) -> 0x3C02
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  // 65519 rounds down to 65504; 65520 is halfway to 65536 (inf) and 0x7BFF is odd -> inf
  CHECK(float_to_half_bits(65519.0f) == 0x7BFF);
  CHECK(float_to_half_bits(65520.0f) == 0x7C00);
  CHECK(float_to_half_bits(-1e9f) == 0xFC00);
  // 2^-25 is halfway between 0 and 2^-24 (odd): ties to even -> 0; just above it -> 0x0001
  CHECK(float_to_half_bits(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(float_to_half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  // 1.5 * 2^-24 is halfway between 0x0001 (odd) and 0x0002 -> 0x0002
  CHECK(float_to_half_bits(1.5f * std::ldexp(1.0f, -24)) == 0x0002);
}

TEST_CASE("bfloat16 keeps the top 16 bits of a float, rounded to nearest even") {
  CHECK(bfloat16_bits_to_float(0x3F80) == 1.0f);
  // 1 + 2^-8 is halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81) -> 0x3F80
  CHECK(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);
  // 1 + 3*2^-8 is halfway between 0x3F81 (odd) and 0x3F82 -> 0x3F82
  CHECK(float_to_bfloat16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);
  CHECK(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("tensors written in F32, F16, BF16 and F64 read back through a file") {
  const std::vector<float> w = {0.5f, -1.25f, 3.0f, 1e-3f, 0.1f, -7.75f};
  const std::vector<double> d = {0.1, -2.0, 1e300};
  temp_file file("roundtrip.safetensors");
  write_safetensors(
      file.path,
      {make_safetensors_tensor("w32", {2, 3}, w), make_safetensors_tensor("w16", {2, 3}, w, "F16"),
       make_safetensors_tensor("wbf", {3, 2}, w, "BF16"), make_safetensors_tensor("d", {3}, d),
       make_safetensors_tensor("empty", {0, 4}, std::vector<float>{})},
      {{"source", "qkv test"}});
  const auto f = safetensors_file::open(file.path);
  CHECK(f.tensors().size() == 5);
  CHECK(f.metadata().at("source") == "qkv test");
  CHECK(f.read<float>("w32") == w);
  CHECK(f.read<double>("d") == d);
  CHECK(f.read<float>("empty").empty());
  const auto h = f.read<float>("w16");
  const auto b = f.read<float>("wbf");
  REQUIRE(h.size() == w.size());
  REQUIRE(b.size() == w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    // what the writer stored is the nearest half / bfloat16: read gives exactly that back
    CHECK(h[i] == half_bits_to_float(float_to_half_bits(w[i])));
    CHECK(b[i] == bfloat16_bits_to_float(float_to_bfloat16_bits(w[i])));
    // a half keeps 11 significant bits: relative error <= 2^-11 (normal range)
    CHECK(std::abs(h[i] - w[i]) <= std::abs(w[i]) * std::ldexp(1.0f, -11));
    // a bfloat16 keeps 8: relative error <= 2^-8
    CHECK(std::abs(b[i] - w[i]) <= std::abs(w[i]) * std::ldexp(1.0f, -8));
  }
  // the data starts at a multiple of 8 bytes
  CHECK(std::filesystem::file_size(file.path) == f.file_size());
}

TEST_CASE("rows of a large embedding table are read without reading the rest") {
  // a 3000 x 16 table where element (r, c) = r + c / 100
  const std::uint64_t rows = 3000, cols = 16;
  std::vector<float> table(rows * cols);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t c = 0; c < cols; ++c)
      table[r * cols + c] = static_cast<float>(r) + static_cast<float>(c) / 100.0f;
  temp_file file("rows.safetensors");
  write_safetensors(file.path, {make_safetensors_tensor("bias", {4}, std::vector<float>{1, 2, 3, 4}),
                                make_safetensors_tensor("word_embeddings.weight", {rows, cols}, table)});
  const auto f = safetensors_file::open(file.path);
  const auto got = f.read_rows<float>("word_embeddings.weight", 2292, 3);
  REQUIRE(got.size() == 3 * cols);
  for (std::uint64_t r = 0; r < 3; ++r)
    for (std::uint64_t c = 0; c < cols; ++c) CHECK(got[r * cols + c] == table[(2292 + r) * cols + c]);
  CHECK(f.read_rows<double>("word_embeddings.weight", 2999, 1).front() == 2999.0);
  CHECK(f.read_rows<float>("word_embeddings.weight", 3000, 0).empty());
  CHECK_THROWS_WITH_AS((void)f.read_rows<float>("word_embeddings.weight", 2999, 2),
                       doctest::Contains("has 3000 rows; rows 2999..2999+2 are out of range"),
                       safetensors_error);
  CHECK_THROWS_WITH_AS(
      (void)f.read_rows<float>("word_embeddings.weight", 1, std::numeric_limits<std::uint64_t>::max()),
      doctest::Contains("out of range"), safetensors_error);
  CHECK_THROWS_WITH_AS((void)f.read<float>("missing"), doctest::Contains("no tensor named 'missing'"),
                       safetensors_error);
}

TEST_CASE("malformed files give a clear error naming the problem") {
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = f32_bytes({1.0f, 2.0f});
  auto error_of = [](const std::string& bytes) -> std::string {
    try {
      (void)safetensors_file::from_bytes(bytes, "m.safetensors");
    } catch (const safetensors_error& e) { return e.what(); }
    return "no error";
  };
  SUBCASE("a file too short for the header length") {
    CHECK(error_of(std::string("\x05\x00\x00", 3)) ==
          "m.safetensors: the file has 3 bytes; a safetensors file starts with an 8-byte header length");
  }
  SUBCASE("a header length past the end of the file") {
    std::string bytes = file_from(good_header, data);
    bytes[0] = static_cast<char>(0xFF);
    bytes[7] = static_cast<char>(0x7F);  // 0x7F000000000000FF
    CHECK(error_of(bytes).find("the header length 9151314442816848127 goes past the end of the file") !=
          std::string::npos);
  }
  SUBCASE("a header that is not JSON, or not an object") {
    CHECK(error_of(file_from("{not json}", "")).find("the header is not valid JSON") != std::string::npos);
    CHECK(error_of(file_from("[1, 2]", "")) == "m.safetensors: the header is not a JSON object");
  }
  SUBCASE("offsets out of range") {
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data)) ==
          "m.safetensors: tensor 'a': data_offsets [4,12] go past the end of the data (8 bytes): "
          "the file is truncated or the offsets are wrong");
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data)) ==
          "m.safetensors: tensor 'a': data_offsets [8,0] end before they begin");
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-1,8]}})", data)) ==
          "m.safetensors: tensor 'a': data_offsets [-1,8] are not byte offsets");
    CHECK(error_of(
              file_from(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", data))
              .find("go past the end of the data") != std::string::npos);
  }
  SUBCASE("overlapping tensors") {
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             data)) == "m.safetensors: tensors 'a' and 'b' overlap (bytes 0..8 and 4..8)");
  }
  SUBCASE("an unknown dtype") {
    CHECK(error_of(file_from(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", data)) ==
          "m.safetensors: tensor 'a' has an unknown dtype 'F31'");
  }
  SUBCASE("a shape that does not match the byte count") {
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data)) ==
          "m.safetensors: tensor 'a': the shape [3] of F32 needs 12 bytes, but data_offsets [0,8] hold 8");
    // 2^32 * 2^32 elements overflow 64 bits
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                             data))
              .find("has too many elements") != std::string::npos);
    // 2^62 elements of 4 bytes overflow 64 bits
    CHECK(error_of(
              file_from(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})", data))
              .find("needs too many bytes") != std::string::npos);
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data)) ==
          "m.safetensors: tensor 'a': the shape [-2] is not a list of sizes");
  }
  SUBCASE("truncated data") {
    const std::string whole = file_from(good_header, data);
    CHECK(error_of(whole.substr(0, whole.size() - 1)).find("go past the end of the data (7 bytes)") !=
          std::string::npos);
    CHECK(error_of(whole.substr(0, 8 + good_header.size() - 1)).find("goes past the end of the file") !=
          std::string::npos);
  }
  SUBCASE("a name given twice, missing fields, bad metadata") {
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                             data)) == "m.safetensors: the header names 'a' twice");
    CHECK(error_of(file_from(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", data)) ==
          "m.safetensors: tensor 'a' has no dtype string");
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", data)) ==
          "m.safetensors: tensor 'a' has no shape array");
    CHECK(error_of(file_from(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data)) ==
          "m.safetensors: tensor 'a' has no data_offsets [begin, end]");
    CHECK(error_of(file_from(R"({"__metadata__":{"k":1}})", "")) ==
          "m.safetensors: __metadata__['k'] is not a string");
  }
  SUBCASE("a missing file") {
    CHECK_THROWS_WITH_AS((void)safetensors_file::open("/nonexistent/model.safetensors"),
                         "cannot open '/nonexistent/model.safetensors'", safetensors_error);
  }
}

TEST_CASE("the writer refuses tensors it cannot describe") {
  CHECK_THROWS_WITH_AS((void)safetensors_bytes({make_safetensors_tensor("a", {3}, std::vector<float>{1, 2})}),
                       "tensor 'a': its shape needs 12 bytes of F32, it has 8", safetensors_error);
  CHECK_THROWS_AS((void)safetensors_bytes({make_safetensors_tensor("a", {1}, std::vector<float>{1}),
                                           make_safetensors_tensor("a", {1}, std::vector<float>{1})}),
                  safetensors_error);
  CHECK_THROWS_AS((void)make_safetensors_tensor("a", {1}, std::vector<float>{1}, "I8"), safetensors_error);
}
