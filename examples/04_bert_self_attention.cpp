// 04_bert_self_attention.cpp: tutorial 003, "BERT's Anatomy Step by Step: Self-Attention", at
// run time, and past it: every one of the 12 heads, the output projection, heatmaps, and a real
// BERT checkpoint when there is one.
//
//   04_bert_self_attention [--model DIR] [--svg FILE] [--html FILE] [--check REFERENCE.json]
//
// DIR (or the environment variable QKV_BERT_MODEL) holds a Hugging Face bert-base-uncased:
// vocab.txt and model.safetensors. With it, the word embeddings of the sentence are BERT's own
// rows and the heads use layer 0's trained query/key/value/output weights. Without it, the
// embeddings are a stand-in drawn with PyTorch's generator, exactly as
// tests/data/reference/003 draws them: torch.manual_seed(0); query, key, value =
// nn.Linear(768, 64) x 3; seq_embedding = torch.randn(1, 9, 768). --check compares that stand-in
// with the reference: weights and biases bit for bit, every computed value within an error
// bound derived below, and exits 1 if anything is off.
//
// The tutorial's names: seq_embedding (T, 768), query/key/value (T, 64), scores (T, T),
// weights (T, T), seq_embedding_att (T, 64), att_concat (T, 768), output (T, 768).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <qkv/core/flat_attention.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/html.hpp>
#include <qkv/io/safetensors.hpp>
#include <qkv/io/svg.hpp>
#include <qkv/io/wordpiece.hpp>
#include <qkv/runtime/multihead.hpp>

#ifndef QKV_DATA_DIR
#error "build with -DQKV_DATA_DIR=\"<project>/data\" (examples/meson.build does)"
#endif

namespace qkv::examples::bert {

using qkv::runtime::dynamic_matrix;
constexpr std::size_t hidden_size = 768, num_heads = 12, head_dim = hidden_size / num_heads;  // 64
const std::string sentence = "let's tokenize something?";

struct options {
  std::string model_dir, svg, html, check;
};

// ---- printing ------------------------------------------------------------------------------

// printf's formats, written through std::cout: `qkv explain bert` captures std::cout, and one
// stream keeps the lines in order
[[gnu::format(printf, 1, 2)]] void say(const char* format, ...) {
  std::va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  std::cout << text;
}

// the first rows and columns of a matrix, 4 decimals as PyTorch prints them
void print(std::string_view name, const dynamic_matrix<float>& m, std::size_t max_rows = 9, std::size_t max_cols = 9) {
  say("%.*s (%zu, %zu)\n", static_cast<int>(name.size()), name.data(), m.rows(), m.cols());
  for (std::size_t i = 0; i < std::min(m.rows(), max_rows); ++i) {
    say("  [");
    for (std::size_t j = 0; j < std::min(m.cols(), max_cols); ++j) say("%s%8.4f", j ? " " : "", m(i, j));
    say("%s]\n", m.cols() > max_cols ? " ..." : "");
  }
  if (m.rows() > max_rows) say("  ...\n");
}

std::vector<double> to_double(const dynamic_matrix<float>& m) {
  return std::vector<double>(m.data(), m.data() + m.rows() * m.cols());
}

// ---- the weights ---------------------------------------------------------------------------

struct bert_layer {
  dynamic_matrix<float> seq_embedding;            // (T, 768)
  qkv::runtime::attention_weights<float> weights;  // q, k, v (768, 768) = 12 heads of (64, 768); o
  std::string source;
};

// nn.Linear(in, out) from the generator, into rows [row0, row0 + out) of w and bias[row0..]
void draw_linear(qkv::torch::generator& gen, qkv::runtime::linear_weights<float>& l, std::size_t row0,
                 std::size_t out, std::size_t in) {
  std::vector<float> w(out * in), b(out);
  gen.linear_(std::span<float>(w), std::span<float>(b), in);
  for (std::size_t i = 0; i < out; ++i) {
    std::copy_n(w.data() + i * in, in, l.weight.row(row0 + i));
    l.bias[row0 + i] = b[i];
  }
}

void size_layer(bert_layer& L) {
  for (auto* l : {&L.weights.q, &L.weights.k, &L.weights.v}) {
    l->weight = dynamic_matrix<float>(hidden_size, hidden_size);
    l->bias.assign(hidden_size, 0.0f);
  }
  L.weights.o.emplace();
  L.weights.o->weight = dynamic_matrix<float>(hidden_size, hidden_size);
  L.weights.o->bias.assign(hidden_size, 0.0f);
}

// the stand-in: the reference's draws for head 0 and the embeddings, then heads 1..11 and the
// output projection in the order the tutorial creates them
bert_layer stand_in(std::size_t tokens) {
  bert_layer L;
  size_layer(L);
  qkv::torch::generator gen{0};  // torch.manual_seed(0)
  draw_linear(gen, L.weights.q, 0, head_dim, hidden_size);  // query = nn.Linear(768, 64)
  draw_linear(gen, L.weights.k, 0, head_dim, hidden_size);  // key = nn.Linear(768, 64)
  draw_linear(gen, L.weights.v, 0, head_dim, hidden_size);  // value = nn.Linear(768, 64)
  L.seq_embedding = dynamic_matrix<float>(tokens, hidden_size);  // torch.randn(1, T, 768)
  gen.normal_(std::span<float>(L.seq_embedding.data(), tokens * hidden_size));
  for (std::size_t h = 1; h < num_heads; ++h)  // scaled_dot_product_attention, calls 2..12
    for (auto* l : {&L.weights.q, &L.weights.k, &L.weights.v}) draw_linear(gen, *l, h * head_dim, head_dim, hidden_size);
  draw_linear(gen, *L.weights.o, 0, hidden_size, hidden_size);  // nn.Linear(768, 768)
  L.source = "a stand-in: torch.manual_seed(0), 3 nn.Linear(768, 64), torch.randn(1, " + std::to_string(tokens) +
             ", 768), 33 more nn.Linear(768, 64) and nn.Linear(768, 768) (no checkpoint given)";
  return L;
}

// a Hugging Face checkpoint names its tensors "bert.<...>" (BertForPreTraining) or "<...>" (BertModel)
std::string tensor_name(const qkv::io::safetensors_file& f, const std::string& name) {
  for (const std::string prefix : {"bert.", ""})
    if (f.find(prefix + name)) return prefix + name;
  throw std::runtime_error(f.name() + ": no tensor 'bert." + name + "' or '" + name + "'");
}

void read_linear(const qkv::io::safetensors_file& f, const std::string& name, qkv::runtime::linear_weights<float>& l) {
  const auto w = tensor_name(f, name + ".weight"), b = tensor_name(f, name + ".bias");
  if (f.info(w).shape != std::vector<std::uint64_t>{hidden_size, hidden_size} ||
      f.info(b).shape != std::vector<std::uint64_t>{hidden_size})
    throw std::runtime_error(f.name() + ": " + w + " must be (768, 768) and " + b + " (768): is this bert-base?");
  const auto wv = f.read<float>(w);
  std::copy(wv.begin(), wv.end(), l.weight.data());
  l.bias = f.read<float>(b);
}

bert_layer from_checkpoint(const std::string& dir, const std::vector<std::int64_t>& ids) {
  bert_layer L;
  size_layer(L);
  const auto f = qkv::io::safetensors_file::open((std::filesystem::path(dir) / "model.safetensors").string());
  const auto emb = tensor_name(f, "embeddings.word_embeddings.weight");
  const auto& shape = f.info(emb).shape;
  if (shape.size() != 2 || shape[1] != hidden_size)
    throw std::runtime_error(f.name() + ": " + emb + " must be (vocabulary, 768)");
  L.seq_embedding = dynamic_matrix<float>(ids.size(), hidden_size);
  for (std::size_t i = 0; i < ids.size(); ++i) {  // one row per token: the table is never loaded whole
    const auto row = f.read_rows<float>(emb, static_cast<std::uint64_t>(ids[i]), 1);
    std::copy(row.begin(), row.end(), L.seq_embedding.row(i));
  }
  read_linear(f, "encoder.layer.0.attention.self.query", L.weights.q);
  read_linear(f, "encoder.layer.0.attention.self.key", L.weights.k);
  read_linear(f, "encoder.layer.0.attention.self.value", L.weights.v);
  read_linear(f, "encoder.layer.0.attention.output.dense", *L.weights.o);
  L.source = "BERT's own: " + f.name() + " (word embeddings; layer 0's query, key, value and output weights)";
  return L;
}

// ---- the check against tests/data/reference/003 ---------------------------------------------

struct reference_tensor {
  std::vector<std::size_t> shape;
  std::vector<double> data;  // row-major; float32 values are exact in double
};

reference_tensor tensor(const nlohmann::json& j) {
  reference_tensor t;
  t.shape = j["shape"].get<std::vector<std::size_t>>();
  // flatten the nested lists in row-major order
  auto flatten = [&](auto&& self, const nlohmann::json& v) -> void {
    if (v.is_array())
      for (const auto& e : v) self(self, e);
    else
      t.data.push_back(v.get<double>());
  };
  flatten(flatten, j["data"]);
  return t;
}

// |computed - float64 reference| <= bound, element by element; prints the worst ratio
bool within(std::string_view name, const std::vector<double>& computed, const std::vector<double>& truth,
            const std::vector<double>& bound) {
  double worst = 0, max_err = 0;
  bool ok = computed.size() == truth.size();
  for (std::size_t i = 0; ok && i < truth.size(); ++i) {
    const double e = std::abs(computed[i] - truth[i]);
    max_err = std::max(max_err, e);
    worst = std::max(worst, e / bound[i]);
    ok = e <= bound[i];
  }
  say("  %-18.*s max |error| %.3g, %.2g of its bound: %s\n", static_cast<int>(name.size()), name.data(),
              max_err, worst, ok ? "ok" : "FAILED");
  return ok;
}

// The bounds. u = 2^-24 (float32 unit roundoff); gamma(n) = n u / (1 - n u) bounds the relative
// error of a float32 sum or dot product of n terms in any order, fma or not (Higham, Accuracy and
// Stability of Numerical Algorithms, 3.1). The float64 reference stands in for the exact value.
//   projection: |dQ_ij| <= gamma(769) (sum_k |x_ik W_jk| + |b_j|)
//   raw scores: |dR_ij| <= sum_k (|dQ_ik| |K_jk| + |Q_ik| |dK_jk| + |dQ_ik| |dK_jk|)
//                          + gamma(64) sum_k (|Q_ik| + |dQ_ik|)(|K_jk| + |dK_jk|);  scores = R / 8, exact
//   weights: logits off by at most D_i = max_j |dS_ij| (+ u |S_ij - max_i S| for the subtraction)
//            change p_ij by a factor within exp(+-2 D_i); exp within 1 ulp (2u relative; the
//            runtime's exp is tested to 1 ulp over every float), the sum of T terms gamma(T), the
//            division u: rel_i = exp(2 D_i) (1 + 2u)^2 (1 + gamma(T)) (1 + u) - 1
//   output: |dO_ij| <= sum_k (|dP_ik| |V_kj| + |P_ik| |dV_kj| + |dP_ik| |dV_kj|)
//                      + gamma(T) sum_k (|P_ik| + |dP_ik|)(|V_kj| + |dV_kj|)
bool check(const bert_layer& L, const qkv::runtime::multihead_result<float>& r, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open the reference '" + path + "'");
  const auto ref = nlohmann::json::parse(in);
  const auto& f32 = ref["float32"];
  const auto& f64 = ref["float64"];
  const std::size_t T = L.seq_embedding.rows(), D = hidden_size, d = head_dim;
  bool ok = true;
  say("\nchecking the stand-in against %s\n", path.c_str());

  // bit for bit: what came from the generator
  auto bits = [&](std::string_view name, const float* ours, std::size_t n) {
    const auto t = tensor(f32[std::string(name)]);
    std::size_t differ = t.data.size() == n ? 0 : n;
    for (std::size_t i = 0; i < n && i < t.data.size(); ++i)
      differ += static_cast<float>(t.data[i]) != ours[i] || std::signbit(static_cast<float>(t.data[i])) != std::signbit(ours[i]);
    say("  %-18.*s %zu values, %s\n", static_cast<int>(name.size()), name.data(), n,
                differ ? "DIFFER from PyTorch's" : "bit for bit PyTorch's");
    ok = ok && differ == 0;
  };
  bits("seq_embedding", L.seq_embedding.data(), T * D);
  bits("query_weight", L.weights.q.weight.data(), d * D);  // head 0: rows 0..63
  bits("key_weight", L.weights.k.weight.data(), d * D);
  bits("value_weight", L.weights.v.weight.data(), d * D);
  bits("query_bias", L.weights.q.bias.data(), d);
  bits("key_bias", L.weights.k.bias.data(), d);
  bits("value_bias", L.weights.v.bias.data(), d);

  const double u = std::ldexp(1.0, -24);
  auto gamma = [u](double n) { return n * u / (1 - n * u); };
  // head 0's projections: columns 0..63
  auto head0 = [&](const dynamic_matrix<float>& m) {
    std::vector<double> out(T * d);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < d; ++j) out[i * d + j] = m(i, j);
    return out;
  };
  auto projection_bound = [&](const qkv::runtime::linear_weights<float>& l) {
    std::vector<double> e(T * d);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < d; ++j) {
        double s = std::abs(double(l.bias[j]));
        for (std::size_t k = 0; k < D; ++k) s += std::abs(double(L.seq_embedding(i, k)) * double(l.weight(j, k)));
        e[i * d + j] = gamma(D + 1) * s;
      }
    return e;
  };
  const auto Q = tensor(f64["query"]).data, K = tensor(f64["key"]).data, V = tensor(f64["value"]).data;
  const auto eQ = projection_bound(L.weights.q), eK = projection_bound(L.weights.k), eV = projection_bound(L.weights.v);
  ok &= within("query", head0(r.queries), Q, eQ);
  ok &= within("key", head0(r.keys), K, eK);
  ok &= within("value", head0(r.values), V, eV);

  const auto S = tensor(f64["scores"]).data;
  std::vector<double> eS(T * T), scores(T * T);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) {
      double a = 0, b = 0;
      for (std::size_t k = 0; k < d; ++k) {
        const double q = std::abs(Q[i * d + k]), dq = eQ[i * d + k], kk = std::abs(K[j * d + k]), dk = eK[j * d + k];
        a += dq * kk + q * dk + dq * dk;
        b += (q + dq) * (kk + dk);
      }
      eS[i * T + j] = (a + gamma(d) * b) / 8;
      scores[i * T + j] = double(r.scores[0](i, j)) / 8;  // raw q·k scaled by 1/sqrt(64), exact
    }
  ok &= within("scores", scores, S, eS);

  const auto P = tensor(f64["weights"]).data;
  std::vector<double> eP(T * T);
  for (std::size_t i = 0; i < T; ++i) {
    double D_i = 0, top = -INFINITY;
    for (std::size_t j = 0; j < T; ++j) top = std::max(top, S[i * T + j]);
    for (std::size_t j = 0; j < T; ++j) D_i = std::max(D_i, eS[i * T + j] + u * std::abs(S[i * T + j] - top));
    const double rel = std::exp(2 * D_i) * (1 + 2 * u) * (1 + 2 * u) * (1 + gamma(T)) * (1 + u) - 1;
    for (std::size_t j = 0; j < T; ++j) eP[i * T + j] = P[i * T + j] * rel;
  }
  ok &= within("weights", to_double(r.weights[0]), P, eP);

  const auto O = tensor(f64["output"]).data;
  std::vector<double> eO(T * d);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < d; ++j) {
      double a = 0, b = 0;
      for (std::size_t k = 0; k < T; ++k) {
        const double p = P[i * T + k], dp = eP[i * T + k], v = std::abs(V[k * d + j]), dv = eV[k * d + j];
        a += dp * v + p * dv + dp * dv;
        b += (p + dp) * (v + dv);
      }
      eO[i * d + j] = a + gamma(T) * b;
    }
  ok &= within("seq_embedding_att", to_double(r.context[0]), O, eO);
  // PyTorch's own float32 output is held to the same bound (it is a float32 computation too)
  ok &= within("(PyTorch float32)", tensor(f32["output"]).data, O, eO);
  say("%s\n", ok ? "the stand-in matches PyTorch's reference" : "MISMATCH with PyTorch's reference");
  return ok;
}

// ---- the walkthrough -----------------------------------------------------------------------

// bert-base-uncased's vocab.txt, which the project ships: in the source tree's data/ (QKV_DATA_DIR),
// or where `meson install` puts it, <prefix>/share/qkv/, found from the program's own path
std::string bundled_vocabulary() {
  const std::filesystem::path in_source = std::filesystem::path(QKV_DATA_DIR) / "bert-base-uncased/vocab.txt";
  if (std::filesystem::exists(in_source)) return in_source.string();
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share/qkv/bert-base-uncased/vocab.txt";
    if (std::filesystem::exists(installed)) return installed.string();
  }
  return in_source.string();  // the error names the path looked for first
}

int run(const options& o) {
  // tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased'); tokenizer.encode(...)
  const std::string vocab_path =
      o.model_dir.empty() ? bundled_vocabulary() : (std::filesystem::path(o.model_dir) / "vocab.txt").string();
  const qkv::io::wordpiece_tokenizer tokenizer(qkv::io::wordpiece_vocab::from_file(vocab_path));
  const auto encoding = tokenizer.encode(sentence);
  const auto& tokens = encoding.tokens;
  const std::size_t T = tokens.size();
  say("encoding = tokenizer.encode(\"%s\")\n  [", sentence.c_str());
  for (std::size_t i = 0; i < T; ++i) say("%s%lld", i ? ", " : "", static_cast<long long>(encoding.ids[i]));
  say("]\ntokens = tokenizer.convert_ids_to_tokens(encoding)\n  [");
  for (std::size_t i = 0; i < T; ++i) {
    // as Python prints a string: in single quotes, or double quotes when it holds one
    const char q = tokens[i].find('\'') == std::string::npos ? '\'' : '"';
    say("%s%c%s%c", i ? ", " : "", q, tokens[i].c_str(), q);
  }
  say("]\n\n");

  const bert_layer L = o.model_dir.empty() ? stand_in(T) : from_checkpoint(o.model_dir, encoding.ids);
  say("seq_embedding: %s\n", L.source.c_str());
  print("seq_embedding.shape", L.seq_embedding, 3, 6);

  // all 12 heads in one call: head h is columns 64h .. 64h + 63 of Q, K and V
  qkv::runtime::attention_options<float> opt;
  opt.heads = num_heads;  // scale: 1/sqrt(64) = 1/8
  opt.keep_weights = true;  // the learner's call: every head's scores and weights kept
  const auto r = qkv::runtime::self_attention(L.seq_embedding, L.weights, opt);

  say("\n# one head: query = nn.Linear(768, 64)(seq_embedding), and key, value\n");
  dynamic_matrix<float> q0(T, head_dim), s0(T, T);
  for (std::size_t i = 0; i < T; ++i) {
    for (std::size_t j = 0; j < head_dim; ++j) q0(i, j) = r.queries(i, j);
    for (std::size_t j = 0; j < T; ++j) s0(i, j) = r.scores[0](i, j) * r.scale;
  }
  print("query", q0, 3, 6);
  say("dim_k = %zu\n", head_dim);
  print("scores = torch.bmm(query, key.transpose(1, 2)) / sqrt(dim_k)", s0);
  print("weights = F.softmax(scores, dim=-1)", r.weights[0]);
  print("seq_embedding_att = torch.bmm(weights, value)", r.context[0], 3, 6);

  say("\n# twelve heads: torch.cat([scaled_dot_product_attention(seq_embedding) for i in range(12)], dim=-1)\n");
  for (std::size_t h = 1; h < num_heads; ++h) print("weights, head " + std::to_string(h), r.weights[h]);
  print("att_concat", r.concat, 3, 6);
  print("nn.Linear(768, 768)(att_concat)", r.output, 3, 6);

  if (!o.svg.empty() || !o.html.empty()) {
    std::vector<std::vector<std::vector<double>>> w(num_heads);
    for (std::size_t h = 0; h < num_heads; ++h) {
      w[h].assign(T, std::vector<double>(T));
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < T; ++j) w[h][i][j] = r.weights[h](i, j);
    }
    qkv::io::heatmap_options ho;
    ho.title = "BERT self-attention weights, 12 heads (" + std::string(o.model_dir.empty() ? "stand-in" : "layer 0") + ")";
    const std::string svg = qkv::io::attention_svg(tokens, w, ho);
    if (!o.svg.empty()) {
      qkv::io::write_text_file(o.svg, svg);
      say("\nwrote %s\n", o.svg.c_str());
    }
    if (!o.html.empty()) {
      qkv::io::html_page page("BERT self-attention: \"" + sentence + "\"");
      page.paragraph("Embeddings: " + L.source + ".");
      page.heading("Tokens");
      page.matrix("ids", 1, T, std::vector<double>(encoding.ids.begin(), encoding.ids.end()), {"id"}, tokens);
      page.heading("Head 0, as in the tutorial");
      page.matrix("query (first 8 of 64 columns)", T, 8, [&] {
        std::vector<double> v;
        for (std::size_t i = 0; i < T; ++i)
          for (std::size_t j = 0; j < 8; ++j) v.push_back(q0(i, j));
        return v;
      }(), tokens);
      page.matrix("scores", T, T, to_double(s0), tokens, tokens, 4);
      page.matrix("weights", T, T, to_double(r.weights[0]), tokens, tokens, 4);
      page.heading("All 12 heads");
      page.svg(svg);
      for (std::size_t h = 1; h < num_heads; ++h)
        page.matrix("weights, head " + std::to_string(h), T, T, to_double(r.weights[h]), tokens, tokens, 4);
      page.write(o.html);
      say("wrote %s\n", o.html.c_str());
    }
  }

  if (!o.check.empty()) {
    if (!o.model_dir.empty()) throw std::runtime_error("--check compares the stand-in: leave out --model");
    return check(L, r, o.check) ? 0 : 1;
  }
  return 0;
}

// `qkv explain bert`: the walkthrough with the stand-in embeddings (or QKV_BERT_MODEL's checkpoint)
inline void walkthrough() {
  options o;
  if (const char* env = std::getenv("QKV_BERT_MODEL")) o.model_dir = env;
  run(o);
}

}  // namespace qkv::examples::bert

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain bert --html FILE): the walkthrough's numbers with BERT's
// WordPiece tokens on the axes and all 12 heads under a head selector. Its steps are the
// "Step N:" comments below (scripts/page_notes.py reads them); the inputs are run()'s (the
// stand-in, or QKV_BERT_MODEL's checkpoint), the numbers are computed in the core's arithmetic
// (core_attention below), which the page's WebAssembly module recomputes an edit in
// (docs/pages.md, "Editing an example's page"); run() and --check keep the runtime's SIMD path.
namespace qkv::examples::bert {

// the layer in the core's arithmetic: qkv::flat::attend (core/flat_attention.hpp, the one source
// of `qkv attend --arithmetic core` and of the pages' module), its steps taken out of its buffer
// into the runtime's result type (scores unscaled, as the runtime keeps them)
inline qkv::runtime::multihead_result<float> core_attention(const bert_layer& L, float scale) {
  const std::size_t T = L.seq_embedding.rows(), D = hidden_size;
  const qkv::flat::steps_layout at{T, D, D, num_heads, D};
  std::vector<float> out(at.size());
  const auto& w = L.weights;
  const int rc = qkv::flat::attend<float>(L.seq_embedding.data(), T, D, w.q.weight.data(), w.q.bias.data(),
                                          w.k.weight.data(), w.k.bias.data(), w.v.weight.data(), w.v.bias.data(),
                                          D, D, w.o->weight.data(), w.o->bias.data(), D, num_heads, true, scale,
                                          nullptr, out.data());
  if (rc != 0) throw std::logic_error("qkv::flat::attend refused BERT's sizes");
  auto take = [&](std::size_t first, std::size_t rows, std::size_t cols) {
    dynamic_matrix<float> m(rows, cols);
    std::copy_n(out.data() + first, rows * cols, m.data());
    return m;
  };
  qkv::runtime::multihead_result<float> r;
  r.scale = scale;
  r.queries = take(at.queries(), T, D), r.keys = take(at.keys(), T, D), r.values = take(at.values(), T, D);
  for (std::size_t h = 0; h < num_heads; ++h) {
    r.scores.push_back(take(at.scores(h), T, T));
    r.weights.push_back(take(at.weights(h), T, T));
    r.context.push_back(take(at.context(h), T, head_dim));
  }
  r.concat = take(at.concat(), T, D), r.output = take(at.output(), T, D);
  return r;
}

// how far two float32 results of the same steps are apart: the cells that differ, the largest
// distance in float32 ulps of the cell (counted across zero), and the largest difference in ulps
// of the largest |value| of its matrix (a cell near 0, where a sum's products cancel, has tiny ulps)
struct ulps_apart {
  std::size_t differ = 0, cells = 0;
  std::uint64_t ulps = 0;
  double of_largest = 0;

  void add(const dynamic_matrix<float>& a, const dynamic_matrix<float>& b) {
    auto ordered = [](float v) {
      const auto u = std::bit_cast<std::uint32_t>(v);
      return (u & 0x80000000u) ? -static_cast<std::int64_t>(u & 0x7fffffffu) : static_cast<std::int64_t>(u);
    };
    float largest = 0;
    for (std::size_t k = 0; k < a.rows() * a.cols(); ++k) largest = std::max(largest, std::abs(a.data()[k]));
    const double ulp = largest > 0 ? std::ldexp(1.0, std::ilogb(largest) - 23)  // float32's ulp at |largest|
                                   : double(std::numeric_limits<float>::denorm_min());
    for (std::size_t k = 0; k < a.rows() * a.cols(); ++k) {
      const auto d = ordered(a.data()[k]) - ordered(b.data()[k]);
      differ += d != 0, ++cells;
      ulps = std::max<std::uint64_t>(ulps, static_cast<std::uint64_t>(d < 0 ? -d : d));
      of_largest = std::max(of_largest, std::abs(double(a.data()[k]) - double(b.data()[k])) / ulp);
    }
  }
  [[nodiscard]] std::string str() const {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%zu of %zu cells differ, by at most %llu ulps (%.3g ulps of the largest value)",
                  differ, cells, static_cast<unsigned long long>(ulps), of_largest);
    return buf;
  }
};

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  options o;
  if (const char* env = std::getenv("QKV_BERT_MODEL")) o.model_dir = env;
  const std::string vocab_path =
      o.model_dir.empty() ? bundled_vocabulary() : (std::filesystem::path(o.model_dir) / "vocab.txt").string();
  const qkv::io::wordpiece_tokenizer tokenizer(qkv::io::wordpiece_vocab::from_file(vocab_path));
  const auto encoding = tokenizer.encode(sentence);
  const auto& tokens = encoding.tokens;
  const std::size_t T = tokens.size();
  const bert_layer L = o.model_dir.empty() ? stand_in(T) : from_checkpoint(o.model_dir, encoding.ids);
  qkv::runtime::attention_options<float> opt;
  opt.heads = num_heads;
  opt.keep_weights = true;
  const auto simd = qkv::runtime::self_attention(L.seq_embedding, L.weights, opt);  // run()'s numbers
  const auto r = core_attention(L, simd.scale);  // the page's: 1/sqrt(64) = 1/8, exact
  p.with_truth();  // every matrix without a page_how below is an input (summarised: no truth is computed)
  // its (9, 768) matrices are embedded whole, as their bits (base64: 5.3 characters a float where
  // its decimal takes 12), so that the page, its module in it, stays within 1 MB
  p.pack_numbers();
  const auto bias = [](const std::vector<float>& b) {
    dynamic_matrix<float> m(1, b.size());
    std::copy(b.begin(), b.end(), m.row(0));
    return m;
  };
  const auto dims = [](std::string_view prefix, std::size_t n) {
    std::vector<std::string> l;
    for (std::size_t i = 0; i < n; ++i) l.push_back(std::string(prefix) + std::to_string(i));
    return l;
  };

  // Step 1: tokenize. tokenizer.encode("let's tokenize something?") with bert-base-uncased's
  // WordPiece vocabulary: [CLS], the word pieces ("##" continues a word), [SEP]; each token's
  // id is its row of the embedding table.
  p.step(1);
  {
    ulps_apart projections, heads, contexts, output;
    projections.add(r.queries, simd.queries), projections.add(r.keys, simd.keys), projections.add(r.values, simd.values);
    for (std::size_t h = 0; h < num_heads; ++h)
      heads.add(r.weights[h], simd.weights[h]), contexts.add(r.context[h], simd.context[h]);
    output.add(r.output, simd.output);
    p.text("The numbers on this page are computed in qkv's core arithmetic (qkv::flat::attend: each sum left to "
           "right, one rounding per product and per sum, the core's softmax), the arithmetic this page's "
           "WebAssembly module recomputes your edits in. The walkthrough (qkv explain bert) and its --check "
           "against PyTorch run the runtime's SIMD path (qkv::runtime::self_attention), which sums in another "
           "order; for the same inputs its numbers differ from these in query, key and value: " + projections.str() +
           "; in the weights: " + heads.str() + "; in the heads' contexts: " + contexts.str() + "; in the output: " +
           output.str() + ". A cell near 0, where a sum's products cancel, is many of its own ulps off.");
    std::error_code ec;
    const auto vocab_bytes = std::filesystem::file_size(vocab_path, ec);
    const std::size_t per = sizeof(float), vocabulary = tokenizer.vocab().size();
    p.text("Your own text would go through the WordPiece tokenizer, which this page does not carry. It would take: "
           "the tokenizer and its Unicode tables in the page's module, the vocabulary (" + std::to_string(vocabulary) + " tokens, vocab.txt " +
           (ec ? std::string("of unknown size") : std::to_string(vocab_bytes) + " bytes") +
           "); for BERT's own embeddings the table (" + std::to_string(vocabulary) + " x 768, " +
           std::to_string(vocabulary * hidden_size * per) + " bytes in float32), the position embeddings (512 x 768, " +
           std::to_string(512 * hidden_size * per) + " bytes), the token type embeddings (2 x 768) and their "
           "LayerNorm (2 x 768); and for a new number of tokens, every step from the projections on: W_q, W_k and W_v (768 x 768, " +
           std::to_string(hidden_size * hidden_size * per) + " bytes each) and W_o for the output. A page is at most "
           "1 MB (1048576 bytes), so none of it fits. With the stand-in (no checkpoint) every weight and the "
           "embeddings are draws of PyTorch's generator from seed 0, which qkv's core computes (core/torch.hpp): "
           "a module with the generator and the tokenizer could draw them in the page, carrying only the vocabulary.");
  }
  p.matrix("encoding", 1, T, std::vector<double>(encoding.ids.begin(), encoding.ids.end())).rows({"id"}).cols(tokens);
  // Step 2: the embeddings and the weights. seq_embedding (T, 768): one row per token (the
  // stand-in draws it with torch.randn, as the tutorial does; a checkpoint gives BERT's own
  // rows). query, key and value are nn.Linear(768, 64) per head: 12 heads stacked, (768, 768),
  // (out, in), with their biases; the output projection nn.Linear(768, 768).
  p.step(2);
  p.text("Embeddings: " + L.source + ".");
  p.matrix("seq_embedding", L.seq_embedding).rows(tokens).cols(dims("e", hidden_size));
  p.matrix("W_q", L.weights.q.weight);
  p.matrix("b_q", bias(L.weights.q.bias));
  p.matrix("W_k", L.weights.k.weight);
  p.matrix("b_k", bias(L.weights.k.bias));
  p.matrix("W_v", L.weights.v.weight);
  p.matrix("b_v", bias(L.weights.v.bias));
  p.matrix("W_o", L.weights.o->weight);
  p.matrix("b_o", bias(L.weights.o->bias));
  // Step 3: query, key and value: seq_embedding Wᵀ + b, (T, 768); head h is columns 64h to
  // 64h + 63.
  p.step(3);
  p.matrix("query", r.queries).rows(tokens).how(how::dot("seq_embedding", "W_q", hidden_size, 0, 0, "b_q"));
  p.matrix("key", r.keys).rows(tokens).how(how::dot("seq_embedding", "W_k", hidden_size, 0, 0, "b_k"));
  p.matrix("value", r.values).rows(tokens).how(how::dot("seq_embedding", "W_v", hidden_size, 0, 0, "b_v"));
  // Step 4: scores and weights, head by head. scores = torch.bmm(query, key.transpose(1, 2)) /
  // sqrt(dim_k), dim_k = 64: the scale is 1/8, exact in float; weights = F.softmax(scores,
  // dim=-1). The head selector shows each of the 12 heads.
  p.step(4);
  std::vector<std::string> heads, names;
  for (std::size_t h = 0; h < num_heads; ++h) {
    const std::string n = "[" + std::to_string(h) + "]";
    p.matrix("q\u00b7k" + n, r.scores[h]).rows(tokens).cols(tokens)
        .how(how::dot("query", "key", head_dim, h * head_dim, h * head_dim)).caption("q\u00b7k, head " + std::to_string(h));
    dynamic_matrix<float> scaled(T, T);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < T; ++j) scaled(i, j) = r.scores[h](i, j) * r.scale;  // as run() prints them
    p.matrix("scores" + n, scaled).rows(tokens).cols(tokens)
        .how(how::scaled("q\u00b7k" + n, double(r.scale), "1/sqrt(64) = 1/8")).caption("scores, head " + std::to_string(h));
    p.matrix("weights" + n, r.weights[h]).rows(tokens).cols(tokens).how(how::softmax("scores" + n))
        .caption("weights, head " + std::to_string(h));
    heads.push_back("weights" + n);
    names.push_back("head " + std::to_string(h));
  }
  p.heatmap("BERT self-attention weights (rows: queries, columns: keys)", heads, names);
  // Step 5: the context and the output. seq_embedding_att = torch.bmm(weights, value): each
  // head's (T, 64); torch.cat of the 12 heads, (T, 768); nn.Linear(768, 768)(att_concat).
  p.step(5);
  for (std::size_t h = 0; h < num_heads; ++h) {
    const std::string n = "[" + std::to_string(h) + "]";
    p.matrix("seq_embedding_att" + n, r.context[h]).rows(tokens)
        .how(how::matmul("weights" + n, "value", T, 0, 0, h * head_dim)).caption("seq_embedding_att, head " + std::to_string(h));
  }
  // the heads side by side, two at a time: att_concat[0..h] is the first h + 1 contexts, a
  // working matrix of the page's module (scratch: not embedded), att_concat the last of them
  for (std::size_t h = 1; h < num_heads; ++h) {
    const std::string prev = h == 1 ? "seq_embedding_att[0]" : "att_concat[0.." + std::to_string(h - 1) + "]";
    const std::string id = h + 1 == num_heads ? std::string("att_concat") : "att_concat[0.." + std::to_string(h) + "]";
    dynamic_matrix<float> part(T, (h + 1) * head_dim);
    for (std::size_t i = 0; i < T; ++i) std::copy_n(r.concat.row(i), (h + 1) * head_dim, part.row(i));
    auto ref = p.matrix(id, part).rows(tokens).how(how::hconcat(prev, "seq_embedding_att[" + std::to_string(h) + "]"));
    if (h + 1 != num_heads) ref.scratch();
  }
  p.matrix("output", r.output).rows(tokens).how(how::dot("att_concat", "W_o", hidden_size, 0, 0, "b_o"));
}

/// the program: its arguments (--model, --svg, --html, --check) and exit status
inline int program(int argc, char** argv) {
  options o;
  if (const char* env = std::getenv("QKV_BERT_MODEL")) o.model_dir = env;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(std::string(a) + " needs a value");
        return argv[++i];
      };
      if (a == "--model") o.model_dir = value();
      else if (a == "--svg") o.svg = value();
      else if (a == "--html") o.html = value();
      else if (a == "--check") o.check = value();
      else throw std::runtime_error("unknown argument '" + std::string(a) +
                                    "'; usage: 04_bert_self_attention [--model DIR] [--svg FILE] [--html FILE] [--check REFERENCE.json]");
    }
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "04_bert_self_attention: %s\n", e.what());
    return 2;
  }
}

}  // namespace qkv::examples::bert

#ifndef QKV_EXAMPLE_NO_MAIN
int main(int argc, char** argv) { return qkv::examples::bert::program(argc, argv); }
#endif
