// kernels.cpp: libqkv_kernels' entry points for one target, the float instantiations of the
// runtime headers compiled as they are (header-only code, nothing forwards in here). Built twice
// (meson.build): -DQKV_KERNELS_TARGET=1 (avx2) with -march=x86-64-v3 into libqkv_kernels.so, and
// -DQKV_KERNELS_TARGET=2 (avx512) with -march=x86-64-v4 into libqkv_kernels_avx512.so, each with
// -fvisibility=hidden -fvisibility-inlines-hidden: every inline function and template
// instantiated here stays inside its object, so an AVX-512 copy of, say, std::fill can never be
// the one an AVX2 machine runs. The one exported name is the AVX-512 table (the AVX2 table is
// read by dispatch.cpp inside the same object). docs/design.md, "AVX-512 without flags".
#include <cstddef>
#include <vector>

#include "qkv/runtime/decode.hpp"
#include "qkv/runtime/gemm.hpp"
#include "qkv/runtime/kernels.hpp"
#include "qkv/runtime/multihead.hpp"

#if !defined(QKV_KERNELS_TARGET)
#error "kernels.cpp is compiled with -DQKV_KERNELS_TARGET=1 (avx2) or 2 (avx512) (meson.build)"
#endif
#define QKV_KERNELS_AVX2 1
#define QKV_KERNELS_AVX512 2
#if QKV_KERNELS_TARGET == QKV_KERNELS_AVX512
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) || !defined(__AVX512VL__)
#error "the avx512 kernels need -march=x86-64-v4"
#endif
#define QKV_KERNELS_TABLE qkv_kernels_avx512_table
#define QKV_KERNELS_SET avx512
#else
#if !defined(__AVX2__) || !defined(__FMA__) || defined(__AVX512F__)
#error "the avx2 kernels need -march=x86-64-v3"
#endif
#define QKV_KERNELS_TABLE qkv_kernels_avx2_table
#define QKV_KERNELS_SET avx2
#endif

namespace rt = qkv::runtime;
using view = rt::matrix_view<const float>;
using out_view = rt::matrix_view<float>;

namespace {

void multihead_into(const view& q, const view& k, const view& v, const rt::attention_options<float>& opt,
                    rt::multihead_result<float>& r, rt::thread_pool* pool) {
  rt::multihead_attention<float>(q, k, v, opt, r, pool);
}

void multihead_out(const view& q, const view& k, const view& v, const out_view& out,
                   const rt::attention_options<float>& opt, rt::thread_pool* pool) {
  rt::multihead_attention<float>(q, k, v, out, opt, pool);
}

void multihead_heads_first(const view& q, const view& k, const view& v, const out_view& out,
                           const rt::attention_options<float>& opt, rt::thread_pool* pool) {
  rt::multihead_attention<float>(rt::heads_first, q, k, v, out, opt, pool);
}

void attention(const view& x, const view& context, const rt::attention_weights<float>& w,
               const rt::attention_options<float>& opt, rt::multihead_result<float>& r,
               rt::thread_pool* pool) {
  rt::attention<float>(x, context, w, opt, r, pool);
}

void attention_packed(const view& x, const view& context, const rt::packed_attention_weights<float>& w,
                      const rt::attention_options<float>& opt, rt::multihead_result<float>& r,
                      rt::thread_pool* pool) {
  rt::attention<float>(x, context, w, opt, r, pool);
}

void pack(const view& b, rt::packed_operand<float>& out) { out = rt::packed_operand<float>(b); }

void product_packed(const view& a, const rt::packed_operand<float>& b, const out_view& c,
                    const rt::epilogue<float>& e, rt::thread_pool* pool) {
  rt::matrix_product<float>(a, b, c, e, pool);
}

template <class S>
void decode(const rt::kv_cache<S>& cache, std::size_t layer, const view& q, const out_view& out,
            const rt::cache_attention_options& opt, const std::vector<double>& slopes,
            rt::thread_pool* pool) {
  rt::decode_attend<S>(cache, layer, q, out, opt, slopes, pool);
}

const rt::detail::decode_kernels decode_table = {decode<float>, decode<rt::bfloat16>, decode<rt::float16>};

}  // namespace

#if QKV_KERNELS_TARGET == QKV_KERNELS_AVX512
extern "C" [[gnu::visibility("default")]] const rt::detail::kernel_table QKV_KERNELS_TABLE;
#else
extern "C" const rt::detail::kernel_table QKV_KERNELS_TABLE;  // hidden: dispatch.cpp's, same object
#endif

extern "C" const rt::detail::kernel_table QKV_KERNELS_TABLE = {
    rt::detail::kernel_abi,
    rt::kernel_set::QKV_KERNELS_SET,
    {sizeof(rt::attention_options<float>), sizeof(rt::multihead_result<float>),
     sizeof(rt::packed_operand<float>), sizeof(rt::matrix_view<float>)},
    multihead_into,
    multihead_out,
    multihead_heads_first,
    attention,
    attention_packed,
    pack,
    product_packed,
    &decode_table,
};
