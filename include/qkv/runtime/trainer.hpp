// trainer.hpp: training a transformer (transformer.hpp) on a task (training_tasks.hpp) with
// AdamW or SGD (optimizer.hpp), deterministically, and what a learner wants to see of it:
// the losses, the held-out accuracy, the attention of every head at saved steps, the answers.
//
// One step: draw a batch (SplitMix64 seeded with the seed), split it into `gradient_chunks`
// fixed chunks of consecutive sequences, run each chunk's forward, cross-entropy and backward
// (in parallel on the pool, one chunk per task), add the chunks' gradients in chunk order,
// and apply the optimiser. The chunks depend only on the batch size, so the same seed gives the
// same bits at any number of threads (train_test.cpp compares 1 and 2 threads to the bit).
// The loss is the mean cross-entropy of the batch's counted targets (each chunk divides by
// the whole batch's count). A step whose loss is NaN or infinite is not applied: step() throws
// training_error naming the step, and the parameters stay those after the previous step.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "cross_entropy.hpp"
#include "optimizer.hpp"
#include "thread_pool.hpp"
#include "training_tasks.hpp"
#include "transformer.hpp"

namespace qkv::runtime {

/// a step that cannot be applied (a NaN or infinite loss); what() names the step
struct training_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// the number of chunks a batch is split into: fixed, so that the bits do not depend on threads
inline constexpr std::size_t gradient_chunks = 4;

/// @brief a model, its optimiser and a task's batches
template <class T>
class trainer {
 public:
  using optimizer = std::variant<adamw<T>, sgd<T>>;

  /// the model initialised by torch.manual_seed(seed)'s generator; batches drawn by
  /// SplitMix64(seed); o.vocab and o.context are taken from the task
  trainer(const training_task& task, transformer_options o, std::uint64_t seed, std::size_t batch,
          std::variant<adamw_options, sgd_options> opt)
      : task_(task),
        model_(with_task(o, task, batch)),
        batch_(batch),
        rng_{seed},
        optimizer_(make_optimizer(opt, model_.size())) {
    qkv::torch::generator gen(seed);
    model_.initialize(gen);
    grad_.assign(model_.size(), T(0));
    chunk_grads_.assign(gradient_chunks, std::vector<T>(model_.size(), T(0)));
    caches_.resize(gradient_chunks);
  }

  [[nodiscard]] transformer<T>& model() { return model_; }
  [[nodiscard]] const transformer<T>& model() const { return model_; }
  [[nodiscard]] const training_task& task() const { return task_; }
  [[nodiscard]] std::size_t steps() const { return steps_; }
  [[nodiscard]] const std::vector<T>& gradient() const { return grad_; }
  [[nodiscard]] std::size_t batch() const { return batch_; }

  /// the loss and gradient of a batch (grad_ holds the gradient), no update
  double loss_and_gradient(const std::vector<std::int32_t>& tokens, const std::vector<std::int32_t>& targets,
                           std::size_t sequences, thread_pool* pool) {
    return chunked_loss(tokens, targets, sequences, pool, true);
  }

  /// @brief one training step; returns the batch's loss (before the update)
  /// @throws training_error when the loss is NaN or infinite (nothing is updated)
  double step(thread_pool* pool = &default_pool()) {
    task_.batch(rng_, batch_, tokens_, targets_);
    const double loss = loss_and_gradient(tokens_, targets_, batch_, pool);
    if (!std::isfinite(loss))
      throw training_error("step " + std::to_string(steps_ + 1) + ": the loss is " + std::to_string(loss) +
                           "; the step was not applied (the parameters are those after step " +
                           std::to_string(steps_) + ")");
    std::visit([&](auto& o) { o.step(model_.values().data(), grad_.data(), grad_.size()); }, optimizer_);
    ++steps_;
    return loss;
  }

  /// the mean cross-entropy of given sequences (no gradient kept), in chunks on the pool
  double loss_of(const std::vector<std::int32_t>& tokens, const std::vector<std::int32_t>& targets,
                 std::size_t sequences, thread_pool* pool = &default_pool()) {
    return chunked_loss(tokens, targets, sequences, pool, false);
  }

  /// @brief greedy continuation: each prompt (sequences x prompt_len tokens) extended by `more`
  /// tokens, each the argmax of the logits at the last position (the first largest), fed back.
  /// The window slides when the context is full. Returns sequences x more tokens.
  std::vector<std::int32_t> generate(const std::vector<std::int32_t>& prompts, std::size_t sequences,
                                     std::size_t prompt_len, std::size_t more,
                                     thread_pool* pool = &default_pool()) {
    const std::size_t ctx = task_.context(), V = model_.options().vocab;
    std::vector<std::vector<std::int32_t>> seqs(sequences);
    for (std::size_t s = 0; s < sequences; ++s)
      seqs[s].assign(prompts.begin() + std::ptrdiff_t(s * prompt_len),
                     prompts.begin() + std::ptrdiff_t((s + 1) * prompt_len));
    const std::size_t chunks = std::min(gradient_chunks, sequences);
    for (std::size_t k = 0; k < more; ++k) {
      const std::size_t len = std::min(ctx, prompt_len + k), from = prompt_len + k - len;
      auto run = [&](std::size_t c) {
        const std::size_t s0 = c * sequences / chunks, s1 = (c + 1) * sequences / chunks;
        std::vector<std::int32_t> in;
        for (std::size_t s = s0; s < s1; ++s)
          in.insert(in.end(), seqs[s].begin() + std::ptrdiff_t(from), seqs[s].end());
        auto& cache = caches_[c];
        transformer_forward(model_, in.data(), s1 - s0, len, cache);
        for (std::size_t s = s0; s < s1; ++s) {
          const T* row = cache.logits.row((s - s0) * len + len - 1);
          std::size_t best = 0;
          for (std::size_t j = 1; j < V; ++j)
            if (row[j] > row[best]) best = j;
          seqs[s].push_back(std::int32_t(best));
        }
      };
      if (pool && chunks > 1)
        pool->parallel_for(chunks, run);
      else
        for (std::size_t c = 0; c < chunks; ++c) run(c);
    }
    std::vector<std::int32_t> out;
    for (const auto& s : seqs) out.insert(out.end(), s.begin() + std::ptrdiff_t(prompt_len), s.end());
    return out;
  }

 private:
  /// the mean cross-entropy of `sequences` sequences in min(gradient_chunks, sequences) fixed
  /// chunks, one per task on the pool, the chunks' sums added in chunk order (the same bits at any
  /// thread count); with_gradient: each chunk's gradient into chunk_grads_, and their sum, in
  /// chunk order, into grad_
  double chunked_loss(const std::vector<std::int32_t>& tokens, const std::vector<std::int32_t>& targets,
                      std::size_t sequences, thread_pool* pool, bool with_gradient) {
    const std::size_t len = task_.context();
    std::size_t count = 0;
    for (auto t : targets) count += t != ignored_target;
    const std::size_t chunks = std::min(gradient_chunks, sequences);
    std::vector<double> losses(chunks, 0.0);
    auto run = [&](std::size_t c) {
      const std::size_t s0 = c * sequences / chunks, s1 = (c + 1) * sequences / chunks;
      auto& cache = caches_[c];
      const std::int32_t* tk = tokens.data() + s0 * len;
      transformer_forward(model_, tk, s1 - s0, len, cache);
      const std::vector<std::int32_t> tg(targets.begin() + std::ptrdiff_t(s0 * len),
                                         targets.begin() + std::ptrdiff_t(s1 * len));
      losses[c] = cross_entropy_sum<T>(cache.logits.view(), tg, count, cache.d_logits);
      if (with_gradient) {
        auto& g = chunk_grads_[c];
        std::fill(g.begin(), g.end(), T(0));
        transformer_backward(model_, tk, cache, cache.d_logits.view(), g.data());
      }
    };
    if (pool && chunks > 1)
      pool->parallel_for(chunks, run);
    else
      for (std::size_t c = 0; c < chunks; ++c) run(c);
    if (with_gradient) {
      grad_ = chunk_grads_[0];
      for (std::size_t c = 1; c < chunks; ++c)
        for (std::size_t k = 0; k < grad_.size(); ++k) grad_[k] += chunk_grads_[c][k];
    }
    double total = 0;
    for (double l : losses) total += l;
    return total / double(count);
  }

  /// the task's sizes in o; the batch checked first, before the model allocates anything
  static transformer_options with_task(transformer_options o, const training_task& t, std::size_t batch) {
    if (batch == 0 || batch > 4096)
      throw size_limit_error("trainer: the batch size " + std::to_string(batch) + " is not in 1 .. 4096");
    o.vocab = t.vocab().size();
    o.context = t.context();
    return o;
  }
  static optimizer make_optimizer(const std::variant<adamw_options, sgd_options>& o, std::size_t n) {
    if (const auto* a = std::get_if<adamw_options>(&o)) return adamw<T>(n, *a);
    return sgd<T>(n, std::get<sgd_options>(o));
  }

  training_task task_;
  transformer<T> model_;
  std::size_t batch_;
  splitmix64 rng_;
  optimizer optimizer_;
  std::vector<T> grad_;
  std::vector<std::vector<T>> chunk_grads_;
  std::vector<transformer_cache<T>> caches_;
  std::vector<std::int32_t> tokens_, targets_;
  std::size_t steps_ = 0;
};

}  // namespace qkv::runtime
