// qkv.hpp: the umbrella header of the constexpr core. Includes only.
#pragma once

#include "core/attention.hpp"
#include "core/bounds.hpp"
#include "core/check.hpp"
#include "core/math.hpp"
#include "core/matrix.hpp"
#include "core/multihead.hpp"
#include "core/softmax.hpp"
