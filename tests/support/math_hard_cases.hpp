// math_hard_cases.hpp: arguments whose log, sin or cos lie extremely close to a rounding
// boundary (a midpoint between two doubles), the literature's hard-to-round cases. A function
// that is correctly rounded only "most of the time" gets these wrong; qkv's must take its
// accurate path on them and still round correctly (tests/core/math_cr_test.cpp checks them
// against Boost.Multiprecision, tests/static/math_test.cpp in constant evaluation).
//
// Sources:
//  - log: V. Lefèvre and J.-M. Muller, "Worst cases for correct rounding of the elementary
//    functions in double precision" (ARITH 15, 2001), the case x = 0x1.62a88613629b6p+678, whose
//    logarithm has 65 identical bits after the 53rd; the others are a sample of Lefèvre's list
//    of hard-to-round cases for exp and log (https://www.vinc17.net/research/testlibm/,
//    hrcases-explog), as the CORE-MATH project's log test uses them.
//  - sin and cos: a sample of Lefèvre's testlibm data (update of 2020-11-27), the arguments in
//    [0, pi] with 46 to 59 identical bits after the rounding bit of sin or cos (same page).
#pragma once

namespace qkv_test {

inline constexpr double log_hard_cases[] = {
    0x1.62a88613629b6p+678, 0x1.a6ae5142326b5p+0,  0x1.a6ba95b1520f9p+0,  0x1.a702b2ce91b3p+0,
    0x1.a775c6c1d8d3ep+0,   0x1.b072ab04ee9bfp+0,  0x1.c877cba59d0acp+0,  0x1.bbfff9457d5c3p+0,
    0x1.1e852e6951306p+1,   0x1.dafdb40362537p+0,  0x1.efcbe699decc2p+0,  0x1.000976581ce4ep+1,
    0x1.24dea21900258p+1,   0x1.2c86090791524p+1,  0x1.547de187239f2p+1,  0x1.cb37a42d3e479p+0,
    0x1.5b2ac0ee30555p+1,   0x1.967e2d739876bp+1,  0x1.ffcd1f1e0c16fp+1,  0x1.006057e9892f7p+2,
    0x1.2d26e1ebebee6p+2,   0x1.45ac1494a8454p+2,  0x1.ca57761873fp+1,    0x1.09d0ba34eaf3cp+2,
    0x1.94a11eb4a79dfp+2,   0x1.39e3e05fe5f35p+3,  0x1.0af4fba7063b8p+4,  0x1.84a5538257275p+4,
    0x1.0bb1747d46314p+5,   0x1.186e96b6dca56p+6,  0x1.15956b273c365p+8,  0x1.cc9952467a0b3p+8,
    0x1.38a3dbb5a6a4fp+10,  0x1.6f6cc943605c5p+11, 0x1.a455a70c31d8p+13,  0x1.467cb238723a1p+15,
    0x1.561031d4db97cp+16,  0x1.7d822b508bb3bp+20, 0x1.5106c15d1fc3fp+22, 0x1.70945ecdc0194p+28,
    0x1.187473f1019f6p+31,  0x1.8e27f4f0e6c74p+34, 0x1.f9bd207cafe2fp+38, 0x1.a6004162f2b8cp+45,
    0x1.eb85cf7cd78a1p+3};

inline constexpr double sin_cos_hard_cases[] = {
    0x1.005023d32fee5p+1, 0x1.00874a5f9fc33p-13, 0x1.0192deafac33fp+0, 0x1.034c2318b3f2dp+0,
    0x1.039d88c480fccp-22, 0x1.04394261cffa6p-1, 0x1.043e268ba402ap+1, 0x1.057e5c72ad274p+0,
    0x1.06800e629d672p-23, 0x1.06800e629d673p-23, 0x1.07d5978b896fcp+0, 0x1.07edc73037d32p+1,
    0x1.08c495b034a31p+0, 0x1.093026e62d889p+1, 0x1.0aedf4dd4ccf8p-2, 0x1.0ba1b997d2e32p+0,
    0x1.0d80ff9981295p+0, 0x1.0e9f8bb095163p+1, 0x1.104614176463ep+0, 0x1.1065078d33361p+1,
    0x1.10b4048d92a67p+1, 0x1.1398b2271821p+0, 0x1.164149539c81dp+1, 0x1.184a0aa58191dp-24,
    0x1.184a0aa58192p-24, 0x1.1da5d5a23306dp+0, 0x1.1fa6b462b1c81p+1, 0x1.23f40dccdef72p+0,
    0x1.2645db00c9b84p+1, 0x1.273a233829bc6p+0, 0x1.276d5c5c9df2cp+1, 0x1.29b798b1566fcp+1,
    0x1.2daf8e028c6c9p+0, 0x1.2e8439fd922dep+1, 0x1.2ebea3f228638p+1, 0x1.2f2cc9bd434fbp+1,
    0x1.306705e372fb7p+1, 0x1.30c7efbee12acp-24, 0x1.31a22ec73dd62p+1, 0x1.34b19761f1f4bp+0,
    0x1.36bd8001bb569p+1, 0x1.3aff240e7a743p+1, 0x1.3b727649b9393p+0, 0x1.407f8eb75c76p+1,
    0x1.45dd7c26e54b9p-24, 0x1.46552b86d2836p+1, 0x1.49a4334fee0f3p+1, 0x1.4bcc0c8872f76p+1,
    0x1.4e644e05f6f29p+1, 0x1.5473f39abf1e6p+0, 0x1.553151fbcd204p+0, 0x1.55b92c74d29cbp+1,
    0x1.57006c1b011c8p+0, 0x1.57d2baabad457p+1, 0x1.58868e3115187p-24, 0x1.5c68997fe1bdap+0,
    0x1.5d9b876341713p+1, 0x1.5e5fe5d033da6p+0, 0x1.63ee34129c226p-1, 0x1.6417b6cbed906p-1,
    0x1.65ddbedbb99d2p-1, 0x1.695b9b149a438p-24, 0x1.6a8730cd13abcp-1, 0x1.6b750f7a7c116p-2,
    // small arguments from the same data (near 2^-24, where cos x = 1 - x^2/2 + ... is close to a
    // midpoint below 1)
    0x1.e768d399dc47fp-25, 0x1.efbdeb14f4ecbp-25, 0x1.f7efbeb8d4f03p-25, 0x1.ffffffffffff2p-25,
    0x1.03f81f636b805p-24, 0x1.07e0f66afedp-24, 0x1.0bbb307acafd5p-24, 0x1.0f876ccdf6cd3p-24,
    0x1.13463fa370148p-24, 0x1.16f8334644df3p-24, 0x1.1a9dc8f6df0fep-24, 0x1.1e3779b97f4a2p-24,
    0x1.21c5b70d9f81ep-24, 0x1.2548eb9151e8p-24, 0x1.28c17b933782fp-24, 0x1.2c2fc595456a2p-24,
    0x1.3988e1409212ap-24, 0x1.3fffffffffffbp-24, 0x1.6a09e667f3bc9p-24, 0x1.99ccc999ffefep-24};

}  // namespace qkv_test
