// runtime tests of io/svg.hpp and io/html.hpp: golden files (tests/data/*.svg, *.html; rewrite
// them with QKV_UPDATE_GOLDEN=1 after a deliberate change, and look at them), escaping, colours,
// tooltips and shape errors. tests/io/check_xml.py checks that the golden files are well-formed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <qkv/io/html.hpp>
#include <qkv/io/svg.hpp>

using namespace qkv::io;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// compares with tests/data/NAME, or rewrites it when QKV_UPDATE_GOLDEN is set
void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(QKV_TEST_DATA) + "/" + name;
  if (std::getenv("QKV_UPDATE_GOLDEN")) write_text_file(path, actual);
  const std::string expected = read_file(path);
  INFO("golden file " << path << " (QKV_UPDATE_GOLDEN=1 rewrites it)");
  CHECK(actual == expected);
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

// two heads over four tokens, with labels that XML must escape; each row sums to 1
const std::vector<std::string> tokens = {"[CLS]", "a<b", "\"&'", "中"};
const std::vector<std::vector<std::vector<double>>> weights = {
    {{1.0, 0.0, 0.0, 0.0}, {0.5, 0.5, 0.0, 0.0}, {0.25, 0.25, 0.25, 0.25}, {0.125, 0.125, 0.25, 0.5}},
    {{0.0, 0.0, 0.0, 1.0}, {0.1, 0.2, 0.3, 0.4}, {0.7, 0.1, 0.1, 0.1}, {0.0625, 0.0625, 0.375, 0.5}}};

}  // namespace

TEST_CASE("the attention heatmap of two heads matches its golden file") {
  heatmap_options o;
  o.title = "attention weights, 2 heads";
  const std::string svg = attention_svg(tokens, weights, o);
  check_golden("attention_two_heads.svg", svg);
  // one tooltip per cell: 2 heads x 4 x 4
  CHECK(count(svg, "<title>") == 32);
  CHECK(count(svg, "<g class=\"panel\">") == 2);
  // labels escaped, never raw
  CHECK(svg.find("a&lt;b") != std::string::npos);
  CHECK(svg.find("&quot;&amp;&apos;") != std::string::npos);
  CHECK(svg.find("a<b") == std::string::npos);
  // the tooltip of head 1, query 1 "a<b", key 3 "中": 0.4
  CHECK(svg.find("<title>head 1: query 1 &quot;a&lt;b&quot;, key 3 &quot;中&quot; = 0.4</title>") !=
        std::string::npos);
}

TEST_CASE("the colour scale runs from the lightest to the darkest Blues anchor") {
  // weight 0 -> #f7fbff, weight 1 -> #08306b, 0.5 -> anchor 4 of 0..8 exactly: #6baed6
  const std::string svg = attention_svg({"x"}, {{{0.0}}, {{1.0}}, {{0.5}}});
  CHECK(svg.find("fill=\"#f7fbff\" stroke") != std::string::npos);
  CHECK(svg.find("fill=\"#08306b\" stroke") != std::string::npos);
  CHECK(svg.find("fill=\"#6baed6\" stroke") != std::string::npos);
  // 1/16 is halfway between anchors 0 (#f7fbff) and 1 (#deebf7): (0xf7 + 0xde) / 2 = 234.5 -> 235
  // = #eb; (0xfb + 0xeb) / 2 = 243 = #f3; (0xff + 0xf7) / 2 = 251 = #fb
  CHECK(attention_svg({"x"}, {{{0.0625}}}).find("fill=\"#ebf3fb\" stroke") != std::string::npos);
}

TEST_CASE("a heatmap with its own range, a NaN and different row and column labels matches its golden file") {
  heatmap_panel scores{"scores", 2, 3, {-2.0, 0.5, 3.0, std::numeric_limits<double>::quiet_NaN(), 1.0, -1.0}};
  heatmap_options o;
  o.auto_range = true;
  o.row_axis = "query";
  o.col_axis = "key";
  o.id = "scores";
  const std::string svg = heatmap_svg({"q0", "q1"}, {"k0", "k1", "k2"}, {scores}, o);
  check_golden("heatmap_scores.svg", svg);
  // the range is the data's: -2 (lightest) to 3 (darkest); NaN is grey and says nan
  CHECK(svg.find("fill=\"#f7fbff\" stroke") != std::string::npos);
  CHECK(svg.find("fill=\"#08306b\" stroke") != std::string::npos);
  CHECK(svg.find("fill=\"#bdbdbd\" stroke") != std::string::npos);
  CHECK(svg.find("= nan</title>") != std::string::npos);
  CHECK(svg.find("url(#scores-scale)") != std::string::npos);
}

TEST_CASE("a heatmap whose shape does not match its labels is refused, naming both") {
  CHECK_THROWS_WITH_AS(
      (void)heatmap_svg({"a", "b"}, {"a", "b"}, {heatmap_panel{"head 3", 2, 3, std::vector<double>(6)}}),
      "heatmap_svg: panel 0 ('head 3') is (2, 3) with 6 values, but the labels are (2, 2)",
      std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)attention_svg({"a", "b"}, {{{1, 0}, {0, 1}}, {{1, 0}, {1}}}),
                       "attention_svg: head 1 row 1 has 1 weights for 2 key labels", std::invalid_argument);
  CHECK_THROWS_AS((void)heatmap_svg({"a"}, {"a"}, {}), std::invalid_argument);
}

TEST_CASE("XML escaping replaces what XML cannot hold") {
  CHECK(xml_escape("<a href='x'>&</a>") == "&lt;a href=&apos;x&apos;&gt;&amp;&lt;/a&gt;");
  // a control character and invalid UTF-8 become U+FFFD
  CHECK(xml_escape(std::string("a\x01") + "b") ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(xml_escape("caf\xe9") == "caf\xEF\xBF\xBD");
  CHECK(xml_escape("tab\tok") == "tab\tok");
}

TEST_CASE("the walkthrough page matches its golden file") {
  html_page page("walkthrough <test>");
  page.paragraph("Two heads & four tokens.");
  page.heading("Inputs");
  page.matrix("x", 2, 3, {1.0, 0.5, -0.25, 1e-7, 123456789.0, 0.1}, {"[CLS]", "a<b"});
  page.matrix("weights[0]", weights[0], tokens, tokens, 4);
  page.preformatted("tensor([[1., 0.]])");
  page.heading("Weights", 3);
  page.svg(attention_svg(tokens, weights));
  const std::string html = page.str();
  check_golden("walkthrough.html", html);
  // every matrix is captioned with its shape
  CHECK(html.find("<caption><code>x</code> (2, 3)</caption>") != std::string::npos);
  CHECK(html.find("<caption><code>weights[0]</code> (4, 4)</caption>") != std::string::npos);
  // self-contained: no script, no external reference
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
}

TEST_CASE("a matrix table with the wrong number of values or labels is refused") {
  html_page page("t");
  CHECK_THROWS_WITH_AS(page.matrix("q", 2, 2, {1, 2, 3}), "html_page::matrix 'q' is (2, 2) but has 3 values",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(page.matrix("q", 1, 2, {1, 2}, {"a", "b"}),
                       "html_page::matrix 'q' is (1, 2) but has 2 row labels", std::invalid_argument);
  CHECK_THROWS_AS(page.matrix("q", {{1, 2}, {3}}), std::invalid_argument);
}
