// static proofs of core/text.hpp: tutorial 001's dictionary, built by the compiler.
#include <array>
#include <cstddef>
#include <string_view>

#include <qkv/core/text.hpp>

namespace {

using namespace std::string_view_literals;

// 'Life is short, eat dessert first' without its comma: Life is short eat dessert first;
// sorted by code point (upper case first: 'L' = 76 < 'd' = 100 < 'e' = 101 < 'f' < 'i' < 's'):
//   0 Life, 1 dessert, 2 eat, 3 first, 4 is, 5 short
constexpr qkv::text::dictionary dc{"Life is short, eat dessert first"};
static_assert(dc.size() == 6 && dc.token_count() == 6);
static_assert(dc.word(0) == "Life"sv && dc.word(1) == "dessert"sv && dc.word(2) == "eat"sv &&
              dc.word(3) == "first"sv && dc.word(4) == "is"sv && dc.word(5) == "short"sv);
static_assert(dc.id("Life") == 0 && dc.id("short") == 5 && dc.id("first") == 3);
// the comma is gone: "short" is a word, "short," is not
static_assert(dc.contains("short") && !dc.contains("short,") && !dc.contains("life"));
// sentence_int: Life=0 is=4 short=5 eat=2 dessert=1 first=3 -> tensor([0, 4, 5, 2, 1, 3])
static_assert(dc.ids<6>() == std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
static_assert(dc.token(2) == "short"sv);
// no repeats: the tutorial's numbering is the dense one
static_assert(dc.tutorial_id("eat") == dc.id("eat") && dc.tutorial_id("short") == 5);

// another text of the same words, split the same way
static_assert(dc.encode<3>("first, eat dessert") == std::array<std::size_t, 3>{3, 2, 1});

// whitespace runs of every kind separate words; leading and trailing ones make no empty word
constexpr qkv::text::dictionary spaced{"  b\ta\n\nc  "};
static_assert(spaced.size() == 3 && spaced.ids<3>() == std::array<std::size_t, 3>{1, 0, 2});

// repeats: sorted with duplicates "a b b" -> the comprehension says a: 0, b: 2 (b's last copy);
// the dense numbering says a: 0, b: 1
constexpr qkv::text::dictionary repeated{"b a b"};
static_assert(repeated.size() == 2 && repeated.token_count() == 3);
static_assert(repeated.id("b") == 1 && repeated.tutorial_id("b") == 2 && repeated.tutorial_id("a") == 0);
static_assert(repeated.ids<3>() == std::array<std::size_t, 3>{1, 0, 1});

// an unknown word, or the wrong word count, is not a constant expression (it throws)
template <std::size_t N>
concept ids_compile = requires { typename std::integral_constant<std::size_t, dc.ids<N>()[0]>; };
static_assert(ids_compile<6> && !ids_compile<5>);

}  // namespace
