// reference_data.hpp: reads the tutorials' reference tensors (tests/data/reference/*.json, copied
// from PyTorch's runs) into qkv::matrix, checking every shape.
#pragma once

#include <cstddef>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qkv/core/matrix.hpp>

namespace qkv::testing {

/// the numbers of a nested JSON array, row-major, appended to out (a tensor's "data")
inline void flatten(const nlohmann::json& j, std::vector<double>& out) {
  if (j.is_array())
    for (const auto& e : j) flatten(e, out);
  else
    out.push_back(j.get<double>());
}

/// one reference file: {"float32": {name: tensor}, "float64": {...}, ...}
class reference_file {
 public:
  explicit reference_file(const std::string& name)
      : path_(std::string(QKV_TEST_DATA) + "/reference/" + name) {
    std::ifstream in(path_);
    if (!in) throw std::runtime_error("cannot open " + path_);
    json_ = nlohmann::json::parse(in);
  }

  /// tensor `name` of section `section` ("float32" or "float64") as an R x C matrix of T;
  /// a tensor of shape [R, C], [1, R, C], [C] (R = 1) or [] (1 x 1) fits
  template <class T, std::size_t R, std::size_t C>
  [[nodiscard]] qkv::matrix<T, R, C> get(const std::string& section, const std::string& name) const {
    const auto& t = json_.at(section).at(name);
    std::vector<double> flat;
    flatten(t.at("data"), flat);
    std::size_t count = 1;
    for (auto d : t.at("shape")) count *= d.get<std::size_t>();
    if (count != R * C || flat.size() != R * C)
      throw std::runtime_error(path_ + ": " + section + "." + name + " has " + std::to_string(flat.size()) +
                               " values, expected " + std::to_string(R) + " x " + std::to_string(C));
    qkv::matrix<T, R, C> m;
    for (std::size_t k = 0; k < R * C; ++k) m.v[k] = static_cast<T>(flat[k]);
    return m;
  }

  [[nodiscard]] const nlohmann::json& json() const { return json_; }

 private:
  std::string path_;
  nlohmann::json json_;
};

/// the identity, but opaque to the optimiser: makes the run-time side really run at run time
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] qkv::matrix<T, R, C> at_run_time(const qkv::matrix<T, R, C>& m) {
  qkv::matrix<T, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) {
    volatile T e = m.v[k];
    out.v[k] = e;
  }
  return out;
}

}  // namespace qkv::testing
