// static proofs of core/masks.hpp, sequence.hpp and positional.hpp: if this file compiles, they hold.
#include <type_traits>

#include <qkv/core/check.hpp>
#include <qkv/core/masks.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/positional.hpp>
#include <qkv/core/sequence.hpp>

namespace {

using qkv::matrix;
namespace check = qkv::check;

// --- masks ------------------------------------------------------------------------------------

// causal, 3 tokens: the lower triangle
static_assert(qkv::causal_mask<3>() ==
              matrix<bool, 3, 3>{{{true, false, false}, {true, true, false}, {true, true, true}}});
// key padding [false, false, true]: no query sees key 2
constexpr auto kp = qkv::key_padding_allowed<3, 3>(matrix<bool, 1, 3>{{{false, false, true}}});
static_assert(kp == matrix<bool, 3, 3>{{{true, true, false}, {true, true, false}, {true, true, false}}});
// both: causal and padding
static_assert(qkv::both(kp, qkv::causal_mask<3>()) ==
              matrix<bool, 3, 3>{{{true, false, false}, {true, true, false}, {true, true, false}}});
// a query whose every key is padding has no allowed key
static_assert(qkv::fully_masked_rows(qkv::key_padding_allowed<2, 2>(matrix<bool, 1, 2>{{{true, true}}})) ==
              matrix<bool, 2, 1>{{{true}, {true}}});

// --- truncation, padding, embedding -----------------------------------------------------------

// [5, 6, 7] to length 5 with pad id 0: [5, 6, 7, 0, 0], padding [f, f, f, t, t]
constexpr auto padded = qkv::fit_to_length<5>(matrix<int, 1, 3>{{{5, 6, 7}}}, 0);
static_assert(padded.ids == matrix<int, 1, 5>{{{5, 6, 7, 0, 0}}} && padded.length == 3 && padded.truncated == 0);
static_assert(padded.padding == matrix<bool, 1, 5>{{{false, false, false, true, true}}});
// to length 2: [5, 6], one token cut, no padding
constexpr auto cut = qkv::fit_to_length<2>(matrix<int, 1, 3>{{{5, 6, 7}}}, 0);
static_assert(cut.ids == matrix<int, 1, 2>{{{5, 6}}} && cut.truncated == 1 && cut.padding == matrix<bool, 1, 2>{});
// embedding rows 2, 0, 2 of a 3 x 2 table
constexpr matrix<double, 3, 2> table{{{0, 1}, {2, 3}, {4, 5}}};
static_assert(qkv::embed(table, matrix<int, 1, 3>{{{2, 0, 2}}}) == matrix<double, 3, 2>{{{4, 5}, {0, 1}, {4, 5}}});
// an id outside the table is not a constant expression
template <int Id>
concept embeddable = requires { typename std::bool_constant<(qkv::embed(table, matrix<int, 1, 1>{{{Id}}})(0, 0) >= 0)>; };
static_assert(embeddable<2> && !embeddable<3> && !embeddable<-1>);

// --- positional encoding ----------------------------------------------------------------------

// position 0: sin 0 = 0 in even dimensions, cos 0 = 1 in odd ones
static_assert(qkv::sinusoidal_positional_encoding<double, 1, 4>() == matrix<double, 1, 4>{{{0, 1, 0, 1}}});
// position 1, d = 4: frequencies 10000^0 = 1 and 10000^(-2/4) = 0.01:
//   [sin 1, cos 1, sin 0.01, cos 0.01] = [0.8414709848078965, 0.5403023058681398, 0.009999833334166664, 0.9999500004166653]
constexpr auto pe = qkv::sinusoidal_positional_encoding<double, 2, 4>();
static_assert(qkv::proven<check::near(qkv::row(pe, 1), matrix<double, 1, 4>{{{0.8414709848078965, 0.5403023058681398,
                                                                              0.009999833334166664, 0.9999500004166653}}}, 2e-16)>);
// from position 1: the same row as the second row of the encoding from 0
static_assert(qkv::sinusoidal_positional_encoding<double, 1, 4>(1) == qkv::row(pe, 1));
// every pair is a point on the unit circle: sin^2 + cos^2 = 1
static_assert(qkv::proven<check::near(pe(1, 2) * pe(1, 2) + pe(1, 3) * pe(1, 3), 1.0, 4e-16)>);

}  // namespace
