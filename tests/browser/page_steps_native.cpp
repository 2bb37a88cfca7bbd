// page_steps_native.cpp: the steps of an edited `qkv explain` page, recomputed natively with
// core/flat_steps.hpp (the C++ the page's WebAssembly module is built from), for
// tests/browser/page_explain_edit_test.py to compare with what the page shows, bit for bit.
//
//   page_steps_native IN.json
//
// IN.json: {"steps": [the page's edit.steps], "matrices": {id: {"dtype": "float32"|"float64",
// "bits": ["3f800000", ...]}}} (every operand's numbers as the page holds them, their bits in
// hex), or for an exact page's matrix {"dtype": "exact", "exact": ["3/2", "0.9", ...]} (the
// fractions the page shows, or what a learner typed: rational::parse, as the module parses it).
// Writes {id: ["bits", ...]} of every step to stdout, in the page's order, each computed from the
// operands' given bits and the steps before it; for an exact step {id: ["n/d", ...]}, its
// fractions (flat::exact_step over io::page_exact, rational<long long>). Bad input, and an error
// of the exact arithmetic (an overflow, a zero denominator, malformed text): "page_steps_native: "
// and the message (rational.hpp's own, what the page must show), exit 2. A cast step (kind 40,
// with its "dtype") converts its operand to that type (flat::cast): a page whose steps mix types.
// A wide step ("wide": 1, 03b's w_T_2) is computed over q128 (io/page_wide.hpp, what the page's
// wide module computes); no later step reads it.
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <qkv/io/page_recompute.hpp>
#if __has_include(<boost/multiprecision/cpp_int.hpp>)  // a tool without Boost writes no wide step
#include <qkv/io/page_wide.hpp>
#define QKV_STEPS_NATIVE_WIDE 1
#endif

namespace {

template <class T, class U>
std::vector<T> from_bits(const nlohmann::json& bits) {
  std::vector<T> v;
  for (const auto& b : bits) {
    const U u = static_cast<U>(std::stoull(b.get<std::string>(), nullptr, 16));
    T x;
    std::memcpy(&x, &u, sizeof x);
    v.push_back(x);
  }
  return v;
}

template <class T, class U>
nlohmann::json to_bits(const std::vector<T>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (T x : v) {
    U u;
    std::memcpy(&u, &x, sizeof u);
    std::ostringstream s;
    s << std::hex << static_cast<unsigned long long>(u);
    out.push_back(s.str());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: page_steps_native IN.json\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw std::runtime_error(std::string(argv[1]) + ": cannot open the file");
    const auto doc = nlohmann::json::parse(in);
    std::map<std::string, std::vector<float>> f32;
    std::map<std::string, std::vector<double>> f64;
    std::map<std::string, std::vector<qkv::io::page_exact>> ex;
    for (const auto& [id, m] : doc.at("matrices").items()) {
      if (m.at("dtype") == "exact") {
        for (const auto& t : m.at("exact"))
          ex[id].push_back(qkv::io::page_exact::parse(t.get<std::string>().c_str()));
        continue;
      }
      if (m.at("dtype") == "float32")
        f32[id] = from_bits<float, std::uint32_t>(m.at("bits"));
      else
        f64[id] = from_bits<double, std::uint64_t>(m.at("bits"));
    }
    nlohmann::json out = nlohmann::json::object();
    for (const auto& j : doc.at("steps")) {
      qkv::io::page_step s;
      s.id = j.at("id"), s.kind = static_cast<qkv::flat::kind>(j.at("kind").get<int>());
      s.a = j.at("a"), s.b = j.at("b"), s.c = j.at("c"), s.masked = j.at("masked");
      s.scalar = j.at("scalar").get<double>();
      const auto z = j.at("sizes").get<std::vector<std::size_t>>();
      if (z.size() != 8)
        throw std::runtime_error("step " + s.id + ": sizes has " + std::to_string(z.size()) +
                                 " numbers, not 8");
      s.sizes = {z[0], z[1], z[2], z[3], z[4], z[5], z[6], z[7]};
      // a test driver: it trusts the sizes, which plan_recompute checked against the page's
      // shapes when the tool wrote the page (the operands are the page's own matrices)
      if (s.kind == qkv::flat::cast_kind) {  // another type (its "dtype"): flat::cast
        s.dtype = j.at("dtype");
        const std::string from = f32.count(s.a) ? "float32" : f64.count(s.a) ? "float64" : "exact";
        if (!qkv::io::page_recompute_detail::run_cast(s, from, s.dtype, f32, f64, ex))
          throw std::runtime_error("step " + s.id + ": no cast from " + from + " to " + s.dtype);
        if (s.dtype == "float64") {
          out[s.id] = to_bits<double, std::uint64_t>(f64[s.id]);
        } else if (s.dtype == "float32") {
          out[s.id] = to_bits<float, std::uint32_t>(f32[s.id]);
        } else {
          out[s.id] = nlohmann::json::array();
          for (const auto& v : ex[s.id]) out[s.id].push_back(qkv::io::page_detail::exact_text(v));
        }
      } else if (ex.count(s.a)) {
        for (const auto* id : {&s.a, &s.b, &s.c})
          if (!id->empty() && !ex.count(*id))
            throw std::runtime_error("step " + s.id + ": no exact matrix " + *id);
        if (j.value("wide", 0) == 1) {  // over 128-bit rationals (an overflow throws)
#ifndef QKV_STEPS_NATIVE_WIDE
          throw std::runtime_error("step " + s.id + ": a 128-bit step, and this was built without Boost");
#else
          const auto texts = qkv::io::page_recompute_detail::run_wide(qkv::io::wide_exact_q128, s, ex);
          if (!texts) throw std::runtime_error("step " + s.id + ": no exact form");
          out[s.id] = *texts;
          continue;
#endif
        }
        auto got = qkv::io::page_recompute_detail::run_exact(s, ex);  // an overflow throws
        if (!got) throw std::runtime_error("step " + s.id + ": no exact form");
        ex[s.id] = std::move(*got);
        out[s.id] = nlohmann::json::array();
        for (const auto& v : ex[s.id]) out[s.id].push_back(qkv::io::page_detail::exact_text(v));
      } else if (f32.count(s.a)) {
        for (const auto* id : {&s.a, &s.b, &s.c})
          if (!id->empty() && !f32.count(*id))
            throw std::runtime_error("step " + s.id + ": no float32 matrix " + *id);
        f32[s.id] = qkv::io::page_recompute_detail::run<float>(s, f32);
        out[s.id] = to_bits<float, std::uint32_t>(f32[s.id]);
      } else {
        for (const auto* id : {&s.a, &s.b, &s.c})
          if (!id->empty() && !f64.count(*id))
            throw std::runtime_error("step " + s.id + ": no float64 matrix " + *id);
        f64[s.id] = qkv::io::page_recompute_detail::run<double>(s, f64);
        out[s.id] = to_bits<double, std::uint64_t>(f64[s.id]);
      }
    }
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "page_steps_native: " << e.what() << "\n";
    return 2;
  }
}
