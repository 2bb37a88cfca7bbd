// kernels.hpp: which compiled kernels the float entry points run, chosen at run time.
//
// std::experimental::simd takes its width from the translation unit's -march (docs/design.md,
// "Instruction sets"), so header-only code runs the instruction set it was compiled for. The
// library qkv_kernels (src/, built and installed by meson; linked by qkv-runtime.pc, CMake's
// qkv::runtime and the qkv tool) holds the float entry points that dominate the time compiled
// twice, for x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512), and picks one once per process:
// AVX-512 when the CPU has avx512f, bw, dq and vl, else AVX2. A program compiled with
// -DQKV_RUNTIME_KERNELS (the packages add it) and linked with -lqkv_kernels forwards to it:
//
//   multihead_attention<float> (all three overloads), attention<float> and self_attention<float>
//   (attention_weights and packed_attention_weights), linear<float> and matrix_product<float>
//   on a packed_operand, packed_operand<float>'s packing (its panels are as wide as the
//   kernels' registers, so they are packed by the kernels that read them), and decode_attend
//   (decode.hpp) on float, bfloat16 and float16 caches.
//
// Every other function, and every T but float, stays header-only. Without QKV_RUNTIME_KERNELS
// (the default for a program that includes the headers alone) nothing forwards and
// kernels_in_use() is kernel_set::header_only. Results: the avx2 kernels give the bits of a
// header-only -march=x86-64-v3 build, the avx512 kernels those of a header-only
// -march=x86-64-v4 build (tests/kernels/). QKV_KERNELS=avx2 in the environment, or
// force_kernels(kernel_set::avx2) before the first call, keeps AVX2 on an AVX-512 CPU.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace qkv::runtime {

template <class T>
struct matrix_view;
template <class T>
struct attention_options;
template <class T>
struct multihead_result;
template <class T>
struct attention_weights;
template <class T>
struct packed_attention_weights;
template <class T>
class packed_operand;
template <class T>
struct epilogue;
class thread_pool;
namespace detail {
struct decode_kernels;  // decode.hpp: decode_attend for each storage type
}

/// the kernels a float entry point runs
enum class kernel_set {
  header_only,  // this program's own, compiled for its -march (runtime/target.hpp's instruction_set)
  avx2,         // qkv_kernels built for x86-64-v3: AVX2 + FMA, 8 floats per register
  avx512,       // qkv_kernels built for x86-64-v4: AVX-512 F/BW/DQ/VL, 16 floats per register
};

namespace detail {

/// the library's table of entry points: one per target, the same layout in each (every type it
/// names has a layout that does not depend on the target; each object checks the sizes below)
struct kernel_table {
  unsigned abi;  // kernel_abi: a table of another version is not used
  kernel_set set;
  std::size_t sizes[6];  // attention_options<float>, multihead_result<float>,
                         // packed_operand<float>, matrix_view<float>, kv_cache<float>,
                         // cache_attention_options: checked by the loader
  void (*multihead_into)(const matrix_view<const float>& q, const matrix_view<const float>& k,
                         const matrix_view<const float>& v, const attention_options<float>& opt,
                         multihead_result<float>& r, thread_pool* pool);
  void (*multihead_out)(const matrix_view<const float>& q, const matrix_view<const float>& k,
                        const matrix_view<const float>& v, const matrix_view<float>& out,
                        const attention_options<float>& opt, thread_pool* pool);
  void (*multihead_heads_first)(const matrix_view<const float>& q, const matrix_view<const float>& k,
                                const matrix_view<const float>& v, const matrix_view<float>& out,
                                const attention_options<float>& opt, thread_pool* pool);
  void (*attention)(const matrix_view<const float>& x, const matrix_view<const float>& context,
                    const attention_weights<float>& w, const attention_options<float>& opt,
                    multihead_result<float>& r, thread_pool* pool);
  void (*attention_packed)(const matrix_view<const float>& x, const matrix_view<const float>& context,
                           const packed_attention_weights<float>& w, const attention_options<float>& opt,
                           multihead_result<float>& r, thread_pool* pool);
  void (*pack)(const matrix_view<const float>& b, packed_operand<float>& out);
  void (*product_packed)(const matrix_view<const float>& a, const packed_operand<float>& b,
                         const matrix_view<float>& c, const epilogue<float>& e, thread_pool* pool);
  const decode_kernels* decode;  // decode_attend on float, bfloat16 and float16 caches
};

/// the table's version: raised whenever kernel_table or a type it passes changes, so that a
/// program and a libqkv_kernels of different versions refuse each other (kernels())
inline constexpr unsigned kernel_abi = 2;

}  // namespace detail

}  // namespace qkv::runtime

// what libqkv_kernels exports (C names, default visibility; everything else in it is hidden)
extern "C" {
/// the table in use, chosen on the first call (QKV_KERNELS, force_kernels, the CPU)
[[gnu::visibility("default")]] const qkv::runtime::detail::kernel_table* qkv_kernels_table() noexcept;
/// ask for a set before the first call; false when the choice was already made (or set is
/// header_only, which a linked program cannot choose)
[[gnu::visibility("default")]] bool qkv_kernels_force(qkv::runtime::kernel_set set) noexcept;
/// why the set in use was chosen ("cpu has avx512f/bw/dq/vl", "QKV_KERNELS=avx2", ...)
[[gnu::visibility("default")]] const char* qkv_kernels_reason() noexcept;
}

namespace qkv::runtime {

#if defined(QKV_RUNTIME_KERNELS) && !defined(QKV_KERNELS_TARGET)
inline constexpr bool kernels_linked = true;  // this program forwards to libqkv_kernels
#else
inline constexpr bool kernels_linked = false;  // header-only (or inside libqkv_kernels itself)
#endif

namespace detail {
/// whether an entry point on T forwards to the library's table
template <class T>
inline constexpr bool forwards = kernels_linked && std::is_same_v<T, float>;
/// whether decode_attend on a cache of S forwards (every storage type does)
template <class S>
inline constexpr bool forwards_storage = kernels_linked && sizeof(S) > 0;
/// the table (only called where forwards<T>: a header-only program never references it).
/// @throws std::runtime_error when the library's table is of another version than these headers
[[nodiscard]] inline const kernel_table& kernels() {
  const kernel_table* t = qkv_kernels_table();
  if (t->abi != kernel_abi)
    throw std::runtime_error("libqkv_kernels has table version " + std::to_string(t->abi) +
                             " but these qkv headers want " + std::to_string(kernel_abi) +
                             ": link the libqkv_kernels installed with these headers");
  return *t;
}
}  // namespace detail

/// the kernels the float entry points run: header_only without the library; with it, the set
/// chosen once per process (choosing it now if no call has yet)
[[nodiscard]] inline kernel_set kernels_in_use() {
#if defined(QKV_RUNTIME_KERNELS) && !defined(QKV_KERNELS_TARGET)
  return detail::kernels().set;
#else
  return kernel_set::header_only;
#endif
}

/// @brief use `set` (avx2, or avx512 where the CPU has it) for every later call; only before the
/// first call of a forwarded entry point (or of kernels_in_use): returns whether it took effect.
/// A header-only program has one set: true for header_only, false otherwise. QKV_KERNELS=avx2
/// in the environment does the same from outside.
inline bool force_kernels(kernel_set set) {
#if defined(QKV_RUNTIME_KERNELS) && !defined(QKV_KERNELS_TARGET)
  return qkv_kernels_force(set);
#else
  return set == kernel_set::header_only;
#endif
}

/// the name of a kernel set: "header-only", "avx2", "avx512"
[[nodiscard]] constexpr const char* kernels_name(kernel_set set) {
  return set == kernel_set::avx512 ? "avx512" : set == kernel_set::avx2 ? "avx2" : "header-only";
}

/// why kernels_in_use() is what it is, in words ("header-only: this program does not link
/// qkv_kernels", "the CPU has avx512f/bw/dq/vl", "QKV_KERNELS=avx2", ...)
[[nodiscard]] inline const char* kernels_reason() {
#if defined(QKV_RUNTIME_KERNELS) && !defined(QKV_KERNELS_TARGET)
  return qkv_kernels_reason();
#else
  return "this program does not link qkv_kernels (compile with -DQKV_RUNTIME_KERNELS and link "
         "-lqkv_kernels, as the packages do)";
#endif
}

}  // namespace qkv::runtime
