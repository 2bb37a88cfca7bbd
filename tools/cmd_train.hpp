// cmd_train.hpp: the parts of `qkv train` (cmd_train.cpp): its options, the training run with
// everything a learner sees of it (train_report), the trace JSON (docs/training.md, "The
// trace") and the checkpoint (PyTorch's state_dict names, safetensors).
//
// `--html` writes the training page (io/training_page.hpp) from the same trace JSON.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>
#include <qkv/io/file.hpp>
#include <qkv/io/safetensors.hpp>
#include <qkv/runtime/trainer.hpp>

#include "cli.hpp"
#include "cmd_torch.hpp"  // parse_seed

namespace qkv::cli::train_cmd {

namespace rt = qkv::runtime;

/// the most steps one run may take, and the most threads
inline constexpr std::uint64_t max_steps = 1000000;
inline constexpr std::uint64_t max_threads = 64;

/// `qkv train`'s options (defaults per task in defaults_for)
struct options {
  std::string task;
  std::uint64_t steps = 0, seed = 0, threads = 1, batch = 64, digits = 4, context = 32;
  rt::transformer_options model;
  std::string optimizer = "adamw";
  double lr = 0;
  std::string text_file;
  std::string out, trace, html;
  bool quiet = false;
};

inline constexpr const char* usage =
    "usage: qkv train TASK [--steps N] [--seed S] [--threads N] [--layers L] [--heads H]\n"
    "                 [--d-model D] [--d-ff F] [--post-norm] [--digits N] [--context T]\n"
    "                 [--batch B] [--optimizer adamw|sgd] [--lr X] [--text FILE]\n"
    "                 [--out CHECKPOINT.safetensors] [--trace TRACE.json] [--html PAGE.html]\n"
    "                 [--quiet]\n";

inline constexpr const char* help =
    "usage: qkv train TASK [--steps N] [--seed S] [--threads N] [--layers L] [--heads H]\n"
    "                 [--d-model D] [--d-ff F] [--post-norm] [--digits N] [--context T]\n"
    "                 [--batch B] [--optimizer adamw|sgd] [--lr X] [--text FILE]\n"
    "                 [--out CHECKPOINT.safetensors] [--trace TRACE.json] [--html PAGE.html]\n"
    "                 [--quiet]\n\n"
    "Trains a small causal transformer on the runtime path (docs/training.md), deterministically:\n"
    "the same seed gives the same bits at any number of threads, and the initial weights are\n"
    "those PyTorch draws after torch.manual_seed(S) for the same module.\n"
    "TASK: reverse (a sequence of digits), sort (digits), text (characters of a text; default\n"
    "      the project's own docs/*.md, MIT licensed like the rest of qkv).\n"
    "  --steps N        training steps (default: reverse 600, sort 2500, text 2000; at most 10^6)\n"
    "  --seed S         torch.manual_seed(S) for the weights and SplitMix64(S) for the batches (0)\n"
    "  --threads N      threads (1; 0 = one per core); the results do not depend on it\n"
    "  --layers L       1 to 4 layers (reverse 1, sort 2, text 2); --heads H (2), --d-model D (32;\n"
    "                   text 64), --d-ff F (64; text 128), --post-norm (default: pre-norm)\n"
    "  --digits N       digits per input of reverse and sort (4); --context T: text (32)\n"
    "  --batch B        sequences per step (64); --optimizer adamw (default) or sgd; --lr X\n"
    "                   (AdamW 0.001, betas 0.9 0.98, eps 1e-8, weight decay 0.01; SGD 0.1)\n"
    "  --text FILE      the text of the text task (UTF-8)\n"
    "  --out FILE       write the trained weights as safetensors (PyTorch's state_dict names)\n"
    "  --trace FILE     write the training trace as JSON (losses, accuracy, attention of every\n"
    "                   head at about 30 saved steps, held-out answers, timing)\n"
    "  --html FILE      write the training page: the attention of every head over training (a\n"
    "                   slider), the loss and accuracy curves, the held-out answers (one file,\n"
    "                   offline; docs/pages.md, \"The training page\")\n"
    "  --quiet          no progress line on stderr\n"
    "Prints a summary on stdout; the progress line (step, loss, steps/s, time left) on stderr.\n"
    "Files are written whole or not at all, after training. Exit 1 if a loss became NaN.\n";

/// a whole number option in [lo, hi]
inline std::uint64_t parse_count(std::string_view s, std::string_view what, std::uint64_t lo,
                                 std::uint64_t hi) {
  std::uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc{} || r.ptr != s.data() + s.size() || v < lo || v > hi)
    throw input_error(std::string(what) + ": '" + std::string(s) + "' is not a whole number from " +
                      std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

inline double parse_rate(std::string_view s, std::string_view what) {
  const std::string t(s);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !(v > 0) || !std::isfinite(v) || v > 10)
    throw input_error(std::string(what) + ": '" + t + "' is not a learning rate (a number in (0, 10])");
  return v;
}

/// the options of a command line; throws input_error naming what is wrong
inline options parse(const args& a) {
  options o;
  std::map<std::string, bool> given;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const std::string arg(a[k]);
    auto value = [&]() -> std::string_view {
      if (k + 1 >= a.size()) throw input_error(arg + " needs a value (qkv train --help)");
      return a[++k];
    };
    given[arg] = true;
    if (arg == "--steps")
      o.steps = parse_count(value(), arg, 1, max_steps);
    else if (arg == "--seed")
      o.seed = torch_cmd::parse_seed(value(), arg);
    else if (arg == "--threads")
      o.threads = parse_count(value(), arg, 0, max_threads);
    else if (arg == "--layers")
      o.model.layers = parse_count(value(), arg, 1, rt::transformer_limits::max_layers);
    else if (arg == "--heads")
      o.model.heads = parse_count(value(), arg, 1, 64);
    else if (arg == "--d-model")
      o.model.d_model = parse_count(value(), arg, 1, 1024);
    else if (arg == "--d-ff")
      o.model.d_ff = parse_count(value(), arg, 1, 4096);
    else if (arg == "--post-norm")
      o.model.norm_first = false;
    else if (arg == "--digits")
      o.digits = parse_count(value(), arg, 1, 6);
    else if (arg == "--context")
      o.context = parse_count(value(), arg, 2, 256);
    else if (arg == "--batch")
      o.batch = parse_count(value(), arg, 1, 4096);
    else if (arg == "--optimizer") {
      o.optimizer = std::string(value());
      if (o.optimizer != "adamw" && o.optimizer != "sgd")
        throw input_error("--optimizer: '" + o.optimizer + "' is not adamw or sgd");
    } else if (arg == "--lr")
      o.lr = parse_rate(value(), arg);
    else if (arg == "--text")
      o.text_file = std::string(value());
    else if (arg == "--out")
      o.out = std::string(value());
    else if (arg == "--trace")
      o.trace = std::string(value());
    else if (arg == "--html")
      o.html = std::string(value());
    else if (arg == "--quiet")
      o.quiet = true;
    else if (arg.starts_with("-"))
      throw input_error("unknown option '" + arg + "'\n" + usage);
    else if (o.task.empty())
      o.task = arg;
    else
      throw input_error("one task only ('" + o.task + "' and '" + arg + "')\n" + usage);
  }
  if (o.task.empty()) throw input_error(std::string("no task (reverse, sort or text)\n") + usage);
  if (o.task != "reverse" && o.task != "sort" && o.task != "text")
    throw input_error("unknown task '" + o.task + "'; the tasks are reverse, sort and text");
  const bool text = o.task == "text";
  if (!given["--steps"]) o.steps = o.task == "reverse" ? 600 : o.task == "sort" ? 2500 : 2000;
  if (!given["--layers"]) o.model.layers = o.task == "reverse" ? 1 : 2;
  if (!given["--d-model"]) o.model.d_model = text ? 64 : 32;
  if (!given["--d-ff"]) o.model.d_ff = text ? 128 : 64;
  if (!given["--lr"]) o.lr = o.optimizer == "adamw" ? 1e-3 : 0.1;
  if (o.model.d_model % o.model.heads != 0)
    throw input_error("--heads " + std::to_string(o.model.heads) + " does not divide --d-model " +
                      std::to_string(o.model.d_model));
  if (!text && (given["--context"] || given["--text"]))
    throw input_error("--context and --text are for the text task");
  if (text && given["--digits"]) throw input_error("--digits is for reverse and sort");
  // the outputs' folders must exist before minutes of training are spent
  for (const auto* path : {&o.out, &o.trace, &o.html}) {
    if (path->empty()) continue;
    const auto dir = std::filesystem::path(*path).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      throw input_error("cannot write '" + *path + "': the folder " + dir.string() + " does not exist");
  }
  return o;
}

/// everything a learner sees of a run (the trace's fields)
struct train_report {
  std::vector<std::string> vocab;
  std::vector<std::array<double, 3>> loss;  // step, train loss, held-out loss (NaN: none)
  std::vector<std::array<double, 2>> accuracy;
  struct snapshot {
    std::size_t step;
    std::vector<std::string> tokens;
    std::vector<std::vector<rt::dynamic_matrix<float>>> attention;
  };
  std::vector<snapshot> snapshots;
  struct answer {
    std::string input, expected, output;
    bool correct;
  };
  std::vector<answer> answers;
  double seconds = 0, train_seconds = 0;
  std::uint64_t peak_bytes = 0;
  std::optional<std::size_t> solved_step;  // the first evaluation with every evaluated answer right
  double solved_seconds = 0;
  double final_accuracy = 0, final_heldout_loss = 0, baseline = 0;
  std::size_t heldout_count = 0;
};

/// the steps at which attention is saved: about 30, spread evenly, 0 and the last included
inline std::vector<std::size_t> snapshot_steps(std::size_t steps) {
  std::vector<std::size_t> s;
  const std::size_t n = std::min<std::size_t>(30, steps);
  for (std::size_t k = 0; k <= n; ++k) {
    const std::size_t v = (k * steps + n / 2) / n;
    if (s.empty() || s.back() != v) s.push_back(v);
  }
  return s;
}

/// peak resident memory of the process, bytes (getrusage's ru_maxrss, kilobytes on Linux)
inline std::uint64_t peak_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return std::uint64_t(u.ru_maxrss) * 1024;
}

/// the held-out evaluation set: digit tasks' prompts and answers, the text's windows
struct evaluation {
  std::vector<std::int32_t> tokens, targets;  // teacher-forced: for the held-out loss
  std::size_t sequences = 0;
};

/// the first `most` held-out inputs of a digit task (all when most is 0) as sequences
inline evaluation heldout_set(const rt::training_task& task, std::size_t most) {
  evaluation e;
  if (task.kind() == rt::task_kind::text) {
    task.heldout_text(most == 0 ? 256 : most, e.tokens, e.targets);
    e.sequences = e.tokens.size() / task.context();
    return e;
  }
  for (auto s : task.heldout()) {
    if (most && e.sequences == most) break;
    task.example(s, e.tokens, e.targets);
    ++e.sequences;
  }
  return e;
}

/// held-out accuracy: digit tasks: every answer digit right, decoded greedily; text: the next
/// character's argmax under teacher forcing
inline double accuracy_of(rt::trainer<float>& tr, const evaluation& e, rt::thread_pool* pool,
                          std::vector<train_report::answer>* answers = nullptr, std::size_t keep = 0) {
  const auto& task = tr.task();
  const std::size_t len = task.context();
  if (task.kind() == rt::task_kind::text) {
    // next-character accuracy, sequence by sequence, from the generator's forward
    std::size_t right = 0, total = 0;
    for (std::size_t s = 0; s < e.sequences; ++s) {
      const std::vector<std::int32_t> one(e.tokens.begin() + std::ptrdiff_t(s * len),
                                          e.tokens.begin() + std::ptrdiff_t((s + 1) * len));
      for (std::size_t p = 1; p <= len; p += len / 4 + 1) {
        const std::vector<std::int32_t> prompt(one.begin(), one.begin() + std::ptrdiff_t(p));
        const auto next = tr.generate(prompt, 1, p, 1, pool);
        right += next[0] == e.targets[s * len + p - 1];
        ++total;
      }
    }
    if (answers)
      for (std::size_t s = 0; s < std::min(keep, e.sequences); ++s) {
        const std::size_t half = len / 2;
        const std::vector<std::int32_t> prompt(e.tokens.begin() + std::ptrdiff_t(s * len),
                                               e.tokens.begin() + std::ptrdiff_t(s * len + half));
        const auto out = tr.generate(prompt, 1, half, len - half, pool);
        std::vector<std::int32_t> expected(e.targets.begin() + std::ptrdiff_t(s * len + half - 1),
                                           e.targets.begin() + std::ptrdiff_t((s + 1) * len - 1));
        answers->push_back({task.spell(prompt.data(), half), task.spell(expected.data(), expected.size()),
                            task.spell(out.data(), out.size()), out == expected});
      }
    return double(right) / double(total);
  }
  const std::size_t n = task.digits();
  std::vector<std::int32_t> prompts;
  for (std::size_t s = 0; s < e.sequences; ++s)
    prompts.insert(prompts.end(), e.tokens.begin() + std::ptrdiff_t(s * len),
                   e.tokens.begin() + std::ptrdiff_t(s * len + n + 1));
  const auto out = tr.generate(prompts, e.sequences, n + 1, n, pool);
  std::size_t right = 0;
  for (std::size_t s = 0; s < e.sequences; ++s) {
    bool all = true;
    for (std::size_t k = 0; k < n; ++k) all = all && out[s * n + k] == e.targets[s * len + n + k];
    right += all;
    if (answers && keep > 0 && s % std::max<std::size_t>(1, e.sequences / keep) == 0 &&
        answers->size() < keep) {
      const std::int32_t* in = e.tokens.data() + s * len;
      answers->push_back(
          {task.spell(in, n), task.spell(&e.targets[s * len + n], n), task.spell(&out[s * n], n), all});
    }
  }
  return double(right) / double(e.sequences);
}

/// the progress line: step, loss, steps/s, time left
inline void progress(std::size_t step, std::size_t steps, double loss, double elapsed, bool tty) {
  const double rate = elapsed > 0 ? double(step) / elapsed : 0;
  const double left = rate > 0 ? double(steps - step) / rate : 0;
  char line[160];
  std::snprintf(line, sizeof line, "step %zu/%zu  loss %.4f  %.1f steps/s  %.0f s left", step, steps, loss,
                rate, left);
  if (tty)
    std::cerr << "\r" << line << "   " << std::flush;
  else
    std::cerr << line << "\n";
}

/// the trained weights as safetensors bytes: every tensor F32 under its state_dict name, the
/// configuration in the metadata
inline std::string checkpoint(const rt::trainer<float>& tr, const options& o) {
  std::vector<io::safetensors_tensor> ts;
  const auto& m = tr.model();
  for (const auto& t : m.tensors()) {
    std::vector<std::uint64_t> shape(t.shape.begin(), t.shape.end());
    const std::vector<float> v(m.values().begin() + std::ptrdiff_t(t.offset),
                               m.values().begin() + std::ptrdiff_t(t.offset + t.size));
    ts.push_back(io::make_safetensors_tensor(t.name, shape, v));
  }
  const auto& mo = m.options();
  nlohmann::ordered_json cfg = {{"task", o.task},        {"vocab", tr.task().vocab()},
                                {"context", mo.context}, {"d_model", mo.d_model},
                                {"heads", mo.heads},     {"d_ff", mo.d_ff},
                                {"layers", mo.layers},   {"norm_first", mo.norm_first},
                                {"seed", o.seed},        {"steps", tr.steps()}};
  return io::safetensors_bytes(ts, {{"format", "pt"}, {"qkv_train", cfg.dump()}});
}

/// the trace JSON (docs/training.md, "The trace"; the training page reads it)
inline nlohmann::ordered_json trace_json(const rt::trainer<float>& tr, const options& o, std::size_t threads,
                                         const train_report& r) {
  using oj = nlohmann::ordered_json;
  const auto& mo = tr.model().options();
  oj j;
  j["format"] = "qkv-training-trace-1";
  j["task"] = o.task;
  j["seed"] = o.seed;
  j["threads"] = threads;
  j["model"] = {{"layers", mo.layers}, {"heads", mo.heads},     {"d_model", mo.d_model},
                {"d_ff", mo.d_ff},     {"context", mo.context}, {"norm_first", mo.norm_first},
                {"vocab", r.vocab}};
  if (o.optimizer == "adamw")
    j["optimizer"] = {
        {"name", "adamw"}, {"lr", o.lr}, {"betas", {0.9, 0.98}}, {"eps", 1e-8}, {"weight_decay", 0.01}};
  else
    j["optimizer"] = {{"name", "sgd"}, {"lr", o.lr}, {"momentum", 0.0}, {"weight_decay", 0.0}};
  oj loss = oj::array();
  for (const auto& l : r.loss)
    loss.push_back({std::size_t(l[0]), l[1], std::isnan(l[2]) ? oj(nullptr) : oj(l[2])});
  j["loss"] = loss;
  oj acc = oj::array();
  for (const auto& a : r.accuracy) acc.push_back({std::size_t(a[0]), a[1]});
  j["accuracy"] = acc;
  oj snaps = oj::array();
  for (const auto& s : r.snapshots) {
    oj layers = oj::array();
    for (const auto& l : s.attention) {
      oj heads = oj::array();
      for (const auto& h : l) {
        oj rows = oj::array();
        for (std::size_t i = 0; i < h.rows(); ++i) {
          oj row = oj::array();
          for (std::size_t k = 0; k < h.cols(); ++k) row.push_back(h(i, k));
          rows.push_back(row);
        }
        heads.push_back(rows);
      }
      layers.push_back(heads);
    }
    snaps.push_back({{"step", s.step}, {"tokens", s.tokens}, {"attention", layers}});
  }
  j["snapshots"] = snaps;
  oj answers = oj::array();
  for (const auto& a : r.answers)
    answers.push_back(
        {{"input", a.input}, {"expected", a.expected}, {"output", a.output}, {"correct", a.correct}});
  j["answers"] = answers;
  j["timing"] = {{"seconds", r.seconds},
                 {"steps_per_second", r.train_seconds > 0 ? double(tr.steps()) / r.train_seconds : 0.0},
                 {"peak_bytes", r.peak_bytes}};
  return j;
}

}  // namespace qkv::cli::train_cmd
