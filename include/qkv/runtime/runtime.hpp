// runtime.hpp: the runtime path, umbrella (includes only): every header of include/qkv/runtime/.
#pragma once

#include "attention.hpp"
#include "batch.hpp"
#include "decode.hpp"
#include "dynamic_matrix.hpp"
#include "encoder.hpp"
#include "exp.hpp"
#include "gemm.hpp"
#include "half.hpp"
#include "kv_cache.hpp"
#include "multihead.hpp"
#include "rope.hpp"
#include "self_attention.hpp"
#include "simd.hpp"
#include "softmax.hpp"
#include "target.hpp"
#include "thread_pool.hpp"
