// runtime tests of core/torch.hpp: PyTorch's own numbers, bit for bit.
//
// Two sources, both copied into tests/data/ by scripts/fixtures/torch_fixtures.py:
//  - torch_reference.hpp: the generator tensors of tests/data/reference (tutorials 001, 003, 004);
//  - torch_cases.json: op sequences run by PyTorch 1.13.1 (Debian python3-torch, AVX2), each op
//    with its tensors, the engine's draw count and the cached normal sample read back from
//    torch.get_rng_state(). Long streams (10^5 and 10^6 values) are an FNV-1a hash of the bits
//    plus a strided sample.
#include <doctest/doctest.h>

#include <bit>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <qkv/core/torch.hpp>

#include "../data/torch_reference.hpp"

namespace {

namespace ref = qkv_test::torch_reference;
using qkv::torch::generator;
using json = nlohmann::json;

// ------------------------------------------------------------------------------------------------
// helpers

template <class T>
auto bits_of(T x) {
  if constexpr (sizeof(T) == 4)
    return std::bit_cast<std::uint32_t>(x);
  else
    return std::bit_cast<std::uint64_t>(x);
}

// FNV-1a 64 over the little-endian bytes of each element's bits (make_torch_fixtures.py)
template <class T>
std::uint64_t fnv1a64(const T* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    auto b = bits_of(data[i]);
    for (std::size_t k = 0; k < sizeof(T); ++k) {
      h ^= static_cast<std::uint8_t>(b >> (8 * k));
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

// how many elements differ from the expected float32 bit patterns; reports the first one
template <std::size_t N>
int mismatches(const float* actual, const std::uint32_t (&expected)[N], const char* what) {
  int bad = 0;
  for (std::size_t i = 0; i < N; ++i)
    if (bits_of(actual[i]) != expected[i]) {
      if (bad == 0)
        MESSAGE(what << ": first difference at " << i << ": " << actual[i] << " vs "
                     << std::bit_cast<float>(expected[i]));
      ++bad;
    }
  return bad;
}

json load_cases() {
  std::ifstream in(std::string(QKV_TEST_DATA) + "/torch_cases.json");
  REQUIRE_MESSAGE(in.good(), "cannot open torch_cases.json");
  return json::parse(in);
}

const json& cases() {
  static const json doc = load_cases();
  return doc.at("cases");
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto k = s.find(sep);
    out.push_back(s.substr(0, k));
    if (k == std::string_view::npos) return out;
    s.remove_prefix(k + 1);
  }
}

long long to_int(std::string_view s) {
  long long v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}
double to_double(std::string_view s) { return std::stod(std::string(s)); }
std::size_t numel(std::string_view dims) {
  std::size_t n = 1;
  for (auto d : split(dims, ',')) n *= static_cast<std::size_t>(to_int(d));
  return n;
}

// the result of one op: name -> flat values
template <class T>
using tensors = std::vector<std::pair<std::string, std::vector<T>>>;

// run one op of the fixture (the ops of `qkv torch`, plus normal_noncontiguous) on memory
template <class T>
tensors<T> run(generator& g, std::string_view op) {
  const auto p = split(op, ':');
  const auto kind = p[0];
  tensors<T> out;
  if (kind == "rand" || kind == "randn" || kind == "uniform" || kind == "normal" ||
      kind == "normal_noncontiguous" || kind == "xavier") {
    std::vector<T> v(numel(p[1]));
    if (kind == "rand") g.uniform_(std::span<T>(v));
    if (kind == "randn") g.normal_(std::span<T>(v));
    if (kind == "uniform") g.uniform_(std::span<T>(v), to_double(p[2]), to_double(p[3]));
    if (kind == "normal") g.normal_(std::span<T>(v), to_double(p[2]), to_double(p[3]));
    if (kind == "normal_noncontiguous")
      g.normal_elementwise_(std::span<T>(v), to_double(p[2]), to_double(p[3]));
    if (kind == "xavier") {
      const auto d = split(p[1], ',');
      g.xavier_uniform_(std::span<T>(v), static_cast<std::size_t>(to_int(d[1])),
                        static_cast<std::size_t>(to_int(d[0])));
    }
    out.emplace_back("out", std::move(v));
  } else if (kind == "linear") {
    const auto in = static_cast<std::size_t>(to_int(p[1])), o = static_cast<std::size_t>(to_int(p[2]));
    const bool bias = !(p.size() > 3 && p[3] == "nobias");
    std::vector<T> w(in * o), b(bias ? o : 0);
    g.linear_(std::span<T>(w), std::span<T>(b), in);
    out.emplace_back("weight", std::move(w));
    if (bias) out.emplace_back("bias", std::move(b));
  } else if (kind == "embedding") {
    const auto num = static_cast<std::size_t>(to_int(p[1])), dim = static_cast<std::size_t>(to_int(p[2]));
    std::vector<T> w(num * dim);
    g.normal_(std::span<T>(w));
    if (p.size() > 3) {
      const auto row = generator::padding_row(static_cast<std::ptrdiff_t>(to_int(p[3])), num);
      for (std::size_t j = 0; j < dim; ++j) w[row * dim + j] = T(0);
    }
    out.emplace_back("weight", std::move(w));
  } else if (kind == "mha") {
    const auto e = static_cast<std::size_t>(to_int(p[1]));
    std::vector<T> ipw(3 * e * e), ipb(3 * e), opw(e * e), opb(e);
    g.linear_(std::span<T>(opw), std::span<T>(opb), e);
    g.xavier_uniform_(std::span<T>(ipw), e, 3 * e);
    for (auto& x : opb) x = T(0);
    out.emplace_back("in_proj_weight", std::move(ipw));
    out.emplace_back("in_proj_bias", std::move(ipb));
    out.emplace_back("out_proj_weight", std::move(opw));
    out.emplace_back("out_proj_bias", std::move(opb));
  } else if (kind == "seed") {
    g.manual_seed(to_int(p[1]));
  } else {
    FAIL("unknown op " << op);
  }
  return out;
}

void flatten_into(const json& j, std::vector<double>& out) {
  if (j.is_array())
    for (const auto& e : j) flatten_into(e, out);
  else
    out.push_back(j.get<double>());
}

// the distance in ulps between two finite values of the same sign (0 when equal)
template <class T>
long long ulp_distance(T a, T b) {
  const auto x = static_cast<long long>(bits_of(a)), y = static_cast<long long>(bits_of(b));
  if ((a < 0) != (b < 0)) return a == b ? 0 : 1LL << 40;
  return x > y ? x - y : y - x;
}

long long max_ulp_seen = 0;  // over the whole-data tensors of the libm path

// compare one tensor with its fixture record; returns the number of differing elements
// (for hashed tensors: the sample's differences, or 1 if only the hash differs)
template <class T>
int compare(const std::vector<T>& actual, const json& expected, const std::string& where,
            bool quiet = false) {
  if (expected.contains("data")) {
    std::vector<double> e;
    flatten_into(expected.at("data"), e);
    REQUIRE(e.size() == actual.size());
    int bad = 0;
    for (std::size_t i = 0; i < e.size(); ++i)
      if (bits_of(actual[i]) != bits_of(static_cast<T>(e[i]))) {
        if (bad == 0 && !quiet)
          MESSAGE(where << ": first difference at " << i << ": " << actual[i] << " vs "
                        << static_cast<T>(e[i]));
        const long long d = ulp_distance(actual[i], static_cast<T>(e[i]));
        if (d > max_ulp_seen) max_ulp_seen = d;
        ++bad;
      }
    return bad;
  }
  const auto stride = expected.at("sample_stride").get<std::size_t>();
  const auto& sample = expected.at("sample");
  int bad = 0;
  for (std::size_t k = 0; k < sample.size(); ++k) {
    const T e = static_cast<T>(sample[k].get<double>());
    if (bits_of(actual[k * stride]) != bits_of(e)) {
      if (bad == 0 && !quiet)
        MESSAGE(where << ": sample differs at element " << k * stride << ": " << actual[k * stride] << " vs "
                      << e);
      ++bad;
    }
  }
  const auto hash = std::stoull(expected.at("fnv1a64").get<std::string>(), nullptr, 16);
  if (fnv1a64(actual.data(), actual.size()) != hash && bad == 0) {
    if (!quiet) MESSAGE(where << ": the FNV-1a hash differs (the sample agrees)");
    bad = 1;
  }
  return bad;
}

// does this op use the C library's log/sin/cos in PyTorch (float64 blocks, element-wise path)?
bool uses_libm(std::string_view op, std::string_view dtype, const json& tensors_json) {
  const auto kind = split(op, ':')[0];
  const bool normal =
      kind == "randn" || kind == "normal" || kind == "normal_noncontiguous" || kind == "embedding";
  if (!normal) return false;
  if (dtype == "float64") return true;
  // float32 element-wise path: fewer than 16 elements, or non-contiguous
  for (const auto& [name, t] : tensors_json.items()) {
    std::size_t n = 1;
    for (const auto& d : t.at("shape")) n *= d.get<std::size_t>();
    if (n < 16) return true;
  }
  return kind == "normal_noncontiguous";
}

struct case_result {
  int exact_ops = 0;      // ops whose tensors are bit-exact
  int libm_ops = 0;       // ops on the C library's path (float64 normal, element-wise)
  int libm_ops_off = 0;   // ... of which some element differs (libm rounding)
  int other_ops_off = 0;  // any other op with a difference: a real error
  long long libm_elements = 0, libm_elements_off = 0;  // whole-data tensors of the libm path
};

template <class T>
void check_op(generator& g, const json& op, case_result& r, const std::string& where) {
  const auto opname = op.at("op").get<std::string>();
  const auto result = run<T>(g, opname);
  const bool libm = uses_libm(opname, op.at("dtype").get<std::string>(), op.at("tensors"));
  int bad = 0;
  for (const auto& [name, values] : result) {
    const auto& e = op.at("tensors").at(name);
    const int b = compare(values, e, where + " " + opname + " " + name, libm);
    bad += b;
    if (libm && e.contains("data"))
      r.libm_elements += static_cast<long long>(values.size()), r.libm_elements_off += b;
  }
  r.libm_ops += libm ? 1 : 0;
  if (bad == 0)
    ++r.exact_ops;
  else if (libm)
    ++r.libm_ops_off;
  else
    ++r.other_ops_off;
  // the draw count and the cached sample, as PyTorch's get_rng_state() showed them
  CHECK_MESSAGE(g.draws() == op.at("draws").get<std::uint64_t>(), where << " " << opname << ": draws");
  const auto cached = g.next_double_normal_sample();
  if (op.at("cached_normal").is_null()) {
    CHECK_MESSAGE(!cached.has_value(), where << " " << opname << ": no cached sample expected");
  } else {
    REQUIRE_MESSAGE(cached.has_value(), where << " " << opname << ": a cached sample expected");
    const double e = op.at("cached_normal").get<double>();
    // the cached sample is r sin(theta) in double: libm's sin and log there, qkv's here
    CHECK_MESSAGE(std::abs(*cached - e) <= 2 * std::abs(e) * 0x1p-52,
                  where << " " << opname << ": cached sample");
  }
}

generator seeded(const json& seed) {
  if (seed.is_number_unsigned()) return generator(seed.get<std::uint64_t>());
  return generator(seed.get<std::int64_t>());
}

case_result run_case(const json& c) {
  case_result r;
  generator g = seeded(c.at("seed"));
  for (const auto& op : c.at("ops")) {
    if (op.at("dtype") == "float32")
      check_op<float>(g, op, r, c.at("name").get<std::string>());
    else
      check_op<double>(g, op, r, c.at("name").get<std::string>());
  }
  return r;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// the fixture cases

case_result all_cases() {
  case_result total;
  for (const auto& c : cases()) {
    CAPTURE(c.at("name").get<std::string>());
    const auto r = run_case(c);
    total.exact_ops += r.exact_ops;
    total.libm_ops += r.libm_ops;
    total.libm_ops_off += r.libm_ops_off;
    total.other_ops_off += r.other_ops_off;
    total.libm_elements += r.libm_elements;
    total.libm_elements_off += r.libm_elements_off;
  }
  return total;
}

TEST_CASE("every op PyTorch computes without the C library gives PyTorch's bits, draws and cache") {
  const auto r = all_cases();
  MESSAGE(r.exact_ops << " ops bit-exact, " << r.libm_ops << " on the C library's path");
  // every float32 op (rand, uniform, the AVX2 Cephes blocks, Linear, Embedding, xavier, mha,
  // the float32 element-wise path) and every float64 uniform op: bit for bit
  CHECK(r.other_ops_off == 0);
  CHECK(r.exact_ops >= 100);
}

TEST_CASE("float64 normal values agree with PyTorch's C library log, sin and cos to 1 ulp") {
  // PyTorch's float64 blocks and its element-wise path call glibc's log, sin and cos; qkv's are
  // correctly rounded (core/math.hpp), glibc's on all but about one call in a thousand. Both are
  // faithful: each returns one of the two doubles around the true value, so the two log results,
  // and the two cos (sin) results, are at most 1 ulp apart. Through r = sqrt(-2 log u) the log's
  // relative difference is halved and r is rounded once: the two radii are at most 1 ulp apart.
  // The product r cos(theta) of two factors each within 1 ulp (relative 2^-52) differs by at
  // most 2 ulps before its rounding, so by at most 3 ulps after it. Measured: 8 of the 4854
  // values differ (0.2 %, each where glibc misrounds; torch_f64_test.cpp shows that on 1.4
  // million values), by at most 2 ulps. The float32 results of the element-wise path (rounded
  // from these doubles) are bit-exact in the fixture (previous test).
  max_ulp_seen = 0;
  const auto r = all_cases();
  MESSAGE(r.libm_elements_off << " of " << r.libm_elements << " float64 normal values differ; max "
                              << max_ulp_seen << " ulp");
  CHECK(r.libm_elements >= 4000);
  CHECK(max_ulp_seen <= 3);
}

// ------------------------------------------------------------------------------------------------
// the tutorials' tensors through the shaped API (tests/data/reference)

TEST_CASE("tutorial 001's embedding and weights come out of manual_seed(123) bit for bit") {
  generator g{123};
  const auto embedding = g.embedding<float, 6, 16>();
  CHECK(mismatches(embedding.v, ref::t001_embedding_weight, "embedding_weight") == 0);
  CHECK(g.draws() == 96);  // 6 full blocks of 16, no tail

  g.manual_seed(123);
  const auto w_query = g.rand<float, 24, 16>();
  const auto w_key = g.rand<float, 24, 16>();
  const auto w_value = g.rand<float, 28, 16>();
  CHECK(mismatches(w_query.v, ref::t001_W_query, "W_query") == 0);
  CHECK(mismatches(w_key.v, ref::t001_W_key, "W_key") == 0);
  CHECK(mismatches(w_value.v, ref::t001_W_value, "W_value") == 0);
  CHECK(g.draws() == 1216);

  // the cross-attention cell reseeds, draws the same three, then rand(8, 16)
  generator cross{123};
  (void)cross.rand<float, 24, 16>(), (void)cross.rand<float, 24, 16>(), (void)cross.rand<float, 28, 16>();
  const auto sentence_2 = cross.rand<float, 8, 16>();
  CHECK(mismatches(sentence_2.v, ref::t001_embedded_sentence_2, "embedded_sentence_2") == 0);

  // multi-head weights as 3-d tensors, then the tutorial's "second run" of the same cell
  const auto mq = g.rand<float, 3, 24, 16>();
  const auto mk = g.rand<float, 3, 24, 16>();
  const auto mv = g.rand<float, 3, 28, 16>();
  const auto sq = g.rand<float, 3, 24, 16>();
  const auto sk = g.rand<float, 3, 24, 16>();
  const auto sv = g.rand<float, 3, 28, 16>();
  CHECK(g.draws() == 1216 + 2 * 3648);
  auto flat = [](const auto& s) {
    std::vector<float> out;
    for (const auto& m : s.m) out.insert(out.end(), std::begin(m.v), std::end(m.v));
    return out;
  };
  CHECK(mismatches(flat(mq).data(), ref::t001_multihead_W_query, "multihead_W_query") == 0);
  CHECK(mismatches(flat(mk).data(), ref::t001_multihead_W_key, "multihead_W_key") == 0);
  CHECK(mismatches(flat(mv).data(), ref::t001_multihead_W_value, "multihead_W_value") == 0);
  CHECK(mismatches(flat(sq).data(), ref::t001_second_run_multihead_W_query, "second_run W_query") == 0);
  CHECK(mismatches(flat(sk).data(), ref::t001_second_run_multihead_W_key, "second_run W_key") == 0);
  CHECK(mismatches(flat(sv).data(), ref::t001_second_run_multihead_W_value, "second_run W_value") == 0);
}

TEST_CASE("tutorial 003's three Linear(768, 64) and randn(1, 9, 768) come out of manual_seed(0)") {
  generator g{0};
  const auto query = g.linear<float, 768, 64>();
  const auto key = g.linear<float, 768, 64>();
  const auto value = g.linear<float, 768, 64>();
  const auto seq = g.randn<float, 1, 9, 768>();
  CHECK(g.draws() == 3 * (768 * 64 + 64) + 9 * 768);  // 6912 = 432 blocks of 16: no tail

  auto check_hashed = [](const float* v, std::size_t n, std::uint64_t hash, std::size_t stride,
                         const auto& sample, const char* what) {
    CAPTURE(what);
    for (std::size_t k = 0; k < std::size(sample); ++k) CHECK(bits_of(v[k * stride]) == sample[k]);
    CHECK(fnv1a64(v, n) == hash);
  };
  check_hashed(query.weight.v, 64 * 768, ref::t003_query_weight_fnv1a64, ref::t003_query_weight_stride,
               ref::t003_query_weight_sample, "query_weight");
  check_hashed(key.weight.v, 64 * 768, ref::t003_key_weight_fnv1a64, ref::t003_key_weight_stride,
               ref::t003_key_weight_sample, "key_weight");
  check_hashed(value.weight.v, 64 * 768, ref::t003_value_weight_fnv1a64, ref::t003_value_weight_stride,
               ref::t003_value_weight_sample, "value_weight");
  check_hashed(seq.m[0].v, 9 * 768, ref::t003_seq_embedding_fnv1a64, ref::t003_seq_embedding_stride,
               ref::t003_seq_embedding_sample, "seq_embedding");
  CHECK(mismatches(query.bias.v, ref::t003_query_bias, "query_bias") == 0);
  CHECK(mismatches(key.bias.v, ref::t003_key_bias, "key_bias") == 0);
  CHECK(mismatches(value.bias.v, ref::t003_value_bias, "value_bias") == 0);
}

TEST_CASE("tutorial 004's three Linear(2, 2, bias=False) come out of manual_seed(42)") {
  generator g{42};
  const auto w_q = g.linear<float, 2, 2>(qkv::torch::bias::none);
  const auto w_k = g.linear<float, 2, 2>(qkv::torch::bias::none);
  const auto w_v = g.linear<float, 2, 2>(qkv::torch::bias::none);
  CHECK(g.draws() == 12);
  CHECK(!w_q.has_bias);
  CHECK(mismatches(w_q.weight.v, ref::t004_W_q_weight, "W_q") == 0);
  CHECK(mismatches(w_k.weight.v, ref::t004_W_k_weight, "W_k") == 0);
  CHECK(mismatches(w_v.weight.v, ref::t004_W_v_weight, "W_v") == 0);
  // the fused multiply-add matters here: x (b - a) + a rounded twice misses 2 of the 4 W_q bits
  generator unfused{42};
  int differ = 0;
  const float b = 0.70710677f;
  for (std::size_t k = 0; k < 4; ++k) {
    const float x = static_cast<float>(unfused.random() & 0xffffffu) * 0x1p-24f;
    const float twice_rounded = x * (b - -b);
    differ += bits_of(static_cast<float>(twice_rounded + -b)) != ref::t004_W_q_weight[k];
  }
  CHECK(differ == 2);
}

// ------------------------------------------------------------------------------------------------
// the engine, seeds, draw counts, the cache

TEST_CASE("the engine is std::mt19937 seeded with the low 32 bits") {
  for (const long long seed : {0LL, 1LL, 123LL, -5LL, 4294967313LL /* 2^32 + 17 */}) {
    CAPTURE(seed);
    generator g{seed};
    std::mt19937 m(static_cast<std::uint32_t>(static_cast<std::uint64_t>(seed) & 0xffffffffu));
    bool same = true;
    for (int i = 0; i < 5000; ++i) same = same && g.random() == m();
    CHECK(same);
    CHECK(g.initial_seed() == static_cast<std::uint64_t>(seed));
  }
  // random64: the first draw is the high word
  generator a{7}, b{7};
  const std::uint64_t hi = a.random(), lo = a.random();
  CHECK(b.random64() == ((hi << 32) | lo));
  // a fresh torch.Generator() has seed 67280421310721
  CHECK(generator{}.initial_seed() == 67280421310721ull);
}

TEST_CASE("each op makes PyTorch's number of draws") {
  generator g{1};
  auto drawn = [&g, last = std::uint64_t{0}]() mutable {
    const auto d = g.draws() - last;
    last = g.draws();
    return d;
  };
  (void)g.rand<float, 24, 16>();
  CHECK(drawn() == 384);  // one per float32
  (void)g.rand<double, 3, 5>();
  CHECK(drawn() == 30);  // two per float64
  (void)g.randn<float, 4, 8>();
  CHECK(drawn() == 32);  // a multiple of 16: n
  (void)g.randn<float, 17>();
  CHECK(drawn() == 33);  // otherwise n + 16 (the tail is redrawn)
  (void)g.randn<float, 45>();
  CHECK(drawn() == 61);
  (void)g.randn<double, 33>();
  CHECK(drawn() == 98);  // (33 + 16) x 2
  (void)g.randn<float, 5>();
  CHECK(drawn() == 12);  // element-wise: 3 pairs of two 64-bit uniforms; one sample left cached
  (void)g.linear<float, 16, 24>();
  CHECK(drawn() == 16 * 24 + 24);
  (void)g.linear<float, 16, 24>(qkv::torch::bias::none);
  CHECK(drawn() == 16 * 24);
  (void)g.embedding<float, 10, 3>();
  CHECK(drawn() == 46);  // 30 is not a multiple of 16
  (void)g.embedding<float, 5, 3>();
  CHECK(drawn() == 28);  // 15 elements: element-wise; starts with the cached sample: 7 new pairs
  (void)g.xavier_uniform<float, 24, 16>();
  CHECK(drawn() == 384);
  (void)g.multihead_attention<float, 8, 2>();
  CHECK(drawn() == 4 * 64 + 8);  // out_proj weight and bias, then in_proj_weight
}

TEST_CASE("the element-wise path's cached sample outlives the call and survives the block path") {
  generator g{21};
  const auto a = g.randn<float, 5>();  // 3 pairs: samples 0..5, sample 5 cached
  REQUIRE(g.next_double_normal_sample().has_value());
  const double cached = *g.next_double_normal_sample();
  const auto b = g.randn<float, 20>();  // block path: neither reads nor clears the cache
  CHECK(g.next_double_normal_sample() == cached);
  const auto c = g.randn<float, 1>();  // the cached sample
  CHECK(bits_of(c.v[0]) == bits_of(static_cast<float>(cached)));
  CHECK(!g.next_double_normal_sample().has_value());
  g.manual_seed(21);  // manual_seed clears it
  (void)g.randn<float, 1>();
  CHECK(g.next_double_normal_sample().has_value());
  g.manual_seed(21);
  CHECK(!g.next_double_normal_sample().has_value());
  (void)a, (void)b;
}

TEST_CASE("negative and wide seeds behave as torch.manual_seed") {
  // 2^32 + 17 reaches the engine as 17, but initial_seed keeps all 64 bits
  generator wide{4294967313ULL}, narrow{17};
  CHECK(wide.rand<float, 64>() == narrow.rand<float, 64>());
  CHECK(wide.initial_seed() == 4294967313ULL);
  // -5 is 2^64 - 5: the engine sees 0xfffffffb
  generator neg{-5}, same{0xfffffffbu};
  CHECK(neg.randn<float, 3, 7>() == same.randn<float, 3, 7>());
  CHECK(neg.initial_seed() == 0xfffffffffffffffbULL);
}

TEST_CASE("padding_idx zeroes its row after the draw, negative indices count from the end") {
  generator a{7}, b{7};
  const auto plain = a.embedding<float, 4, 8>();
  const auto padded = b.embedding<float, 4, 8>(-1);
  CHECK(a.draws() == b.draws());
  for (std::size_t j = 0; j < 8; ++j) CHECK(padded(3, j) == 0.0f);
  CHECK(qkv::row(padded, 2) == qkv::row(plain, 2));
  auto pad = [&b](std::ptrdiff_t p) { return b.embedding<float, 4, 8>(p); };
  CHECK_THROWS_AS((void)pad(4), std::out_of_range);
  CHECK_THROWS_AS((void)pad(-5), std::out_of_range);
}

TEST_CASE("bad arguments are refused as PyTorch refuses them") {
  generator g{0};
  std::vector<float> v(4);
  CHECK_THROWS_AS(g.uniform_(std::span<float>(v), 1.0, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(g.normal_(std::span<float>(v), 0.0, -1.0), std::invalid_argument);
}

TEST_CASE("the FMA-compiled blocks and the portable blocks give the same bits") {
  // normal_ takes detail::normal_blocks_with_fma on an x86-64 CPU with FMA; detail::normal_block
  // called directly is the portable code (std::fma from the C library). Both are exact fmas.
  for (int seed = 0; seed < 8; ++seed) {
    generator a{seed}, b{seed};
    std::vector<float> x(4096), y(4096);
    a.normal_(std::span<float>(x), 0.25, 1.5);
    b.uniform_(std::span<float>(y));
    for (std::size_t i = 0; i < y.size(); i += 16)
      qkv::torch::detail::normal_block(y.data() + i, 0.25f, 1.5f);
    int differ = 0;
    for (std::size_t i = 0; i < x.size(); ++i) differ += bits_of(x[i]) != bits_of(y[i]);
    CHECK(differ == 0);
  }
}

TEST_CASE("the compiler and the running program draw the same bits") {
  // the same calls evaluated by the compiler (constexpr) and at run time (the seed comes from a
  // volatile, so nothing is folded): exact fmas and sqrts on both sides, qkv::log/sin/cos on both
  // sides of the float64 paths
  struct draws {
    qkv::matrix<double, 5, 8> randn64;    // float64 blocks with a tail (40 = 2 x 16 + 8)
    qkv::matrix<double, 1, 5> small64;    // element-wise, with a cached sample left
    qkv::matrix<float, 1, 3> small32;     // starts from that cached sample
    qkv::matrix<float, 3, 11> normal32;   // AVX2 blocks with mean and std (fused)
    qkv::matrix<double, 4, 5> uniform64;  // fused uniform_ in double
    qkv::torch::linear_parameters<double, 3, 5> linear64;
  };
  auto draw = [](generator g) {
    draws d{};
    d.randn64 = g.randn<double, 5, 8>();
    d.small64 = g.randn<double, 5>();
    d.small32 = g.randn<float, 3>();
    d.normal32 = g.normal<float, 3, 11>(0.5, 2.0);
    d.uniform64 = g.uniform<double, 4, 5>(-0.3, 0.8);
    d.linear64 = g.linear<double, 3, 5>();
    return d;
  };
  constexpr draws at_compile_time = [&] { return draw(generator{77}); }();
  volatile int seed = 77;
  const draws at_run_time = draw(generator{static_cast<int>(seed)});
  CHECK(at_run_time.randn64 == at_compile_time.randn64);
  CHECK(at_run_time.small64 == at_compile_time.small64);
  CHECK(at_run_time.small32 == at_compile_time.small32);
  CHECK(at_run_time.normal32 == at_compile_time.normal32);
  CHECK(at_run_time.uniform64 == at_compile_time.uniform64);
  CHECK(at_run_time.linear64.weight == at_compile_time.linear64.weight);
  CHECK(at_run_time.linear64.bias == at_compile_time.linear64.bias);
}
