// encoder_fixture.hpp: reads tests/data/encoder/*.json (made by scripts/fixtures/encoder_fixtures.py
// with PyTorch 1.13) into the constexpr path's fixed-size types, checking every shape.
#pragma once

#include <cmath>
#include <cstddef>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qkv/core/encoder.hpp>
#include <qkv/core/matrix.hpp>

#include "reference_data.hpp"  // flatten

namespace qkv::testing {

class encoder_fixture {
 public:
  explicit encoder_fixture(const std::string& name)
      : path_(std::string(QKV_TEST_DATA) + "/encoder/" + name + ".json") {
    std::ifstream in(path_);
    if (!in) throw std::runtime_error("cannot open " + path_);
    json_ = nlohmann::json::parse(in);
  }

  [[nodiscard]] const nlohmann::json& json() const { return json_; }

  /// a tensor with R * C values as an R x C matrix of T (any shape with that many values)
  template <class T, std::size_t R, std::size_t C>
  [[nodiscard]] qkv::matrix<T, R, C> get(const nlohmann::json& t, const std::string& what) const {
    std::vector<double> flat;
    flatten(t.at("data"), flat);
    if (flat.size() != R * C)
      throw std::runtime_error(path_ + ": " + what + " has " + std::to_string(flat.size()) +
                               " values, expected " + std::to_string(R) + " x " + std::to_string(C));
    qkv::matrix<T, R, C> m;
    for (std::size_t k = 0; k < R * C; ++k) m.v[k] = static_cast<T>(flat[k]);
    return m;
  }

  template <class T, std::size_t D, std::size_t H, std::size_t F>
  [[nodiscard]] qkv::encoder_layer_parameters<T, D, H, F> layer(std::size_t l) const {
    const auto& j = json_.at("layers").at(l);
    qkv::encoder_layer_parameters<T, D, H, F> p;
    p.in_proj_weight = get<T, 3 * D, D>(j.at("self_attn.in_proj_weight"), "in_proj_weight");
    p.in_proj_bias = get<T, 1, 3 * D>(j.at("self_attn.in_proj_bias"), "in_proj_bias");
    p.out_proj_weight = get<T, D, D>(j.at("self_attn.out_proj.weight"), "out_proj.weight");
    p.out_proj_bias = get<T, 1, D>(j.at("self_attn.out_proj.bias"), "out_proj.bias");
    p.linear1_weight = get<T, F, D>(j.at("linear1.weight"), "linear1.weight");
    p.linear1_bias = get<T, 1, F>(j.at("linear1.bias"), "linear1.bias");
    p.linear2_weight = get<T, D, F>(j.at("linear2.weight"), "linear2.weight");
    p.linear2_bias = get<T, 1, D>(j.at("linear2.bias"), "linear2.bias");
    p.norm1.weight = get<T, 1, D>(j.at("norm1.weight"), "norm1.weight");
    p.norm1.bias = get<T, 1, D>(j.at("norm1.bias"), "norm1.bias");
    p.norm2.weight = get<T, 1, D>(j.at("norm2.weight"), "norm2.weight");
    p.norm2.bias = get<T, 1, D>(j.at("norm2.bias"), "norm2.bias");
    return p;
  }

  template <class T>
  [[nodiscard]] qkv::encoder_options<T> options() const {
    const auto& c = json_.at("config");
    qkv::encoder_options<T> o;
    o.act = c.at("activation") == "gelu" ? qkv::activation::gelu : qkv::activation::relu;
    o.norm_first = c.at("norm_first").get<bool>();
    o.layer_norm_eps = static_cast<T>(c.at("layer_norm_eps").get<double>());
    o.causal = c.at("causal").get<bool>();
    return o;
  }

  template <std::size_t N>
  [[nodiscard]] qkv::matrix<bool, 1, N> padding() const {
    qkv::matrix<bool, 1, N> m;
    const auto& c = json_.at("config");
    if (!c.contains("key_padding")) return m;
    if (c.at("key_padding").size() != N) throw std::runtime_error(path_ + ": key_padding is not of length T");
    for (std::size_t k = 0; k < N; ++k) m.v[k] = c.at("key_padding").at(k).get<bool>();
    return m;
  }

  /// expected[section].layers[l][name], or expected[section][name] when l is npos
  [[nodiscard]] const nlohmann::json& expected(const std::string& section, std::size_t l,
                                               const std::string& name) const {
    const auto& s = json_.at("expected").at(section);
    return l == std::size_t(-1) ? s.at(name) : s.at("layers").at(l).at(name);
  }

 private:
  std::string path_;
  nlohmann::json json_;
};

/// @brief how far `actual` (anything with (i, j): a qkv::matrix or a runtime dynamic_matrix) is
/// from `expected`, element by element, against a per-element bound: the tests check
/// outside == 0 and report the worst difference and the worst difference / bound
struct within_report {
  std::size_t outside = 0;  // elements not within their bound (NaN counts as outside)
  double worst = 0, worst_ratio = 0;
};

template <class M, std::size_t R, std::size_t C>
[[nodiscard]] within_report compare_within(const M& actual, const qkv::matrix<double, R, C>& expected,
                                           const qkv::matrix<double, R, C>& bound) {
  within_report w;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      const double d = std::abs(double(actual(i, j)) - expected(i, j));
      if (!(d <= bound(i, j))) ++w.outside;
      w.worst = d > w.worst ? d : w.worst;
      w.worst_ratio = d / bound(i, j) > w.worst_ratio ? d / bound(i, j) : w.worst_ratio;
    }
  return w;
}

}  // namespace qkv::testing
