// extras.cpp: what a project that uses qkv's optional layers compiles, through the packages that
// declare what each needs (docs/design.md, "Packages"):
//   runtime/ with qkv-runtime.pc / qkv::runtime / qkv_runtime_dep: -march (AVX2 + FMA) and threads;
//     built with -Werror, so runtime/target.hpp's warning about a missing -march fails the build;
//     the installed packages also link libqkv_kernels (QKV_RUNTIME_KERNELS: the float kernels
//     chosen at run time, kernels.hpp), the subproject stays header-only
//   io/      with qkv-io.pc / qkv::io / qkv_io_dep: nlohmann-json
//   exact/   with dependency('boost') / qkv::exact / qkv_exact_dep: Boost.Multiprecision's headers
// Built by the three projects beside it (pkg-config, meson subproject, CMake find_package).
#include <cstdio>
#include <string_view>

#include <qkv/exact/fixed_width.hpp>
#include <qkv/io/json.hpp>
#include <qkv/runtime/gemm.hpp>

namespace {

// exact/: 1/3 + 1/6 = 2/6 + 1/6 = 3/6 = 1/2, proven by the compiler
static_assert(qkv::exact::q128(1, 3) + qkv::exact::q128(1, 6) == qkv::exact::q128(1, 2));

}  // namespace

int main() {
  int bad = 0;
  // runtime/: tutorial 000's keys, x (3, 4) @ w_key (4, 3), on the SIMD kernels. Small integers:
  // every product and partial sum is an integer below 2^24, exact in float, fused or not.
  // [1,0,1,0] -> [0+0+0+0, 0+0+1+0, 1+0+0+0] = [0, 1, 1]; [0,2,0,2] -> [0+2+0+2, 0+2+0+2, 0] =
  // [4, 4, 0]; [1,1,1,1] -> [0+1+0+1, 0+1+1+1, 1+0+0+0] = [2, 3, 1]
  const qkv::runtime::matrixf x{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}};
  const qkv::runtime::matrixf w_key{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}};
  const qkv::runtime::matrixf want{{0, 1, 1}, {4, 4, 0}, {2, 3, 1}};
  const auto keys = qkv::runtime::matrix_product(x, w_key);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) bad += keys(i, j) != want(i, j);
  // the same product on w_key packed once: with libqkv_kernels, packed and multiplied by the
  // kernels it chose (the same integers)
  const qkv::runtime::packed_operand<float> packed(w_key.view());
  qkv::runtime::matrixf keys_packed(3, 3);
  qkv::runtime::matrix_product<float>(x.view(), packed, keys_packed.view());
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) bad += keys_packed(i, j) != want(i, j);
#ifdef QKV_RUNTIME_KERNELS  // the package linked libqkv_kernels: its kernels ran, not this file's
  if (qkv::runtime::kernels_in_use() == qkv::runtime::kernel_set::header_only) {
    std::printf("qkv extras: QKV_RUNTIME_KERNELS is defined but the kernels are header-only\n");
    ++bad;
  }
#endif
  // the package's -march reached this file: AVX2 + FMA or wider, not the SSE2 fallback
#ifndef QKV_RUNTIME_PORTABLE  // a qkv configured with simd_arch=none carries no -march, on purpose
  const std::string_view isa = qkv::runtime::instruction_set;
  if (isa == "sse2") {
    std::printf("qkv extras: runtime/ was compiled for SSE2: the package did not carry its -march\n");
    ++bad;
  }
#endif
  // io/: a document through nlohmann-json, and a malformed one named in the error
  const auto doc = qkv::io::json_document::parse(R"({"rows": 3})", "case.json");
  bad += doc.json().at("rows").get<int>() != 3;
  try {
    (void)qkv::io::json_document::parse("{", "broken.json");
    ++bad;
  } catch (const qkv::io::json_error& e) {
    bad += std::string_view(e.what()).find("broken.json: not valid JSON") != 0;
  }
  std::printf("qkv extras: runtime/ (%s, kernels %s: %s), io/ and exact/ %s\n", qkv::runtime::instruction_set,
              qkv::runtime::kernels_name(qkv::runtime::kernels_in_use()), qkv::runtime::kernels_reason(),
              bad == 0 ? "work" : "FAILED");
  return bad == 0 ? 0 : 1;
}
