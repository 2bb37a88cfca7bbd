// runtime tests of core/text.hpp: the dictionary built while the program runs, and its errors.
#include <doctest/doctest.h>

#include <array>
#include <stdexcept>
#include <string>

#include <qkv/core/text.hpp>

TEST_CASE("tutorial 001's sentence gives the dictionary and ids PyTorch's notebook printed") {
  // the reference file's dictionary: {'Life': 0, 'dessert': 1, 'eat': 2, 'first': 3, 'is': 4, 'short': 5}
  const std::string sentence = "Life is short, eat dessert first";
  const qkv::text::dictionary<64> dc{sentence};
  REQUIRE(dc.size() == 6);
  const char* expected[] = {"Life", "dessert", "eat", "first", "is", "short"};
  for (std::size_t i = 0; i < 6; ++i) CHECK(dc.word(i) == expected[i]);
  CHECK(dc.ids<6>() == std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
}

TEST_CASE("unknown words, wrong counts and long sentences are refused") {
  const qkv::text::dictionary<64> dc{"Life is short, eat dessert first"};
  CHECK_THROWS_AS((void)dc.id("cake"), std::out_of_range);
  CHECK_THROWS_AS((void)dc.word(6), std::out_of_range);
  CHECK_THROWS_AS((void)dc.ids<5>(), std::length_error);
  CHECK_THROWS_AS((void)dc.encode<2>("eat cake"), std::out_of_range);
  CHECK_THROWS_AS((void)dc.encode<1>("eat dessert"), std::length_error);
  CHECK_THROWS_AS((void)qkv::text::dictionary<4>{"too long"}, std::length_error);
}

TEST_CASE("an empty or all-comma sentence has no words") {
  const qkv::text::dictionary<8> empty{" , ,  "};
  CHECK(empty.size() == 0);
  CHECK(empty.token_count() == 0);
  CHECK(!empty.contains(""));
}
