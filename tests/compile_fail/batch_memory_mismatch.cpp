// A cross-attention batch pairs query sequence b with memory b: 3 query sequences over 2 memories
// do not compile, and the message names both sizes (one_memory_per_query_sequence, B = 3, BM = 2).
#include <array>

#include <qkv/core/batch.hpp>

constexpr qkv::stack<double, 3, 2, 4> x{};       // 3 query sequences of 2 tokens
constexpr qkv::stack<double, 2, 5, 4> memory{};  // 2 memories of 5 rows
constexpr qkv::matrix<double, 4, 4> w{};
constexpr std::array<std::size_t, 3> memory_lengths{5, 5, 5};
constexpr auto r = qkv::batch_multihead_cross_attention<2>(x, memory, memory_lengths, w, w, w, qkv::out_in);
