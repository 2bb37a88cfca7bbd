// runtime.hpp: the runtime path, umbrella (includes only).
#pragma once

#include "attention.hpp"
#include "backward.hpp"
#include "batch.hpp"
#include "dynamic_matrix.hpp"
#include "exp.hpp"
#include "gemm.hpp"
#include "multihead.hpp"
#include "multihead_backward.hpp"
#include "rope.hpp"
#include "self_attention.hpp"
#include "simd.hpp"
#include "softmax.hpp"
#include "target.hpp"
#include "thread_pool.hpp"
#include "half.hpp"
#include "kv_cache.hpp"
