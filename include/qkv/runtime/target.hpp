// target.hpp: what the runtime path is compiled for, and a warning when that is not what its
// kernels are written for.
//
// The kernels (gemm.hpp, softmax.hpp, attention.hpp...) are written on std::experimental::simd's
// native_simd, whose width libstdc++ takes from the translation unit's macros (__AVX2__,
// __AVX512F__...): 8 floats with AVX2, 16 with AVX-512, 4 with the SSE2 that x86-64 compilers
// target without an -march. They cannot pick an instruction set at run time: inside a function
// marked [[gnu::target("avx2,fma")]] native_simd<float> is still 4 lanes and even an 8-lane
// fixed_size_simd compiles to two 128-bit halves, with g++ 12 and clang++-16 (docs/design.md,
// "Instruction sets"). So the instruction set is the compiler's flag, and qkv's packages carry it:
// pkg-config's qkv-runtime, CMake's qkv::runtime, meson's qkv_runtime_dep (-march=x86-64-v3:
// AVX2 + FMA by default).
//
// Compiled for x86-64 without AVX2 + FMA, this header warns once per translation unit: the code
// is correct but several times slower. Define QKV_RUNTIME_PORTABLE to say that is what you want
// (the packages do with simd_arch=none); other CPU families take their compiler's baseline.
#pragma once

namespace qkv::runtime {

/// the instruction set the kernels were compiled for, as docs/performance.md names the builds
inline constexpr const char* instruction_set =
#if defined(__AVX512F__)
    "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
    "avx2+fma";
#elif defined(__x86_64__) || defined(_M_X64)
    "sse2";
#else
    "baseline";
#endif

}  // namespace qkv::runtime

#if (defined(__x86_64__) || defined(_M_X64)) && !(defined(__AVX2__) && defined(__FMA__)) && \
    !defined(QKV_RUNTIME_PORTABLE)
#if defined(__clang__)
// clang's "#pragma GCC warning" is not made an error by -Werror; its #warning is (and is a C++23
// extension under -Wpedantic, silenced here), so both compilers treat the warning alike. The
// message is written out twice: g++'s pragma takes a string literal, not a macro.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpedantic"
#warning \
    "qkv/runtime/ is compiled without AVX2+FMA: its SIMD kernels fall back to SSE2, several times slower. Use the packages (pkg-config qkv-runtime, CMake qkv::runtime, meson qkv_runtime_dep) or -march=x86-64-v3 / -march=native; define QKV_RUNTIME_PORTABLE to keep SSE2 on purpose."
#pragma clang diagnostic pop
#else
#pragma GCC warning \
    "qkv/runtime/ is compiled without AVX2+FMA: its SIMD kernels fall back to SSE2, several times slower. Use the packages (pkg-config qkv-runtime, CMake qkv::runtime, meson qkv_runtime_dep) or -march=x86-64-v3 / -march=native; define QKV_RUNTIME_PORTABLE to keep SSE2 on purpose."
#endif
#endif
