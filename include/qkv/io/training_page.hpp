// training_page.hpp: the learner's page of a training run: one self-contained HTML file (CSS and
// JavaScript inline, no network request, opens from file://) that plays the attention of every
// layer and head over training with a slider and a play button, and shows the loss curve (train
// and held-out) with a marker at the slider's step, the held-out accuracy curve, the model's
// answers on held-out inputs, the model's and the optimizer's settings and the run's timing.
//
//   std::string trace = ...;   // the JSON that `qkv train TASK --trace TRACE.json` writes
//   qkv::io::write_training_page(std::cout, trace, "TRACE.json");
//
// The trace ("qkv-training-trace-1", docs/pages.md "The training page"):
//   {"format": "qkv-training-trace-1", "task": "reverse" | "sort" | "text", "seed": 0, "threads": 1,
//    "model": {"layers", "heads", "d_model", "d_ff", "context", "norm_first", "vocab": [token, ...]},
//    "optimizer": {"name": "adamw" | "sgd", "lr", "betas": [b1, b2], "eps", "weight_decay"},
//    "loss": [[step, train_loss, heldout_loss or null], ...], "accuracy": [[step, accuracy], ...],
//    "snapshots": [{"step", "tokens": [T tokens], "attention": [layer][head][T][T]}, ...],
//    "answers": [{"input", "expected", "output", "correct"}, ...],
//    "timing": {"seconds", "steps_per_second", "peak_bytes"}}
//
// Every field is checked before the page is written (read_training_trace), every size against
// training_page_limits before anything of that size is allocated; a bad trace is a json_error
// (or a limit_error) "NAME: field 'snapshots[3].attention[1][0][2]': ...", naming the field. What
// is checked, beyond types: steps are integers below 2^53 (a page's script counts them exactly)
// and strictly increasing in loss, accuracy and snapshots; a loss is finite and >= 0, an accuracy
// in [0, 1]; d_model is a multiple of heads; a snapshot's tokens are in the vocabulary and at most
// `context` of them; its attention is [layers][heads][T][T] with every weight finite in [0, 1],
// every weight above the diagonal exactly 0 (the model is causal: exp(-inf) is 0 in any float)
// and every row summing to 1 within T 2^-14 + (T + 2) 2^-24 (see row_sum_bound); an answer's
// `correct` is `output == expected`. Fields the format does not name are ignored.
//
// Every number on the page is the trace's: the page embeds each as the shortest decimal that
// reads back to the same double, and a heatmap cell's tooltip shows it so. The page's size is
// bounded: the attention numbers of all snapshots by limits.attention_numbers (2^20), the cells
// the page draws at once (layers x heads x T x T of one snapshot) by limits.snapshot_cells
// (2^16), the page by limits.page_bytes (24 MiB), checked before a byte is written to `out`; the
// fixture's page (2 layers, 2 heads, 8 tokens, 30 snapshots, 401 losses) is 100,546 bytes.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "json.hpp"
#include "limit.hpp"
#include "page.hpp"  // page_detail::json_string, page_script::css, xml_escape

namespace qkv::io {

/// the sizes a trace may have; each is checked before anything of that size is allocated
struct training_page_limits {
  std::uint64_t trace_bytes = 32u << 20;       // the trace's text
  std::uint64_t nesting = 16;                  // arrays and objects inside each other (the trace has 6)
  std::uint64_t layers = 16, heads = 32;       // model.layers, model.heads
  std::uint64_t context = 256;                 // model.context, and a snapshot's T
  std::uint64_t vocab = 65536;                 // model.vocab's tokens
  std::uint64_t token_bytes = 64;              // one token's text
  std::uint64_t snapshots = 256;               // saved steps
  std::uint64_t attention_numbers = 1u << 20;  // weights in all snapshots (layers x heads x T x T each)
  std::uint64_t snapshot_cells = 1u << 16;     // heatmap cells drawn at once: layers x heads x T x T of a
                                               // snapshot (4 layers x 4 heads x 64 x 64)
  std::uint64_t curve_points = 1u << 20;       // loss and accuracy points, each
  std::uint64_t answers = 1000;                // held-out answers
  std::uint64_t answer_bytes = 4096;           // one answer's input, expected or output
  std::uint64_t page_bytes = 24u << 20;        // the page written
  static constexpr std::uint64_t max_step = std::uint64_t{1} << 53;  // a step the script counts exactly
};

/// a training run, as the trace says it went (every field checked)
struct training_trace {
  struct model_settings {
    std::uint64_t layers = 0, heads = 0, d_model = 0, d_ff = 0, context = 0;
    bool norm_first = false;
    std::vector<std::string> vocab;
  };
  struct optimizer_settings {
    std::string name;  // "adamw" or "sgd"
    double lr = 0;
    std::optional<std::pair<double, double>> betas;  // adamw: required
    std::optional<double> eps;                       // adamw: required
    std::optional<double> weight_decay;              // adamw: required
  };
  struct loss_point {
    std::uint64_t step = 0;
    double train = 0;
    std::optional<double> heldout;  // null in the trace: not measured at this step
  };
  struct accuracy_point {
    std::uint64_t step = 0;
    double accuracy = 0;
  };
  struct snapshot {
    std::uint64_t step = 0;
    std::vector<std::string> tokens;  // T
    std::vector<double> attention;    // layers x heads x T x T, row-major: [l][h][query][key]
  };
  struct answer {
    std::string input, expected, output;
    bool correct = false;
  };
  struct timing_info {
    double seconds = 0, steps_per_second = 0;
    std::uint64_t peak_bytes = 0;
  };

  std::string task;  // "reverse", "sort" or "text"
  std::uint64_t seed = 0, threads = 0;
  model_settings model;
  optimizer_settings optimizer;
  std::vector<loss_point> loss;
  std::vector<accuracy_point> accuracy;
  std::vector<snapshot> snapshots;
  std::vector<answer> answers;
  timing_info timing;
};

/// @brief the largest |sum of a row of weights - 1| a trace may show for a row of T weights:
/// T 2^-14 + (T + 2) 2^-24. A float32 softmax row e_j / s sums to 1 within (T + 1) 2^-24 (s
/// is a sum of T terms: (T - 1) roundings; each e_j / s (or e_j (1/s)) one or two more), so
/// (T + 2) 2^-24 holds it for any summation order; T 2^-14 admits a writer that rounds each
/// weight below 1 to 4 significant digits (an error below 5e-5 < 2^-14 each). A row that is not
/// a distribution (scores instead of weights, a row cut short, a shifted row) is far outside.
[[nodiscard]] constexpr double row_sum_bound(std::size_t t) {
  return static_cast<double>(t) * 0x1p-14 + static_cast<double>(t + 2) * 0x1p-24;
}

namespace training_detail {

using nlohmann::json;

// the deepest nesting of arrays and objects in text (strings skipped), counted without parsing,
// so that a hostile trace of a million '[' never reaches the recursive parts of a JSON library
[[nodiscard]] inline std::uint64_t nesting_of(std::string_view text) {
  std::uint64_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

class reader {
 public:
  reader(const json_document& doc, const training_page_limits& limits) : doc_(doc), limits_(limits) {}

  [[nodiscard]] json_error error(const std::string& field, const std::string& message) const {
    return doc_.error(field, message);
  }
  [[nodiscard]] limit_error too_many(const std::string& field, std::uint64_t n, std::uint64_t limit,
                                     std::string_view unit) const {
    return limit_error(doc_.file() + ": field '" + field + "': " + std::to_string(n) + " " +
                       std::string(unit) + ", above the limit of " + std::to_string(limit));
  }

  // member `key` of object `o` (field `at`), which must be there
  const json& member(const json& o, const std::string& at, const char* key) const {
    const std::string f = at.empty() ? key : at + "." + key;
    if (!o.is_object())
      throw error(at.empty() ? "(the document)" : at, "must be an object, got " + detail::kind_of(o));
    const auto it = o.find(key);
    if (it == o.end()) throw error(f, "missing");
    return *it;
  }
  [[nodiscard]] static bool has(const json& o, const char* key) { return o.is_object() && o.contains(key); }

  const json& object(const json& j, const std::string& f) const {
    if (!j.is_object()) throw error(f, "must be an object, got " + detail::kind_of(j));
    return j;
  }
  // an array of at most `limit` elements (its size is JSON's: nothing is allocated for it here)
  const json& array(const json& j, const std::string& f, std::uint64_t limit, std::string_view unit) const {
    if (!j.is_array()) throw error(f, "must be an array, got " + detail::kind_of(j));
    if (j.size() > limit) throw too_many(f, j.size(), limit, unit);
    return j;
  }
  const json& array_of(const json& j, const std::string& f, std::size_t n, const std::string& what) const {
    if (!j.is_array() || j.size() != n)
      throw error(f,
                  "must be an array of " + std::to_string(n) + " (" + what + "), got " + detail::kind_of(j));
    return j;
  }
  std::uint64_t count(const json& j, const std::string& f, std::uint64_t lo, std::uint64_t hi,
                      std::string_view unit = "") const {
    if (!j.is_number_unsigned())  // nlohmann: a JSON integer >= 0 (not 1.0, not -1)
      throw error(f,
                  "must be a non-negative integer, got " + (j.is_number() ? j.dump() : detail::kind_of(j)));
    const auto v = j.get<std::uint64_t>();
    if (v < lo) throw error(f, "must be at least " + std::to_string(lo) + ", got " + std::to_string(v));
    if (v > hi) {
      if (!unit.empty()) throw too_many(f, v, hi, unit);
      throw error(f, "must be at most " + std::to_string(hi) + ", got " + std::to_string(v));
    }
    return v;
  }
  double number(const json& j, const std::string& f, double lo, double hi, const std::string& range) const {
    if (!j.is_number())
      throw error(f,
                  "must be a number " + range + ", got " + (j.is_string() ? j.dump() : detail::kind_of(j)));
    const double v = j.get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
      throw error(f, "must be a number " + range + ", got " + j.dump());
    return v;
  }
  std::string text(const json& j, const std::string& f, std::uint64_t max_bytes) const {
    if (!j.is_string()) throw error(f, "must be a string, got " + detail::kind_of(j));
    const auto& s = j.get_ref<const std::string&>();
    if (s.size() > max_bytes) throw too_many(f, s.size(), max_bytes, "bytes");
    return s;
  }
  bool boolean(const json& j, const std::string& f) const {
    if (!j.is_boolean()) throw error(f, "must be true or false, got " + detail::kind_of(j));
    return j.get<bool>();
  }
  // a step: an integer below 2^53, above the previous one (`previous`: none for the first)
  std::uint64_t step(const json& j, const std::string& f,
                     const std::optional<std::uint64_t>& previous) const {
    const auto s = count(j, f, 0, training_page_limits::max_step);
    if (previous && s <= *previous)
      throw error(f, "steps must increase: step " + std::to_string(s) + " comes after step " +
                         std::to_string(*previous));
    return s;
  }

  const training_page_limits& limits() const { return limits_; }

 private:
  const json_document& doc_;
  const training_page_limits& limits_;
};

inline std::string at(const std::string& f, std::size_t k) { return f + "[" + std::to_string(k) + "]"; }

}  // namespace training_detail

/// @brief the trace `text` (named `name` in messages) read and checked (see the file comment);
/// json_error or limit_error naming the field on anything else
[[nodiscard]] inline training_trace read_training_trace(std::string_view text, const std::string& name,
                                                        const training_page_limits& limits = {}) {
  using namespace training_detail;
  if (text.size() > limits.trace_bytes)
    throw limit_error(name + ": the trace is " + std::to_string(text.size()) + " bytes, above the limit of " +
                      std::to_string(limits.trace_bytes));
  if (const auto depth = nesting_of(text); depth > limits.nesting)
    throw json_error(name + ": arrays and objects nested " + std::to_string(depth) +
                     " deep, a training trace nests at most " + std::to_string(limits.nesting));
  const json_document doc = json_document::parse(std::string(text), name);
  const reader r(doc, limits);
  const json& root = r.object(doc.json(), "(the document)");
  training_trace t;

  const json& format = r.member(root, "", "format");
  if (!format.is_string() || format.get<std::string>() != "qkv-training-trace-1")
    throw r.error("format", "must be \"qkv-training-trace-1\", got " +
                                (format.is_string() ? format.dump() : detail::kind_of(format)));
  t.task = r.text(r.member(root, "", "task"), "task", 64);
  if (t.task != "reverse" && t.task != "sort" && t.task != "text")
    throw r.error("task", "must be \"reverse\", \"sort\" or \"text\", got \"" + t.task + "\"");
  t.seed = r.count(r.member(root, "", "seed"), "seed", 0, UINT64_MAX);
  t.threads = r.count(r.member(root, "", "threads"), "threads", 1, 1024);

  // the model
  const json& m = r.object(r.member(root, "", "model"), "model");
  auto& md = t.model;
  md.layers = r.count(r.member(m, "model", "layers"), "model.layers", 1, limits.layers, "layers");
  md.heads = r.count(r.member(m, "model", "heads"), "model.heads", 1, limits.heads, "heads");
  md.d_model = r.count(r.member(m, "model", "d_model"), "model.d_model", 1, 1u << 20);
  if (md.d_model % md.heads != 0)
    throw r.error("model.d_model", std::to_string(md.d_model) +
                                       " is not a multiple of model.heads = " + std::to_string(md.heads));
  md.d_ff = r.count(r.member(m, "model", "d_ff"), "model.d_ff", 1, 1u << 22);
  md.context = r.count(r.member(m, "model", "context"), "model.context", 1, limits.context, "tokens");
  md.norm_first = r.boolean(r.member(m, "model", "norm_first"), "model.norm_first");
  const json& vocab = r.array(r.member(m, "model", "vocab"), "model.vocab", limits.vocab, "tokens");
  if (vocab.empty()) throw r.error("model.vocab", "must hold at least one token, got an empty array");
  std::set<std::string> known;
  md.vocab.reserve(vocab.size());
  for (std::size_t k = 0; k < vocab.size(); ++k) {
    md.vocab.push_back(r.text(vocab[k], at("model.vocab", k), limits.token_bytes));
    if (!known.insert(md.vocab.back()).second)
      throw r.error(at("model.vocab", k), "the token \"" + md.vocab.back() + "\" is in the vocabulary twice");
  }

  // the optimizer
  const json& o = r.object(r.member(root, "", "optimizer"), "optimizer");
  auto& op = t.optimizer;
  op.name = r.text(r.member(o, "optimizer", "name"), "optimizer.name", 64);
  if (op.name != "adamw" && op.name != "sgd")
    throw r.error("optimizer.name", "must be \"adamw\" or \"sgd\", got \"" + op.name + "\"");
  op.lr = r.number(r.member(o, "optimizer", "lr"), "optimizer.lr", 0, 1e6, "above 0");
  if (!(op.lr > 0)) throw r.error("optimizer.lr", "must be a number above 0, got 0");
  const bool adamw = op.name == "adamw";
  if (adamw || reader::has(o, "betas")) {
    const json& b = r.array_of(r.member(o, "optimizer", "betas"), "optimizer.betas", 2, "beta1, beta2");
    op.betas = {r.number(b[0], "optimizer.betas[0]", 0, 1, "in [0, 1)"),
                r.number(b[1], "optimizer.betas[1]", 0, 1, "in [0, 1)")};
    if (op.betas->first >= 1 || op.betas->second >= 1)
      throw r.error("optimizer.betas", "each beta must be below 1");
  }
  if (adamw || reader::has(o, "eps"))
    op.eps = r.number(r.member(o, "optimizer", "eps"), "optimizer.eps", 0, 1, "in [0, 1]");
  if (adamw || reader::has(o, "weight_decay"))
    op.weight_decay =
        r.number(r.member(o, "optimizer", "weight_decay"), "optimizer.weight_decay", 0, 1e6, "at least 0");

  // the curves
  const json& loss = r.array(r.member(root, "", "loss"), "loss", limits.curve_points, "points");
  if (loss.empty()) throw r.error("loss", "must hold at least one point, got an empty array");
  t.loss.reserve(loss.size());
  std::optional<std::uint64_t> previous;
  for (std::size_t k = 0; k < loss.size(); ++k) {
    const std::string f = at("loss", k);
    const json& p = r.array_of(loss[k], f, 3, "step, train loss, held-out loss or null");
    training_trace::loss_point q;
    q.step = r.step(p[0], f + "[0]", previous);
    q.train = r.number(p[1], f + "[1]", 0, HUGE_VAL, "at least 0 (a cross-entropy)");
    if (!p[2].is_null())
      q.heldout = r.number(p[2], f + "[2]", 0, HUGE_VAL, "at least 0 (a cross-entropy), or null");
    previous = q.step;
    t.loss.push_back(q);
  }
  const json& acc = r.array(r.member(root, "", "accuracy"), "accuracy", limits.curve_points, "points");
  t.accuracy.reserve(acc.size());
  previous.reset();
  for (std::size_t k = 0; k < acc.size(); ++k) {
    const std::string f = at("accuracy", k);
    const json& p = r.array_of(acc[k], f, 2, "step, held-out accuracy");
    training_trace::accuracy_point q;
    q.step = r.step(p[0], f + "[0]", previous);
    q.accuracy = r.number(p[1], f + "[1]", 0, 1, "in [0, 1]");
    previous = q.step;
    t.accuracy.push_back(q);
  }

  // the snapshots: every size checked against the limits before its weights are allocated
  const json& snaps = r.array(r.member(root, "", "snapshots"), "snapshots", limits.snapshots, "snapshots");
  if (snaps.empty()) throw r.error("snapshots", "must hold at least one snapshot, got an empty array");
  t.snapshots.reserve(snaps.size());
  previous.reset();
  std::uint64_t numbers = 0;
  for (std::size_t k = 0; k < snaps.size(); ++k) {
    const std::string f = at("snapshots", k);
    const json& s = r.object(snaps[k], f);
    training_trace::snapshot snap;
    snap.step = r.step(r.member(s, f, "step"), f + ".step", previous);
    previous = snap.step;
    const json& tokens =
        r.array(r.member(s, f, "tokens"), f + ".tokens", md.context, "tokens (model.context)");
    const std::size_t T = tokens.size();
    if (T == 0) throw r.error(f + ".tokens", "must hold at least one token, got an empty array");
    for (std::size_t i = 0; i < T; ++i) {
      snap.tokens.push_back(r.text(tokens[i], at(f + ".tokens", i), limits.token_bytes));
      if (!known.count(snap.tokens.back()))
        throw r.error(at(f + ".tokens", i), "the token \"" + snap.tokens.back() + "\" is not in model.vocab");
    }
    const auto cells = checked_product({md.layers, md.heads, T, T});
    if (cells > limits.snapshot_cells)
      throw r.too_many(
          f + ".attention", cells, limits.snapshot_cells,
          "cells to draw (layers x heads x " + std::to_string(T) + " x " + std::to_string(T) + ")");
    numbers = checked_sum({numbers, cells});
    if (numbers > limits.attention_numbers)
      throw r.too_many(f + ".attention", numbers, limits.attention_numbers,
                       "attention weights in snapshots[0.." + std::to_string(k) + "]");
    const std::string fa = f + ".attention";
    const json& layers = r.array_of(r.member(s, f, "attention"), fa, md.layers,
                                    "model.layers = " + std::to_string(md.layers) + " layers");
    snap.attention.reserve(md.layers * md.heads * T * T);
    const double bound = row_sum_bound(T);
    for (std::size_t l = 0; l < md.layers; ++l) {
      const std::string fl = at(fa, l);
      const json& heads =
          r.array_of(layers[l], fl, md.heads, "model.heads = " + std::to_string(md.heads) + " heads");
      for (std::size_t h = 0; h < md.heads; ++h) {
        const std::string fh = at(fl, h);
        const json& rows = r.array_of(heads[h], fh, T, std::to_string(T) + " queries, one per token");
        for (std::size_t i = 0; i < T; ++i) {
          const std::string fi = at(fh, i);
          const json& row = r.array_of(rows[i], fi, T, std::to_string(T) + " keys, one per token");
          double sum = 0;
          for (std::size_t j = 0; j < T; ++j) {
            const double w = r.number(row[j], at(fi, j), 0, 1, "in [0, 1] (an attention weight)");
            if (j > i && w != 0)
              throw r.error(at(fi, j), "must be 0: key " + std::to_string(j) + " comes after query " +
                                           std::to_string(i) + " (the model is causal), got " +
                                           row[j].dump());
            sum += w;
            snap.attention.push_back(w);
          }
          if (!(std::fabs(sum - 1) <= bound)) {
            char buf[120];
            std::snprintf(buf, sizeof buf,
                          "sum to 1 within %.3g (T 2^-14 + (T + 2) 2^-24, T = %zu), got %.17g", bound, T,
                          sum);
            throw r.error(fi, std::string("the weights of a query must ") + buf);
          }
        }
      }
    }
    t.snapshots.push_back(std::move(snap));
  }

  // the answers
  const json& answers = r.array(r.member(root, "", "answers"), "answers", limits.answers, "answers");
  t.answers.reserve(answers.size());
  for (std::size_t k = 0; k < answers.size(); ++k) {
    const std::string f = at("answers", k);
    const json& a = r.object(answers[k], f);
    training_trace::answer ans;
    ans.input = r.text(r.member(a, f, "input"), f + ".input", limits.answer_bytes);
    ans.expected = r.text(r.member(a, f, "expected"), f + ".expected", limits.answer_bytes);
    ans.output = r.text(r.member(a, f, "output"), f + ".output", limits.answer_bytes);
    ans.correct = r.boolean(r.member(a, f, "correct"), f + ".correct");
    if (ans.correct != (ans.output == ans.expected))
      throw r.error(f + ".correct", std::string("is ") + (ans.correct ? "true" : "false") +
                                        " but the output \"" + ans.output + "\" " +
                                        (ans.correct ? "differs from" : "equals") + " the expected \"" +
                                        ans.expected + "\"");
    t.answers.push_back(std::move(ans));
  }

  // the timing
  const json& tm = r.object(r.member(root, "", "timing"), "timing");
  t.timing.seconds = r.number(r.member(tm, "timing", "seconds"), "timing.seconds", 0, 1e9, "at least 0");
  t.timing.steps_per_second =
      r.number(r.member(tm, "timing", "steps_per_second"), "timing.steps_per_second", 0, 1e12, "at least 0");
  t.timing.peak_bytes = r.count(r.member(tm, "timing", "peak_bytes"), "timing.peak_bytes", 0, UINT64_MAX);
  return t;
}

namespace training_detail {

// the shortest text that reads back to the same double
inline std::string shortest(double v) {
  char buf[40];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}
inline std::string fixed(double v, const char* fmt) {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// "1 answer", "16 answers"
inline std::string count_of(std::size_t n, const std::string& thing) {
  return std::to_string(n) + " " + thing + (n == 1 ? "" : "s");
}

// ticks 1, 2, 5 x 10^k spanning [lo, hi], about n of them
inline std::vector<double> nice_ticks(double lo, double hi, int n) {
  std::vector<double> out;
  const double span = hi - lo;
  if (!(span > 0)) return {lo};
  const double raw = span / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / p < 1.5 ? p : raw / p < 3.5 ? 2 * p : raw / p < 7.5 ? 5 * p : 10 * p;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    out.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return out;
}

struct series {
  std::string name, css;                      // legend text, class of the line
  std::vector<std::pair<double, double>> xy;  // (step, value)
};

// a line chart of steps against values: axes, ticks and their labels, one polyline per series
// (its points exactly the series' points, data-points = their count), a legend, and a vertical
// marker (class "marker") that the script moves to the slider's step. `log_y`: a log10 axis.
inline std::string chart_svg(const std::string& id, const std::vector<series>& all,
                             const std::string& y_label, bool log_y, double y_lo, double y_hi,
                             bool legend_below = false) {
  const int W = 640, H = 270, L = 64, R = 16, T = 14, B = 48;
  double x_lo = HUGE_VAL, x_hi = -HUGE_VAL;
  for (const auto& s : all)
    for (const auto& p : s.xy) x_lo = std::min(x_lo, p.first), x_hi = std::max(x_hi, p.first);
  if (!(x_lo <= x_hi)) x_lo = 0, x_hi = 1;
  if (x_hi == x_lo) x_hi = x_lo + 1;
  auto fy = [&](double v) { return log_y ? std::log10(v) : v; };
  const double a = fy(y_lo), b = fy(y_hi) > fy(y_lo) ? fy(y_hi) : fy(y_lo) + 1;
  auto px = [&](double x) { return L + (x - x_lo) / (x_hi - x_lo) * (W - L - R); };
  auto py = [&](double y) { return T + (b - fy(y)) / (b - a) * (H - T - B); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + id +
                  "\" class=\"chart\" viewBox=\"0 0 " + std::to_string(W) + " " + std::to_string(H) +
                  "\" width=\"" + std::to_string(W) + "\" height=\"" + std::to_string(H) +
                  "\" role=\"img\" font-family=\"sans-serif\" font-size=\"11\" data-x0=\"" +
                  std::to_string(L) + "\" data-x1=\"" + std::to_string(W - R) + "\" data-s0=\"" +
                  shortest(x_lo) + "\" data-s1=\"" + shortest(x_hi) + "\">\n";
  s += "<rect x=\"" + std::to_string(L) + "\" y=\"" + std::to_string(T) + "\" width=\"" +
       std::to_string(W - L - R) + "\" height=\"" + std::to_string(H - T - B) +
       "\" fill=\"#ffffff\" stroke=\"#c9d1d8\"/>\n";
  // y ticks
  std::vector<double> yt;
  if (log_y) {
    for (double e = std::ceil(a - 1e-9); e <= b + 1e-9; e += 1) yt.push_back(std::pow(10.0, e));
  } else {
    yt = nice_ticks(y_lo, y_hi, 5);
  }
  for (double v : yt) {
    const std::string y = fixed(py(v), "%.1f");
    s += "<line x1=\"" + std::to_string(L) + "\" x2=\"" + std::to_string(W - R) + "\" y1=\"" + y +
         "\" y2=\"" + y + "\" stroke=\"#eef1f4\"/><text x=\"" + std::to_string(L - 5) + "\" y=\"" +
         fixed(py(v) + 4, "%.1f") + "\" text-anchor=\"end\">" + fixed(v, "%g") + "</text>\n";
  }
  for (double v : nice_ticks(x_lo, x_hi, 6)) {
    const std::string x = fixed(px(v), "%.1f");
    s += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + std::to_string(H - B) + "\" y2=\"" +
         std::to_string(H - B + 4) + "\" stroke=\"#5b6670\"/><text x=\"" + x + "\" y=\"" +
         std::to_string(H - B + 16) + "\" text-anchor=\"middle\">" + fixed(v, "%.10g") + "</text>\n";
  }
  s += "<text x=\"" + std::to_string((L + W - R) / 2) + "\" y=\"" + std::to_string(H - 8) +
       "\" text-anchor=\"middle\" fill=\"#33414d\">step</text>\n";
  s += "<text transform=\"translate(14 " + std::to_string((T + H - B) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\" fill=\"#33414d\">" + xml_escape(y_label) + "</text>\n";
  // the legend in a corner the curves leave empty: top right (a falling loss), bottom right (a
  // rising accuracy)
  int legend_w = 0;
  for (const auto& ser : all) legend_w += 30 + static_cast<int>(7 * ser.name.size());
  int lx = W - R - 6 - legend_w;
  const int ly = legend_below ? H - B - 12 : T + 12;
  for (const auto& ser : all) {
    s += "<polyline class=\"" + ser.css + "\" data-points=\"" + std::to_string(ser.xy.size()) +
         "\" fill=\"none\" points=\"";
    for (std::size_t k = 0; k < ser.xy.size(); ++k) {
      if (k) s += ' ';
      s += fixed(px(ser.xy[k].first), "%.2f") + "," + fixed(py(ser.xy[k].second), "%.2f");
    }
    s += "\"><title>" + xml_escape(ser.name) + ": " + std::to_string(ser.xy.size()) +
         " points</title></polyline>\n";
    s += "<line class=\"" + ser.css + "\" x1=\"" + std::to_string(lx) + "\" x2=\"" + std::to_string(lx + 18) +
         "\" y1=\"" + std::to_string(ly) + "\" y2=\"" + std::to_string(ly) + "\"/><text x=\"" +
         std::to_string(lx + 23) + "\" y=\"" + std::to_string(ly + 4) + "\">" + xml_escape(ser.name) +
         "</text>\n";
    lx += 30 + static_cast<int>(7 * ser.name.size());
  }
  s += "<line class=\"marker\" x1=\"" + std::to_string(L) + "\" x2=\"" + std::to_string(L) + "\" y1=\"" +
       std::to_string(T) + "\" y2=\"" + std::to_string(H - B) + "\"/>\n</svg>\n";
  return s;
}

inline constexpr const char* css = R"CSS(
.what{max-width:62em}.what p{margin:.4em 0}
code{overflow-wrap:anywhere}
.player{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid var(--line);padding:.5em 0;display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center}
.player input[type=range]{flex:1 1 14em;min-width:0}
.player .readout{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
.layer{margin:.8em 0}.layer h3{font-size:1em;margin:.2em 0}
.heads{display:flex;flex-wrap:wrap;gap:.8em 1.4em}.heads>figure{min-width:0}
.heads svg rect.c{cursor:help}.heads svg rect.c:hover,.heads svg rect.c:focus{stroke:#d94801;stroke-width:2}
.charts{display:flex;flex-wrap:wrap;gap:1em 2em}.charts figure{flex:1 1 24em;min-width:0;max-width:42em}
svg.chart{width:100%;height:auto;font-size:12px}
.scale{display:flex;align-items:center;gap:.5em;font-size:.85em;color:var(--muted);flex-wrap:wrap;margin:.3em 0}
.scale .keep{display:inline-flex;align-items:center;gap:.4em}.scale .bar{display:inline-block;width:10em;height:.9em;border:1px solid #999;background:linear-gradient(to right,#f7fbff,#deebf7,#c6dbef,#9ecae1,#6baed6,#4292c6,#2171b5,#08519c,#08306b)}
.scale .hatch{display:inline-block;width:1.1em;height:1.1em;border:1px solid #999;background:repeating-linear-gradient(45deg,#fff,#fff 3px,#9a9a9a 3px,#9a9a9a 5px)}
svg .pos{fill:#8a96a0;font-size:.8em}
svg.chart polyline{stroke-width:1.6;stroke-linejoin:round}svg.chart line.marker{stroke:#d94801;stroke-width:1.5;stroke-dasharray:4 3}
svg.chart .train{stroke:#2171b5}svg.chart .heldout{stroke:#fd8d3c;stroke-width:4;stroke-opacity:.7}svg.chart .acc{stroke:#31a354}
table.kv,table.answers{border-collapse:collapse;font-size:.92em}
table.kv th,table.kv td,table.answers th,table.answers td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
table.kv th,table.answers th{background:var(--head);font-weight:500}
table.answers td{font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
table.answers tr.right td.mark{color:#2b7a0b}table.answers tr.wrong td.mark{color:#b30000;font-weight:600}
.tables{display:flex;flex-wrap:wrap;gap:1em 2em;align-items:flex-start}
section.part{border-top:1px solid var(--line);padding:1em 0 .6em;margin-top:.6em}
)CSS";

inline constexpr const char* js = R"JS(
(function () {
'use strict';
var D = JSON.parse(document.getElementById('qkv-data').textContent);
var NS = 'http://www.w3.org/2000/svg', S = D.snapshots, L = D.layers, H = D.heads;
var BLUES = [[247,251,255],[222,235,247],[198,219,239],[158,202,225],[107,174,214],[66,146,198],[33,113,181],[8,81,156],[8,48,107]];
function colour(t) {
  t = Math.min(1, Math.max(0, t)) * 8; var i = Math.min(7, Math.floor(t)), f = t - i;
  return '#' + [0, 1, 2].map(function (k) { var c = Math.round(BLUES[i][k] + (BLUES[i + 1][k] - BLUES[i][k]) * f); return (c < 16 ? '0' : '') + c.toString(16); }).join('');
}
function sel(tag, attrs, text) {
  var e = document.createElementNS(NS, tag);
  if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
  if (text !== undefined) e.textContent = text;
  return e;
}
function el(tag, attrs, text) {
  var e = document.createElement(tag);
  if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
  if (text !== undefined) e.textContent = text;
  return e;
}
// a token as a label: spaces, newlines and tabs made visible
function label(s) { return s.replace(/ /g, '\u2423').replace(/\n/g, '\u21b5').replace(/\t/g, '\u21e5'); }
// the shortest text that reads back to the same double (the trace's own number), minus as U+2212
function full(v) { return v < 0 ? '\u2212' + String(-v) : String(v); }
// the snapshot k's weight of layer l, head h, query i, key j
function weight(k, l, h, i, j) { var T = S[k].tokens.length; return S[k].attention[((l * H + h) * T + i) * T + j]; }

// ---- the heatmaps: one per layer and head, drawn once per token count, recoloured per snapshot
var holder = document.getElementById('heatmaps'), cells = [], drawnT = -1, current = 0;
function draw(T, tokens) {
  holder.textContent = ''; cells = [];
  var cs = T <= 16 ? 30 : Math.max(5, Math.floor(480 / T)), fs = cs >= 14 ? 12 : 9, every = Math.max(1, Math.ceil(fs * 1.2 / cs));
  var lw = 0; tokens.forEach(function (t) { lw = Math.max(lw, label(t).length + String(T).length + 1); });
  var left = 10 + Math.ceil(lw * fs * 0.62) + 6, top = 10 + Math.ceil(lw * fs * 0.62 * 0.72) + 12;
  var W = left + T * cs + 12, Ht = top + T * cs + 26;
  for (var l = 0; l < L; ++l) {
    var sec = el('div', {'class': 'layer', id: 'layer-' + l});
    sec.appendChild(el('h3', null, 'Layer ' + l + (l === L - 1 && L > 1 ? ' (the last)' : '')));
    var heads = el('div', {'class': 'heads'});
    cells.push([]);
    for (var h = 0; h < H; ++h) {
      var fig = el('figure', {id: 'head-' + l + '-' + h}), box = el('div', {'class': 'scroll'});
      fig.appendChild(el('figcaption', null, 'layer ' + l + ', head ' + h));
      var svg = sel('svg', {xmlns: NS, width: W, height: Ht, viewBox: '0 0 ' + W + ' ' + Ht, 'font-family': 'sans-serif', 'font-size': fs, role: 'img'});
      var defs = sel('defs'), pat = sel('pattern', {id: 'hatch-' + l + '-' + h, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)'});
      pat.appendChild(sel('rect', {width: 6, height: 6, fill: '#ffffff'}));
      pat.appendChild(sel('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#9a9a9a', 'stroke-width': 2.5}));
      defs.appendChild(pat); svg.appendChild(defs);
      var grid = [];
      for (var j = 0; j < T; j += every) {
        var x = left + j * cs + cs / 2, y = top - 6;
        svg.appendChild(tokenText({x: x, y: y, transform: 'rotate(-45 ' + x + ' ' + y + ')', 'class': 'col'}, j, tokens[j]));
      }
      for (var i = 0; i < T; ++i) {
        if (i % every === 0) svg.appendChild(tokenText({x: left - 6, y: top + i * cs + cs / 2 + fs * 0.35, 'text-anchor': 'end', 'class': 'row'}, i, tokens[i]));
        var row = [];
        for (j = 0; j < T; ++j) {
          var r = sel('rect', {'class': 'c', x: left + j * cs, y: top + i * cs, width: cs, height: cs, stroke: '#ffffff', 'stroke-width': 0.5,
            tabindex: 0, 'data-l': l, 'data-h': h, 'data-i': i, 'data-j': j});
          if (j > i) r.setAttribute('fill', 'url(#hatch-' + l + '-' + h + ')');
          svg.appendChild(r);
          var txt = null;
          if (cs >= 30 && j <= i) { txt = sel('text', {x: left + j * cs + cs / 2, y: top + i * cs + cs / 2 + 4, 'text-anchor': 'middle', 'font-size': 10, 'pointer-events': 'none'}); svg.appendChild(txt); }
          row.push([r, txt]);
        }
        grid.push(row);
      }
      svg.appendChild(sel('text', {x: left, y: top + T * cs + 18, 'font-size': 10, fill: '#5b6670'}, 'rows: queries, columns: keys'));
      cells[l].push(grid);
      box.appendChild(svg); fig.appendChild(box); heads.appendChild(fig);
    }
    sec.appendChild(heads); holder.appendChild(sec);
  }
  drawnT = T;
}
// a label: the position (from 1, grey) and the token; its text is "POSITION TOKEN"
function tokenText(attrs, k, token) {
  var t = sel('text', attrs);
  t.setAttribute('data-k', k);
  t.appendChild(sel('tspan', {'class': 'pos'}, String(k + 1)));
  t.appendChild(sel('tspan', null, ' ' + label(token)));
  return t;
}
var slider = document.getElementById('step'), readout = document.getElementById('readout');
function at(list, step) { for (var k = 0; k < list.length; ++k) if (list[k][0] === step) return list[k]; return null; }
function show(k) {
  k = Math.max(0, Math.min(S.length - 1, k)); current = k; slider.value = k;
  var s = S[k], T = s.tokens.length;
  if (T !== drawnT) draw(T, s.tokens);
  relabel(s.tokens);
  for (var l = 0; l < L; ++l) for (var h = 0; h < H; ++h) for (var i = 0; i < T; ++i) for (var j = 0; j <= i; ++j) {
    var v = weight(k, l, h, i, j), c = cells[l][h][i][j];
    c[0].setAttribute('fill', colour(v));
    if (c[1]) { c[1].textContent = v === 0 ? '0' : v.toFixed(2); c[1].setAttribute('fill', v > 0.55 ? '#ffffff' : '#1d2329'); }
  }
  var lp = at(D.loss, s.step), ap = at(D.accuracy, s.step), parts = ['step ' + s.step + ' (snapshot ' + (k + 1) + ' of ' + S.length + ')'];
  if (lp) { parts.push('train loss ' + full(lp[1])); if (lp[2] !== null) parts.push('held-out loss ' + full(lp[2])); }
  if (ap) parts.push('held-out accuracy ' + full(ap[1]));
  readout.textContent = parts.join(' \u00b7 ');
  document.querySelectorAll('svg.chart').forEach(function (c) {
    var x0 = +c.getAttribute('data-x0'), x1 = +c.getAttribute('data-x1'), s0 = +c.getAttribute('data-s0'), s1 = +c.getAttribute('data-s1');
    var x = x0 + (s.step - s0) / (s1 - s0) * (x1 - x0), m = c.querySelector('line.marker');
    m.setAttribute('x1', x.toFixed(2)); m.setAttribute('x2', x.toFixed(2));
  });
  if (!tip.hidden && tipCell) showTip(tipCell);
}
function relabel(tokens) {
  holder.querySelectorAll('text.row, text.col').forEach(function (t) {
    var k = +t.getAttribute('data-k'); if (k < tokens.length) t.lastChild.textContent = ' ' + label(tokens[k]);
  });
}
slider.addEventListener('input', function () { stop(); show(+slider.value); });

// ---- play: one snapshot every 700 ms, from the first when at the last
var play = document.getElementById('play'), timer = null;
function stop() { if (timer) { clearInterval(timer); timer = null; play.textContent = 'Play'; } }
play.addEventListener('click', function () {
  if (timer) { stop(); return; }
  if (current === S.length - 1) show(0);
  play.textContent = 'Pause';
  timer = setInterval(function () { if (current >= S.length - 1) stop(); else show(current + 1); }, 700);
});

// ---- a cell's value: on hover and keyboard focus, the trace's number in full
var tip = document.getElementById('qkv-tip'), tipCell = null;
function showTip(c) {
  var l = +c.getAttribute('data-l'), h = +c.getAttribute('data-h'), i = +c.getAttribute('data-i'), j = +c.getAttribute('data-j');
  var s = S[current], v = weight(current, l, h, i, j);
  tip.textContent = '';
  tip.appendChild(el('div', {'class': 'x-title'}, 'layer ' + l + ', head ' + h + ', step ' + s.step));
  tip.appendChild(el('div', null, 'query ' + (i + 1) + ' \u201c' + label(s.tokens[i]) + '\u201d, key ' + (j + 1) + ' \u201c' + label(s.tokens[j]) + '\u201d'));
  tip.appendChild(el('div', {'class': 'x-sum'}, 'weight = ' + full(v)));
  if (j > i) tip.appendChild(el('div', {'class': 'x-note'}, 'masked: key ' + (j + 1) + ' comes after query ' + (i + 1) + ' (the model is causal), so its weight is 0'));
  tip.hidden = false; tipCell = c;
  var r = c.getBoundingClientRect(), w = tip.offsetWidth, ht = tip.offsetHeight;
  var left = Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - w - 8);
  tip.style.left = Math.max(window.scrollX + 4, left) + 'px';
  tip.style.top = (window.scrollY + (window.innerHeight - r.bottom - 10 >= ht ? r.bottom + 6 : r.top - ht - 6)) + 'px';
}
function cellOf(ev) { return ev.target.closest ? ev.target.closest('rect.c') : null; }
document.addEventListener('mouseover', function (ev) { var c = cellOf(ev); if (c) showTip(c); });
document.addEventListener('focusin', function (ev) { var c = cellOf(ev); if (c) showTip(c); });
document.addEventListener('mouseout', function (ev) { if (cellOf(ev)) { tip.hidden = true; tipCell = null; } });
document.addEventListener('focusout', function () { tip.hidden = true; tipCell = null; });
document.addEventListener('keydown', function (ev) { if (ev.key === 'Escape') { tip.hidden = true; tipCell = null; } });

show(S.length - 1);
window.qkvTraining = {ready: true, show: show, current: function () { return current; }};
document.documentElement.setAttribute('data-qkv-ready', '1');
})();
)JS";

// what a learner should look for, per task; no number in it: the page's numbers are the trace's
inline std::string what_to_look_for(const std::string& task, std::uint64_t layers) {
  const std::string last = layers > 1 ? "the last layer" : "the layer";
  if (task == "reverse")
    return "<p><b>Reverse.</b> To write the k-th digit of the answer, the model must read the k-th digit "
           "from the "
           "end of the input. Watch " +
           last +
           "'s heads: at step 0 the weights are spread over every visible key "
           "(a pale lower triangle); as the loss falls, the rows of the answer's positions (the separator "
           "and the "
           "answer's digits) each put nearly all their weight on one input digit, and those cells line up on "
           "the "
           "<b>anti-diagonal</b> of the lower-left block: the first answer position looks at the last input "
           "digit, "
           "the next at the one before it, and so on. The accuracy reaches its top when that permutation is "
           "clean.</p><p>The rows of the input digits themselves have nothing to predict (their loss is not "
           "counted), so their pattern may stay arbitrary.</p>";
  if (task == "sort")
    return "<p><b>Sort.</b> To write the next digit of the sorted answer, the model must find the smallest "
           "input "
           "digit not yet written. Watch " +
           last +
           "'s heads: the rows of the answer's positions learn to put "
           "their weight on the input digit that comes next in sorted order (wherever it stood), and an "
           "answer "
           "position often also attends to the digit just written (its own token). Unlike reverse, the "
           "pattern "
           "depends on the input's values, not only on positions: the saved input is one held-out "
           "example.</p>";
  return "<p><b>Text.</b> The model predicts each next character of a text. Early on, heads attend broadly "
         "(mostly to the first position, or uniformly); watch for heads that learn to look at the "
         "<b>previous character</b> (a bright line just below the diagonal), at the start of the current "
         "word, "
         "or at the same character earlier on. The loss curve says how much it learned; the answers are its "
         "samples.</p>";
}

}  // namespace training_detail

/// @brief the page of `trace` (already read): see write_training_page
[[nodiscard]] inline std::string training_page_html(const training_trace& t, std::string_view source_name,
                                                    const training_page_limits& limits = {}) {
  using namespace training_detail;
  const auto& md = t.model;
  // the data: the trace's numbers, each as the shortest text that reads back to it
  std::string d =
      "{\"layers\":" + std::to_string(md.layers) + ",\"heads\":" + std::to_string(md.heads) + ",\"loss\":[";
  for (std::size_t k = 0; k < t.loss.size(); ++k) {
    const auto& p = t.loss[k];
    d += (k ? ",[" : "[") + std::to_string(p.step) + "," + shortest(p.train) + "," +
         (p.heldout ? shortest(*p.heldout) : std::string("null")) + "]";
  }
  d += "],\"accuracy\":[";
  for (std::size_t k = 0; k < t.accuracy.size(); ++k)
    d += (k ? ",[" : "[") + std::to_string(t.accuracy[k].step) + "," + shortest(t.accuracy[k].accuracy) + "]";
  d += "],\"snapshots\":[";
  for (std::size_t k = 0; k < t.snapshots.size(); ++k) {
    const auto& s = t.snapshots[k];
    d += (k ? ",{" : "{") + std::string("\"step\":") + std::to_string(s.step) + ",\"tokens\":[";
    for (std::size_t i = 0; i < s.tokens.size(); ++i) {
      if (i) d += ',';
      page_detail::json_string(d, s.tokens[i]);
    }
    d += "],\"attention\":[";
    for (std::size_t n = 0; n < s.attention.size(); ++n) {
      if (n) d += ',';
      d += shortest(s.attention[n]);
    }
    d += "]}";
  }
  d += "]}";

  const std::string title = "Training: " + t.task + ", " + std::to_string(md.layers) +
                            (md.layers == 1 ? " layer, " : " layers, ") + std::to_string(md.heads) +
                            (md.heads == 1 ? " head" : " heads");
  const auto& first = t.snapshots.front();
  const auto& last = t.snapshots.back();
  std::string s;
  s.reserve(d.size() + 60000);
  s +=
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta "
      "charset=\"utf-8\"/>\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "script-src 'unsafe-inline'; img-src data: blob:\"/>\n<title>";
  s += xml_escape(title) + "</title>\n<style>\n";
  s += page_script::css;
  s += css;
  s += "</style>\n</head>\n<body>\n<header><h1>" + xml_escape(title) +
       "</h1>\n<p class=\"meta\">From <code>" + xml_escape(source_name) +
       "</code>: " + count_of(t.snapshots.size(), "saved step") + " (" + std::to_string(first.step) + " to " +
       std::to_string(last.step) + ") of the attention on one held-out input, " +
       count_of(t.loss.size(), "loss point") + ", " + count_of(t.accuracy.size(), "accuracy point") + ", " +
       count_of(t.answers.size(), "answer") +
       ". Positions count from 1 (query 1 is the first token), layers and heads from 0. Every number on "
       "this page is the trace's.</p></header>\n<main>\n";
  s += "<section class=\"part what\"><h2>What to look for</h2>\n" + what_to_look_for(t.task, md.layers) +
       "<p>Each heatmap is one head's attention weights on the saved input: row i is query i, column j is "
       "key j, "
       "darker is more weight (0 white, 1 darkest: the same scale at every step, so heads can be compared "
       "over "
       "training). A key after its query is masked (hatched): the model is causal. Hover or focus a cell for "
       "its "
       "weight as the trace has it.</p></section>\n";
  s += "<section class=\"part\" id=\"attention\"><h2>Attention over training</h2>\n<div "
       "class=\"player\"><button "
       "type=\"button\" id=\"play\">Play</button><label for=\"step\" class=\"dt\">saved step</label><input "
       "type=\"range\" id=\"step\" min=\"0\" max=\"" +
       std::to_string(t.snapshots.size() - 1) + "\" step=\"1\" value=\"" +
       std::to_string(t.snapshots.size() - 1) +
       "\"/><span id=\"readout\" class=\"readout\"></span></div>\n<div class=\"scale\">weight "
       "<span>0</span><span "
       "class=\"bar\"></span><span>1</span> <span class=\"keep\"><span class=\"hatch\"></span> masked (a key "
       "after its "
       "query)</span> <span>\u00b7 labels: position, token</span></div>\n<div "
       "id=\"heatmaps\"><noscript><p>This page draws "
       "its heatmaps with JavaScript (inline, no network).</p></noscript></div>\n</section>\n";

  // the curves
  // held-out first, wide and pale, so that the train line drawn over it stays visible where they meet
  std::vector<series> loss_series(2);
  loss_series[0] = {"held-out", "heldout", {}};
  loss_series[1] = {"train", "train", {}};
  double lo = HUGE_VAL, hi = 0;
  for (const auto& p : t.loss) {
    loss_series[1].xy.emplace_back(static_cast<double>(p.step), p.train);
    lo = std::min(lo, p.train), hi = std::max(hi, p.train);
    if (p.heldout) {
      loss_series[0].xy.emplace_back(static_cast<double>(p.step), *p.heldout);
      lo = std::min(lo, *p.heldout), hi = std::max(hi, *p.heldout);
    }
  }
  // a log axis when the loss spans two decades or more and never reaches 0 (a linear one would
  // flatten the last part of training, where reverse's loss goes from 0.1 to 0.001)
  const bool log_y = lo > 0 && hi / lo >= 100;
  const double y_lo = log_y ? std::pow(10.0, std::floor(std::log10(lo))) : 0;
  const double y_hi = log_y ? std::pow(10.0, std::ceil(std::log10(hi))) : (hi > 0 ? hi * 1.05 : 1);
  s += "<section class=\"part\" id=\"curves\"><h2>Loss and accuracy</h2>\n<div class=\"charts\"><figure "
       "id=\"loss\"><figcaption>Cross-entropy loss (nats) of the training batch at each recorded step, and "
       "on the "
       "held-out inputs where measured (" +
       std::to_string(loss_series[1].xy.size()) + " and " + std::to_string(loss_series[0].xy.size()) +
       " points; " + (log_y ? "log scale" : "linear scale") +
       "). The dashed line is the slider's step.</figcaption><div class=\"scroll\">" +
       chart_svg("loss-chart", loss_series, log_y ? "loss (log scale)" : "loss", log_y, y_lo, y_hi) +
       "</div></figure>\n";
  if (!t.accuracy.empty()) {
    std::vector<series> acc(1);
    acc[0] = {"held-out accuracy", "acc", {}};
    for (const auto& p : t.accuracy) acc[0].xy.emplace_back(static_cast<double>(p.step), p.accuracy);
    s += "<figure id=\"accuracy\"><figcaption>Held-out accuracy (the fraction of held-out inputs answered "
         "exactly, " +
         std::to_string(acc[0].xy.size()) + " points).</figcaption><div class=\"scroll\">" +
         chart_svg("accuracy-chart", acc, "accuracy", false, 0, 1, true) + "</div></figure>\n";
  } else {
    s += "<p>This trace has no accuracy points.</p>\n";
  }
  s += "</div></section>\n";

  // the answers
  std::size_t right = 0;
  for (const auto& a : t.answers) right += a.correct;
  s += "<section class=\"part\" id=\"answers\"><h2>Answers on held-out inputs</h2>\n";
  if (t.answers.empty()) {
    s += "<p>This trace has no answers.</p>\n";
  } else {
    s += "<p>After the last step: " + std::to_string(right) + " of " + std::to_string(t.answers.size()) +
         " right.</p>\n<div class=\"scroll\"><table "
         "class=\"answers\"><thead><tr><th>input</th><th>expected</th>"
         "<th>output</th><th>right?</th></tr></thead><tbody>\n";
    for (const auto& a : t.answers)
      s += std::string("<tr class=\"") + (a.correct ? "right" : "wrong") + "\"><td>" + xml_escape(a.input) +
           "</td><td>" + xml_escape(a.expected) + "</td><td>" + xml_escape(a.output) +
           "</td><td class=\"mark\">" + (a.correct ? "\u2713 right" : "\u2717 wrong") + "</td></tr>\n";
    s += "</tbody></table></div>\n";
  }
  s += "</section>\n";

  // the settings and the timing
  auto row = [](const std::string& k, const std::string& v) {
    return "<tr><th>" + xml_escape(k) + "</th><td>" + xml_escape(v) + "</td></tr>\n";
  };
  std::string vocab_text;
  for (std::size_t k = 0; k < md.vocab.size() && k < 64; ++k) vocab_text += (k ? " " : "") + md.vocab[k];
  if (md.vocab.size() > 64) vocab_text += " \u2026 (" + std::to_string(md.vocab.size() - 64) + " more)";
  s += "<section class=\"part\" id=\"settings\"><h2>The run</h2>\n<div class=\"tables\"><table class=\"kv\" "
       "id=\"model\"><caption>model</caption>\n";
  s += row("task", t.task) + row("layers", std::to_string(md.layers)) +
       row("heads", std::to_string(md.heads)) + row("d_model", std::to_string(md.d_model)) +
       row("d_ff", std::to_string(md.d_ff)) + row("context", std::to_string(md.context) + " tokens") +
       row("norm", md.norm_first ? "pre-norm (LayerNorm before each block)"
                                 : "post-norm (LayerNorm after each block)") +
       row("vocabulary", std::to_string(md.vocab.size()) + " tokens: " + vocab_text);
  s += "</table>\n<table class=\"kv\" id=\"optimizer\"><caption>optimizer</caption>\n" +
       row("name", t.optimizer.name) + row("lr", shortest(t.optimizer.lr));
  if (t.optimizer.betas)
    s += row("betas",
             "(" + shortest(t.optimizer.betas->first) + ", " + shortest(t.optimizer.betas->second) + ")");
  if (t.optimizer.eps) s += row("eps", shortest(*t.optimizer.eps));
  if (t.optimizer.weight_decay) s += row("weight_decay", shortest(*t.optimizer.weight_decay));
  s += row("seed", std::to_string(t.seed)) + row("threads", std::to_string(t.threads));
  s += "</table>\n<table class=\"kv\" id=\"timing\"><caption>timing</caption>\n" +
       row("seconds", shortest(t.timing.seconds)) +
       row("steps per second", shortest(t.timing.steps_per_second)) +
       row("peak memory", std::to_string(t.timing.peak_bytes) + " bytes (" +
                              fixed(static_cast<double>(t.timing.peak_bytes) / 1048576.0, "%.1f") + " MiB)");
  s += "</table></div>\n</section>\n</main>\n<div id=\"qkv-tip\" role=\"tooltip\" hidden=\"hidden\"></div>\n"
       "<footer>Written by qkv from the training trace <code>" +
       xml_escape(source_name) +
       "</code>. Every number on this page is the trace's.</footer>\n"
       "<script type=\"application/json\" id=\"qkv-data\">";
  s += d;
  s += "</script>\n<script>//<![CDATA[\n";
  s += js;
  s += "//]]>\n</script>\n</body>\n</html>\n";
  if (s.size() > limits.page_bytes)
    throw limit_error("the training page of " + std::string(source_name) + " would be " +
                      std::to_string(s.size()) + " bytes, above the limit of " +
                      std::to_string(limits.page_bytes) + " (save fewer snapshots or loss points)");
  return s;
}

/// @brief write the training page of the trace `trace_json` (named `source_name` on the page and
/// in messages) to `out`: json_error or limit_error naming the field on a bad trace, before a
/// byte is written; the page is at most limits.page_bytes
inline void write_training_page(std::ostream& out, std::string_view trace_json, std::string_view source_name,
                                const training_page_limits& limits = {}) {
  const std::string name(source_name);
  const std::string page = training_page_html(read_training_trace(trace_json, name, limits), name, limits);
  out.write(page.data(), static_cast<std::streamsize>(page.size()));
}

}  // namespace qkv::io
