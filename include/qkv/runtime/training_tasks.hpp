// training_tasks.hpp: the data of qkv's training tasks, generated (nothing is downloaded), and
// the random numbers that draw the batches.
//
// Digit tasks (reverse, sort): an input of n digits, the separator "=", the answer of n digits:
//   reverse  3 1 4 1 = 1 4 1 3        sort  3 1 4 1 = 1 1 3 4
// The vocabulary is "0" .. "9", "=" (11 tokens). A sequence is 2n + 1 tokens; the model reads
// the first 2n (context 2n) and predicts token i + 1 at position i; only the n answer tokens are
// counted (positions n .. 2n - 1; the others are ignored_target), so the loss is the mean
// cross-entropy of the answer digits under teacher forcing. The 10^n inputs are numbered by
// their value (digits most significant first); input s is held out when mix64(s) mod 10 == 0
// (mix64: SplitMix64's finaliser), about 10%, never drawn for training. Success measure: the
// held-out accuracy, the share of held-out inputs whose n answer digits, decoded greedily one
// at a time (argmax, each fed back), are all right; the tasks are solved at 100%.
// Text task: characters (Unicode code points) of a text; the vocabulary is its distinct
// characters in code point order. The first 90% of the text trains (windows at random starts),
// the last 10% is held out. Every position is counted (context T tokens predict the next T).
// Success measure: the held-out loss in nats per character, against the unigram baseline
// (the entropy of the training characters' frequencies: the best a model that ignores the
// context can do); the trace's answers are greedy continuations of held-out prompts.
// Batches are drawn by SplitMix64 (Steele, Lea and Flood 2014) seeded with the training seed,
// so that scripts/fixtures/train_torch.py draws the same batches in Python.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cross_entropy.hpp"

namespace qkv::runtime {

/// SplitMix64's finaliser: a stateless hash of a 64-bit number
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// SplitMix64: the batches' random numbers (next() = mix64(state += golden gamma))
struct splitmix64 {
  std::uint64_t state = 0;
  constexpr std::uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ull); }
  /// uniform in [0, n) by the remainder (n is far below 2^64, so the bias is below 2^-40 here)
  constexpr std::uint64_t below(std::uint64_t n) { return next() % n; }
};

/// which task
enum class task_kind { reverse, sort, text };

/// @brief a task: its vocabulary, context and data, and how to draw a batch
class training_task {
 public:
  /// reverse or sort with n digits (1 <= n <= 9)
  static training_task digits(task_kind kind, std::size_t n) {
    if (kind == task_kind::text) throw std::invalid_argument("training_task::digits: reverse or sort");
    if (n < 1 || n > 9)
      throw std::invalid_argument("digit tasks take 1 to 9 digits, not " + std::to_string(n));
    training_task t;
    t.kind_ = kind;
    t.digits_ = n;
    for (int d = 0; d < 10; ++d) t.vocab_.push_back(std::string(1, char('0' + d)));
    t.vocab_.push_back("=");
    t.context_ = 2 * n;
    t.inputs_ = 1;
    for (std::size_t k = 0; k < n; ++k) t.inputs_ *= 10;
    for (std::uint64_t s = 0; s < t.inputs_; ++s)
      if (held_out(s)) t.heldout_.push_back(s);
    return t;
  }

  /// characters of `text` (UTF-8) with a context of `context` characters
  static training_task text(const std::string& utf8, std::size_t context) {
    training_task t;
    t.kind_ = task_kind::text;
    t.context_ = context;
    std::vector<std::uint32_t> cps = decode_utf8(utf8);
    if (cps.size() < 20 * (context + 1))
      throw std::invalid_argument("the text has " + std::to_string(cps.size()) +
                                  " characters; the text task needs " + std::to_string(20 * (context + 1)) +
                                  " for a context of " + std::to_string(context));
    std::vector<std::uint32_t> sorted = cps;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::map<std::uint32_t, std::int32_t> id;
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      id[sorted[k]] = std::int32_t(k);
      t.vocab_.push_back(encode_utf8(sorted[k]));
    }
    for (auto c : cps) t.text_.push_back(id[c]);
    t.split_ = t.text_.size() * 9 / 10;
    return t;
  }

  [[nodiscard]] task_kind kind() const { return kind_; }
  [[nodiscard]] std::string name() const {
    return kind_ == task_kind::reverse ? "reverse" : kind_ == task_kind::sort ? "sort" : "text";
  }
  [[nodiscard]] const std::vector<std::string>& vocab() const { return vocab_; }
  [[nodiscard]] std::size_t context() const { return context_; }
  [[nodiscard]] std::size_t digits() const { return digits_; }
  /// the held-out digit inputs, ascending (empty for text)
  [[nodiscard]] const std::vector<std::uint64_t>& heldout() const { return heldout_; }
  [[nodiscard]] const std::vector<std::int32_t>& text_tokens() const { return text_; }
  [[nodiscard]] std::size_t text_split() const { return split_; }

  [[nodiscard]] static bool held_out(std::uint64_t s) { return mix64(s) % 10 == 0; }

  /// the full 2n + 1 tokens of digit input s
  [[nodiscard]] std::vector<std::int32_t> sequence(std::uint64_t s) const {
    std::vector<std::int32_t> in(digits_);
    for (std::size_t k = digits_; k-- > 0;) {
      in[k] = std::int32_t(s % 10);
      s /= 10;
    }
    std::vector<std::int32_t> out = in;
    if (kind_ == task_kind::reverse)
      std::reverse(out.begin(), out.end());
    else
      std::sort(out.begin(), out.end());
    std::vector<std::int32_t> all = in;
    all.push_back(10);
    all.insert(all.end(), out.begin(), out.end());
    return all;
  }

  /// one example's model input (context tokens) and targets, appended to tokens and targets
  void example(std::uint64_t s, std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const {
    const auto all = sequence(s);
    for (std::size_t i = 0; i < context_; ++i) {
      tokens.push_back(all[i]);
      targets.push_back(i + 1 > digits_ ? all[i + 1] : ignored_target);
    }
  }

  /// a training batch of b sequences (b x context tokens and targets) drawn with rng
  void batch(splitmix64& rng, std::size_t b, std::vector<std::int32_t>& tokens,
             std::vector<std::int32_t>& targets) const {
    tokens.clear();
    targets.clear();
    for (std::size_t k = 0; k < b; ++k) {
      if (kind_ == task_kind::text) {
        const std::uint64_t start = rng.below(split_ - context_);
        for (std::size_t i = 0; i < context_; ++i) {
          tokens.push_back(text_[start + i]);
          targets.push_back(text_[start + i + 1]);
        }
      } else {
        std::uint64_t s = rng.below(inputs_);
        while (held_out(s)) s = rng.below(inputs_);
        example(s, tokens, targets);
      }
    }
  }

  /// the held-out windows of the text task: non-overlapping, from the split on, at most `most`
  void heldout_text(std::size_t most, std::vector<std::int32_t>& tokens,
                    std::vector<std::int32_t>& targets) const {
    tokens.clear();
    targets.clear();
    for (std::size_t start = split_, k = 0; start + context_ + 1 <= text_.size() && k < most;
         start += context_, ++k)
      for (std::size_t i = 0; i < context_; ++i) {
        tokens.push_back(text_[start + i]);
        targets.push_back(text_[start + i + 1]);
      }
  }

  /// the unigram baseline of the text task: the entropy of the training characters, nats
  [[nodiscard]] double unigram_entropy() const {
    std::vector<double> count(vocab_.size(), 0);
    for (std::size_t i = 0; i < split_; ++i) count[std::size_t(text_[i])] += 1;
    double h = 0;
    for (double c : count)
      if (c > 0) h -= c / double(split_) * std::log(c / double(split_));
    return h;
  }

  /// tokens as text
  [[nodiscard]] std::string spell(const std::int32_t* t, std::size_t n) const {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += vocab_[std::size_t(t[i])];
    return s;
  }

  static std::vector<std::uint32_t> decode_utf8(const std::string& s) {
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      if (len == 0 || i + len > s.size())
        throw std::invalid_argument("the text is not UTF-8 (byte " + std::to_string(i) + ")");
      std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
      for (std::size_t k = 1; k < len; ++k) {
        const auto d = static_cast<unsigned char>(s[i + k]);
        if ((d >> 6) != 2)
          throw std::invalid_argument("the text is not UTF-8 (byte " + std::to_string(i + k) + ")");
        cp = (cp << 6) | (d & 0x3f);
      }
      out.push_back(cp);
      i += len;
    }
    return out;
  }

  static std::string encode_utf8(std::uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += char(cp);
    } else if (cp < 0x800) {
      s += char(0xc0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      s += char(0xe0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3f));
      s += char(0x80 | (cp & 0x3f));
    } else {
      s += char(0xf0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3f));
      s += char(0x80 | ((cp >> 6) & 0x3f));
      s += char(0x80 | (cp & 0x3f));
    }
    return s;
  }

 private:
  task_kind kind_ = task_kind::reverse;
  std::size_t digits_ = 0, context_ = 0, split_ = 0;
  std::uint64_t inputs_ = 0;
  std::vector<std::string> vocab_;
  std::vector<std::uint64_t> heldout_;
  std::vector<std::int32_t> text_;
};

}  // namespace qkv::runtime
