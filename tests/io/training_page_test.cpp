// io/training_page.hpp: a training trace read with every field checked (a bad one names its
// field, a huge one is refused before anything of its size is allocated), and the page written
// from the PyTorch fixture (tests/data/train/reverse_trace_torch.json,
// scripts/fixtures/training_trace_torch.py) with the trace's numbers.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <qkv/io/training_page.hpp>

namespace io = qkv::io;
using nlohmann::json;

namespace {

// the smallest honest trace: 1 layer, 1 head, 2 tokens; the second query's weights 1/4 and 3/4
// (exact in binary: their sum is exactly 1)
json tiny() {
  return json::parse(R"({"format": "qkv-training-trace-1", "task": "reverse", "seed": 0, "threads": 1,
    "model": {"layers": 1, "heads": 1, "d_model": 4, "d_ff": 8, "context": 2, "norm_first": true, "vocab": ["a", "b"]},
    "optimizer": {"name": "adamw", "lr": 0.001, "betas": [0.9, 0.98], "eps": 1e-8, "weight_decay": 0.01},
    "loss": [[0, 2.5, 2.6], [1, 2.0, null]], "accuracy": [[0, 0.0], [1, 0.5]],
    "snapshots": [{"step": 0, "tokens": ["a", "b"], "attention": [[[[1, 0], [0.25, 0.75]]]]}],
    "answers": [{"input": "ab", "expected": "ba", "output": "ba", "correct": true}],
    "timing": {"seconds": 1.5, "steps_per_second": 2, "peak_bytes": 1000}})");
}

// the message of reading `j` (dumped), which must fail with exception type E
template <class E = io::json_error>
std::string refusal(const json& j, const io::training_page_limits& limits = {}) {
  try {
    (void)io::read_training_trace(j.dump(), "t.json", limits);
  } catch (const E& e) { return e.what(); }
  FAIL("the trace was not refused");
  return {};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string fixture = QKV_TEST_DATA "/train/reverse_trace_torch.json";

}  // namespace

TEST_CASE("the PyTorch fixture reads with every number as the file has it") {
  const std::string text = read_file(fixture);
  REQUIRE(!text.empty());
  const json raw = json::parse(text);
  const auto t = io::read_training_trace(text, "reverse_trace_torch.json");
  CHECK(t.task == "reverse");
  CHECK(t.model.layers == raw["model"]["layers"].get<std::uint64_t>());
  CHECK(t.model.heads == raw["model"]["heads"].get<std::uint64_t>());
  REQUIRE(t.loss.size() == raw["loss"].size());
  REQUIRE(t.snapshots.size() == raw["snapshots"].size());
  CHECK(t.snapshots.front().step == 0);
  CHECK(t.snapshots.back().step == raw["loss"].back()[0].get<std::uint64_t>());  // saved at the last step
  // every weight of every snapshot, in [l][h][i][j] order, equal to the file's double
  std::size_t checked = 0;
  for (std::size_t k = 0; k < t.snapshots.size(); ++k) {
    const auto& a = raw["snapshots"][k]["attention"];
    const std::size_t T = t.snapshots[k].tokens.size();
    for (std::size_t l = 0; l < t.model.layers; ++l)
      for (std::size_t h = 0; h < t.model.heads; ++h)
        for (std::size_t i = 0; i < T; ++i)
          for (std::size_t j = 0; j < T; ++j, ++checked)
            REQUIRE(t.snapshots[k].attention[((l * t.model.heads + h) * T + i) * T + j] ==
                    a[l][h][i][j].get<double>());
  }
  CHECK(checked == 30 * 2 * 2 * 8 * 8);
  for (std::size_t k = 0; k < t.loss.size(); ++k) {
    CHECK(t.loss[k].train == raw["loss"][k][1].get<double>());
    CHECK(t.loss[k].heldout.has_value() == !raw["loss"][k][2].is_null());
  }
}

TEST_CASE("the fixture's page is one file under its bound, with the trace's numbers and no network") {
  std::ostringstream out;
  io::write_training_page(out, read_file(fixture), "reverse_trace_torch.json");
  const std::string page = out.str();
  MESSAGE("the fixture's training page: " << page.size() << " bytes");
  CHECK(page.size() < 200 * 1024);  // the learner's pages' budget (docs/pages.md)
  CHECK(page.size() <= io::training_page_limits{}.page_bytes);
  CHECK(page.find("default-src 'none'") != std::string::npos);
  CHECK(page.find("http://") == page.find("http://www.w3.org"));  // namespaces only, no URL to load
  CHECK(page.find("https://") == std::string::npos);
  // the last snapshot's first weight of layer 1, head 0, query 5 as the trace writes it
  const json raw = json::parse(read_file(fixture));
  const std::string w = raw["snapshots"][29]["attention"][1][0][4].dump();
  CHECK(page.find(w.substr(1, w.find(',') - 1)) != std::string::npos);
}

TEST_CASE("the tiny trace reads and its page says what it holds") {
  const auto t = io::read_training_trace(tiny().dump(), "t.json");
  CHECK(t.snapshots[0].attention == std::vector<double>{1, 0, 0.25, 0.75});
  CHECK(!t.loss[1].heldout.has_value());
  const std::string page = io::training_page_html(t, "t.json");
  CHECK(page.find("1 of 1 right") != std::string::npos);
  CHECK(page.find("data-points=\"2\"") != std::string::npos);  // two train loss points
  CHECK(page.find("data-points=\"1\"") != std::string::npos);  // one held-out point
}

TEST_CASE("a wrong format tag, task or optimizer is refused naming the field") {
  auto j = tiny();
  j["format"] = "qkv-training-trace-2";
  CHECK(refusal(j) ==
        "t.json: field 'format': must be \"qkv-training-trace-1\", got \"qkv-training-trace-2\"");
  j = tiny();
  j.erase("format");
  CHECK(refusal(j) == "t.json: field 'format': missing");
  j = tiny();
  j["task"] = "copy";
  CHECK(refusal(j) == "t.json: field 'task': must be \"reverse\", \"sort\" or \"text\", got \"copy\"");
  j = tiny();
  j["optimizer"].erase("betas");
  CHECK(refusal(j) == "t.json: field 'optimizer.betas': missing");
  j = tiny();
  j["model"]["d_model"] = 6;
  j["model"]["heads"] = 4;
  CHECK(refusal(j) == "t.json: field 'model.d_model': 6 is not a multiple of model.heads = 4");
}

TEST_CASE("ragged or wrongly sized attention is refused naming the row") {
  auto j = tiny();
  j["snapshots"][0]["attention"][0][0][1] = json::array({0.25});  // a ragged row
  CHECK(refusal(j) ==
        "t.json: field 'snapshots[0].attention[0][0][1]': must be an array of 2 (2 keys, one per "
        "token), got an array of 1");
  j = tiny();
  j["snapshots"][0]["attention"].push_back(j["snapshots"][0]["attention"][0]);  // 2 layers for 1
  CHECK(refusal(j) ==
        "t.json: field 'snapshots[0].attention': must be an array of 1 (model.layers = 1 layers), "
        "got an array of 2");
  j = tiny();
  j["snapshots"][0]["attention"][0].push_back(j["snapshots"][0]["attention"][0][0]);  // 2 heads for 1
  CHECK(refusal(j).find("field 'snapshots[0].attention[0]': must be an array of 1 (model.heads = 1 heads)") !=
        std::string::npos);
  j = tiny();
  j["snapshots"][0]["tokens"] = json::array({"a", "b", "a"});  // 3 tokens, context 2
  CHECK(refusal<io::limit_error>(j) ==
        "t.json: field 'snapshots[0].tokens': 3 tokens (model.context), above the limit of 2");
  j = tiny();
  j["snapshots"][0]["tokens"][1] = "c";
  CHECK(refusal(j) == "t.json: field 'snapshots[0].tokens[1]': the token \"c\" is not in model.vocab");
}

TEST_CASE("NaN, a weight that breaks causality or a row that is not a distribution is refused") {
  // JSON has no NaN: the literal is a parse error, the string is not a number
  std::string text = tiny().dump();
  text.replace(text.find("0.25"), 4, "NaN");
  CHECK_THROWS_AS((void)io::read_training_trace(text, "t.json"), io::json_error);
  auto j = tiny();
  j["snapshots"][0]["attention"][0][0][1][0] = "NaN";
  CHECK(refusal(j) ==
        "t.json: field 'snapshots[0].attention[0][0][1][0]': must be a number in [0, 1] (an "
        "attention weight), got \"NaN\"");
  j = tiny();
  j["loss"][0][1] = "Infinity";
  CHECK(refusal(j) ==
        "t.json: field 'loss[0][1]': must be a number at least 0 (a cross-entropy), got \"Infinity\"");
  j = tiny();
  j["snapshots"][0]["attention"][0][0][0] = json::array({0.5, 0.5});  // query 0 sees key 1
  CHECK(refusal(j) ==
        "t.json: field 'snapshots[0].attention[0][0][0][1]': must be 0: key 1 comes after query 0 "
        "(the model is causal), got 0.5");
  j = tiny();
  // 0.25 + 0.7 = 0.95: 0.05 from 1, far above 2 2^-14 + 4 2^-24 = 1.2e-4
  j["snapshots"][0]["attention"][0][0][1][1] = 0.7;
  CHECK(refusal(j).find(
            "field 'snapshots[0].attention[0][0][1]': the weights of a query must sum to 1 within "
            "0.000122 (T 2^-14 + (T + 2) 2^-24, T = 2), got 0.94999999999999996") != std::string::npos);
  // the bound itself: a row rounded to 4 digits passes, one off by a 1000th does not
  CHECK(io::row_sum_bound(2) == 2 * 0x1p-14 + 4 * 0x1p-24);
  j = tiny();
  j["snapshots"][0]["attention"][0][0][1] = json::array({0.2500, 0.7501});
  CHECK_NOTHROW((void)io::read_training_trace(j.dump(), "t.json"));
  j["snapshots"][0]["attention"][0][0][1] = json::array({0.2500, 0.7510});
  CHECK_THROWS_AS((void)io::read_training_trace(j.dump(), "t.json"), io::json_error);
}

TEST_CASE("steps, answers and accuracies that contradict themselves are refused") {
  auto j = tiny();
  j["loss"][1][0] = 0;
  CHECK(refusal(j) == "t.json: field 'loss[1][0]': steps must increase: step 0 comes after step 0");
  j = tiny();
  j["accuracy"][1][1] = 1.5;
  CHECK(refusal(j) == "t.json: field 'accuracy[1][1]': must be a number in [0, 1], got 1.5");
  j = tiny();
  j["answers"][0]["output"] = "ab";
  CHECK(refusal(j) ==
        "t.json: field 'answers[0].correct': is true but the output \"ab\" differs from the "
        "expected \"ba\"");
  j = tiny();
  j["loss"][0][0] = -1;
  CHECK(refusal(j) == "t.json: field 'loss[0][0]': must be a non-negative integer, got -1");
  j = tiny();
  j["loss"][0][0] = 9007199254740993ull;  // 2^53 + 1: the page's script could not count it
  CHECK(refusal(j) == "t.json: field 'loss[0][0]': must be at most 9007199254740992, got 9007199254740993");
}

TEST_CASE("huge sizes are refused before anything of their size is allocated") {
  auto j = tiny();
  j["model"]["layers"] = 1000000000;
  CHECK(refusal<io::limit_error>(j) ==
        "t.json: field 'model.layers': 1000000000 layers, above the limit of 16");
  j = tiny();
  j["model"]["context"] = 18446744073709551615ull;
  CHECK(refusal<io::limit_error>(j) ==
        "t.json: field 'model.context': 18446744073709551615 tokens, above the limit of 256");
  // the attention numbers of all snapshots, counted from the declared sizes before reading them
  io::training_page_limits small;
  small.attention_numbers = 7;  // the tiny trace's one snapshot holds 1 x 1 x 2 x 2 = 4
  j = tiny();
  j["snapshots"].push_back(j["snapshots"][0]);
  j["snapshots"][1]["step"] = 1;
  CHECK(refusal<io::limit_error>(j, small) ==
        "t.json: field 'snapshots[1].attention': 8 attention weights in "
        "snapshots[0..1], above the limit of 7");
  small = {};
  small.snapshot_cells = 3;  // the page draws 4 cells at once
  CHECK(refusal<io::limit_error>(j, small) ==
        "t.json: field 'snapshots[0].attention': 4 cells to draw (layers x "
        "heads x 2 x 2), above the limit of 3");
  j = tiny();
  j["model"]["context"] = 256;
  j["model"]["heads"] = 4;
  j["snapshots"][0]["tokens"] = std::vector<std::string>(65, "a");  // 1 x 4 x 65 x 65 = 16,900 cells
  CHECK(refusal<io::limit_error>(j, small) ==
        "t.json: field 'snapshots[0].attention': 16900 cells to draw "
        "(layers x heads x 65 x 65), above the limit of 3");
  CHECK(refusal(j).find("field 'snapshots[0].attention[0]': must be an array of 4") != std::string::npos);
  small = {};
  small.snapshots = 1;
  j = tiny();
  j["snapshots"].push_back(j["snapshots"][0]);
  j["snapshots"][1]["step"] = 1;
  CHECK(refusal<io::limit_error>(j, small) == "t.json: field 'snapshots': 2 snapshots, above the limit of 1");
  small = {};
  small.trace_bytes = 100;
  CHECK(refusal<io::limit_error>(j, small).find("t.json: the trace is ") == 0);
  // a million '[': refused by counting, never handed to the parser's recursion
  const std::string deep(1000000, '[');
  try {
    (void)io::read_training_trace(deep, "deep.json");
    FAIL("not refused");
  } catch (const io::json_error& e) {
    CHECK(std::string(e.what()) ==
          "deep.json: arrays and objects nested 1000000 deep, a training trace nests at "
          "most 16");
  }
}

TEST_CASE("a page above its byte limit is refused before a byte is written") {
  io::training_page_limits small;
  small.page_bytes = 1000;  // the tiny trace's page is about 20 KB (the style and the script)
  std::ostringstream out;
  try {
    io::write_training_page(out, tiny().dump(), "t.json", small);
    FAIL("not refused");
  } catch (const io::limit_error& e) {
    CHECK(std::string(e.what()).find("the training page of t.json would be ") == 0);
  }
  CHECK(out.str().empty());
}

TEST_CASE("tokens and answers are escaped: a trace cannot put markup or a script end on the page") {
  auto j = tiny();
  j["model"]["vocab"] = json::array({"</script>", "<qkv-x>"});
  j["snapshots"][0]["tokens"] = json::array({"</script>", "<qkv-x>"});
  j["answers"][0] = {{"input", "<i>x</i>"}, {"expected", "&"}, {"output", "&"}, {"correct", true}};
  std::ostringstream out;
  io::write_training_page(out, j.dump(), "t.json");
  const std::string page = out.str();
  CHECK(page.find("<qkv-x>") == std::string::npos);
  CHECK(page.find("<i>") == std::string::npos);
  CHECK(page.find("\\u003c/script\\u003e") != std::string::npos);  // in the data, as JSON escapes
  // "</script>" only where the page's own two script elements end
  std::size_t n = 0;
  for (auto p = page.find("</script>"); p != std::string::npos; p = page.find("</script>", p + 1)) ++n;
  CHECK(n == 2);
}
