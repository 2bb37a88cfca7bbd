// qkv.hpp: the umbrella header of the constexpr core (standard library only). Includes only.
// The other layers have their own headers: exact/ (Boost.Multiprecision number types),
// io/ (printing, JSON, safetensors, WordPiece, SVG/HTML), reference/ (Boost truth), runtime/.
#pragma once

// C++20 or nothing: without -std=c++20 a learner would get pages of errors (1,879 lines from
// g++ 12 in C++17 mode); this stops at once with one line. A missing header is a fatal error on
// both compilers (nothing after it is compiled), and its name says what to do.
#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#include <qkv_needs_cxx20__compile_with_std_cxx20__for_example_g++_-std=c++20>
#endif

#include "core/adamw.hpp"
#include "core/alibi.hpp"
#include "core/attention.hpp"
#include "core/attention_backward.hpp"
#include "core/backward_bounds.hpp"
#include "core/batch.hpp"
#include "core/bounds.hpp"
#include "core/check.hpp"
#include "core/cross_entropy.hpp"
#include "core/embedding_backward.hpp"
#include "core/encoder.hpp"
#include "core/encoder_bounds.hpp"
#include "core/flat_attention.hpp"
#include "core/flash_backward.hpp"
#include "core/grouped.hpp"
#include "core/half.hpp"
#include "core/kv_cache.hpp"
#include "core/layers.hpp"
#include "core/linear_backward.hpp"
#include "core/masks.hpp"
#include "core/math.hpp"
#include "core/matrix.hpp"
#include "core/multihead.hpp"
#include "core/multihead_backward.hpp"
#include "core/online_softmax.hpp"
#include "core/positional.hpp"
#include "core/rope.hpp"
#include "core/sequence.hpp"
#include "core/sgd.hpp"
#include "core/softmax.hpp"
#include "core/softmax_backward.hpp"
#include "core/text.hpp"
#include "core/torch.hpp"
