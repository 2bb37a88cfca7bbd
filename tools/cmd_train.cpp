// cmd_train.cpp: `qkv train`, compiled once (tools/meson.build: the library qkv_commands, which
// the tool links). docs/training.md describes the tasks, the model and the trace.
#include "cmd_train.hpp"

#include <qkv/io/training_page.hpp>

#include <filesystem>

#ifndef QKV_DATA_DIR
#define QKV_DATA_DIR "data"
#endif

namespace qkv::cli {

int cmd_train(const args& a) {
  using namespace train_cmd;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (a[k] == "--help" || (k == 0 && a[k] == "-h")) {
      std::cout << help;
      return exit_ok;
    }
  const options o = parse(a);
  // the task, checked before anything is trained
  std::optional<rt::training_task> task;
  try {
    if (o.task == "text") {
      // the text: --text FILE, or the project's own docs (docs/*.md of the source tree, in name
      // order; MIT licensed as the rest of qkv)
      std::vector<std::string> paths;
      if (!o.text_file.empty()) {
        paths.push_back(o.text_file);
      } else {
        const std::filesystem::path docs = std::filesystem::path(QKV_DATA_DIR) / ".." / "docs";
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(docs, ec))
          if (e.path().extension() == ".md") paths.push_back(e.path().string());
        if (ec || paths.empty())
          throw input_error("cannot read the default text, " + docs.string() +
                            "/*.md (the source tree's docs); give --text FILE");
        std::sort(paths.begin(), paths.end());
      }
      std::string all;
      for (const auto& path : paths) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw input_error("cannot read the text '" + path + "'");
        std::ostringstream s;
        s << in.rdbuf();
        all += s.str();
      }
      try {
        task = rt::training_task::text(all, o.context);
      } catch (const std::invalid_argument& e) {
        throw input_error((paths.size() == 1 ? paths[0] : std::string("the docs")) + ": " + e.what());
      }
    } else {
      task = rt::training_task::digits(o.task == "reverse" ? rt::task_kind::reverse : rt::task_kind::sort,
                                       o.digits);
    }
  } catch (const std::invalid_argument& e) { throw input_error(e.what()); }
  const std::size_t threads = o.threads == 0 ? rt::thread_pool::hardware_threads() : o.threads;
  rt::set_threads(threads);
  std::variant<rt::adamw_options, rt::sgd_options> opt;
  if (o.optimizer == "adamw") {
    rt::adamw_options w;
    w.lr = o.lr;
    w.beta2 = 0.98;
    opt = w;
  } else {
    rt::sgd_options s;
    s.lr = o.lr;
    opt = s;
  }
  std::optional<rt::trainer<float>> trp;
  try {
    trp.emplace(*task, o.model, o.seed, o.batch, opt);
  } catch (const rt::shape_error& e) { throw input_error(e.what()); } catch (const rt::size_limit_error& e) {
    throw input_error(e.what());
  }
  auto& tr = *trp;
  rt::thread_pool* pool = &rt::default_pool();
  const bool text = o.task == "text";
  const evaluation during = heldout_set(*task, text ? 16 : 256);
  const evaluation final_set = heldout_set(*task, text ? 64 : 0);
  const std::size_t len = task->context();
  // the input whose attention is shown: the first held-out one with no repeated token (a
  // permutation is then visible as one), else the first
  std::size_t shown_at = 0;
  for (std::size_t s = 0; s < during.sequences && !text; ++s) {
    std::vector<std::int32_t> in(during.tokens.begin() + std::ptrdiff_t(s * len),
                                 during.tokens.begin() + std::ptrdiff_t(s * len + task->digits()));
    std::sort(in.begin(), in.end());
    if (std::adjacent_find(in.begin(), in.end()) == in.end()) {
      shown_at = s;
      break;
    }
  }
  const std::vector<std::int32_t> shown(during.tokens.begin() + std::ptrdiff_t(shown_at * len),
                                        during.tokens.begin() + std::ptrdiff_t((shown_at + 1) * len));
  train_report r;
  r.vocab = task->vocab();
  const auto saved = snapshot_steps(o.steps);
  std::size_t next_snapshot = 0;
  const std::size_t eval_every = std::max<std::size_t>(1, o.steps / 40);
  auto snapshot = [&](std::size_t step) {
    std::vector<std::string> tokens;
    for (auto t : shown) tokens.push_back(r.vocab[std::size_t(t)]);
    r.snapshots.push_back({step, tokens, rt::transformer_attention_maps(tr.model(), shown.data(), len)});
  };
  const auto start = std::chrono::steady_clock::now();
  const bool tty = !o.quiet && ::isatty(2);
  auto last_print = start;
  snapshot(0);
  ++next_snapshot;
  r.accuracy.push_back({0.0, accuracy_of(tr, during, pool)});
  for (std::size_t step = 1; step <= o.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    double loss = 0;
    try {
      loss = tr.step(pool);
    } catch (const rt::training_error& e) {
      if (tty) std::cerr << "\n";
      std::cerr << "qkv train: " << e.what() << "; nothing was written\n";
      return 1;
    }
    const auto t1 = std::chrono::steady_clock::now();
    r.train_seconds += std::chrono::duration<double>(t1 - t0).count();
    double heldout = std::nan("");
    if (step % eval_every == 0 || step == o.steps) {
      heldout = tr.loss_of(during.tokens, during.targets, during.sequences, pool);
      const double acc = accuracy_of(tr, during, pool);
      r.accuracy.push_back({double(step), acc});
      if (acc == 1.0 && !r.solved_step) {
        r.solved_step = step;
        r.solved_seconds = r.train_seconds;
      }
    }
    r.loss.push_back({double(step), loss, heldout});
    if (next_snapshot < saved.size() && saved[next_snapshot] == step) {
      snapshot(step);
      ++next_snapshot;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!o.quiet &&
        (step == o.steps || std::chrono::duration<double>(now - last_print).count() > (tty ? 0.2 : 5.0))) {
      progress(step, o.steps, loss, r.train_seconds, tty);
      last_print = now;
    }
  }
  if (tty) std::cerr << "\n";
  r.final_accuracy = accuracy_of(tr, final_set, pool, &r.answers, 20);
  r.final_heldout_loss = tr.loss_of(final_set.tokens, final_set.targets, final_set.sequences, pool);
  r.heldout_count = final_set.sequences;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_bytes = peak_bytes();
  // the summary
  std::ostringstream s;
  s.precision(4);
  s << "qkv train " << o.task << ": " << o.steps << " steps, seed " << o.seed << ", " << threads << " thread"
    << (threads == 1 ? "" : "s") << ", " << tr.model().size() << " parameters\n";
  s << "  last training loss " << r.loss.back()[1] << ", held-out loss " << r.final_heldout_loss << "\n";
  if (text) {
    s << "  held-out next-character accuracy " << 100 * r.final_accuracy << "% (" << r.heldout_count
      << " windows of " << len << "); unigram baseline " << task->unigram_entropy() << " nats\n";
  } else {
    s << "  held-out accuracy " << 100 * r.final_accuracy << "% of " << r.heldout_count << " inputs";
    if (r.solved_step)
      s << "; first 100% on the 256 evaluated at step " << *r.solved_step << " after " << r.solved_seconds
        << " s of training";
    s << "\n";
  }
  s << "  " << r.train_seconds << " s training (" << double(o.steps) / r.train_seconds << " steps/s), "
    << r.seconds << " s in all, peak memory " << r.peak_bytes / (1024 * 1024) << " MiB\n";
  auto one_line = [](std::string t) {  // a text sample on one line: a line break as \n
    for (std::size_t p = t.find('\n'); p != std::string::npos; p = t.find('\n', p + 2))
      t.replace(p, 1, "\\n");
    return t;
  };
  for (std::size_t k = 0; k < std::min<std::size_t>(r.answers.size(), text ? 3 : 5); ++k) {
    const auto& an = r.answers[k];
    s << "  " << one_line(an.input) << " -> " << one_line(an.output);
    if (!an.correct) s << "  (expected " << one_line(an.expected) << ")";
    s << "\n";
  }
  const std::string weights = o.out.empty() ? std::string() : checkpoint(tr, o);
  const bool traced = !o.trace.empty() || !o.html.empty();
  const std::string trace = traced ? trace_json(tr, o, threads, r).dump() + "\n" : std::string();
  std::string page;  // the training page, from the trace as a file would hold it
  if (!o.html.empty()) {
    std::ostringstream html;
    try {
      io::write_training_page(html, trace, o.trace.empty() ? "qkv train " + o.task : o.trace);
    } catch (const std::runtime_error& e) { throw input_error(o.html + ": " + e.what()); }
    page = html.str();
  }
  std::vector<io::text_output> files;
  if (!o.out.empty()) files.push_back({o.out, weights});
  if (!o.trace.empty()) files.push_back({o.trace, trace});
  if (!o.html.empty()) files.push_back({o.html, page});
  try {
    io::write_text_files(files);
  } catch (const std::runtime_error& e) { throw input_error(e.what()); }
  for (const auto& f : files) s << wrote_line(std::string(f.path), f.path == o.html);
  std::cout << s.str();
  return exit_ok;
}

}  // namespace qkv::cli
