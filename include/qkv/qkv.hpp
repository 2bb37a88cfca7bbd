// qkv.hpp: the umbrella header of the constexpr core (standard library only). Includes only.
// The other layers have their own headers: exact/ (Boost.Multiprecision number types),
// io/ (printing, JSON, safetensors, WordPiece, SVG/HTML), reference/ (Boost truth), runtime/.
#pragma once

#include "core/alibi.hpp"
#include "core/attention.hpp"
#include "core/batch.hpp"
#include "core/bounds.hpp"
#include "core/check.hpp"
#include "core/encoder.hpp"
#include "core/encoder_bounds.hpp"
#include "core/grouped.hpp"
#include "core/half.hpp"
#include "core/kv_cache.hpp"
#include "core/layers.hpp"
#include "core/masks.hpp"
#include "core/math.hpp"
#include "core/matrix.hpp"
#include "core/multihead.hpp"
#include "core/online_softmax.hpp"
#include "core/positional.hpp"
#include "core/rope.hpp"
#include "core/sequence.hpp"
#include "core/softmax.hpp"
#include "core/text.hpp"
#include "core/torch.hpp"
