// SVG timelines, checked against the tables they draw: well-formed, one box per op, to scale.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "support/test_util.hpp"

namespace {

// Well-formed XML, as far as an SVG needs: every tag closed in order, attributes quoted, no stray
// '<' or '&' in text. Returns "" or what is wrong.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  std::size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] == '&') {
      const auto semi = s.find(';', i);
      const std::string entity = s.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;")
        return "a bare & at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    const auto end = s.find('>', i);
    if (end == std::string::npos) return "an unclosed tag at " + std::to_string(i);
    std::string tag = s.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "a '<' inside a tag at " + std::to_string(i);
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return "an unquoted attribute at " + std::to_string(i);
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes " + (open.empty() ? "nothing" : open.back());
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = end + 1;
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

struct box {
  std::string kind;
  double x, width;
  int row;
};
// Every op box of an SVG: its class, x, width and row (from its y).
std::vector<box> boxes(const std::string& svg, double row_pitch = 26.0, double top = 58.0) {
  std::vector<box> out;
  const std::regex re(R"re(<rect class="op (\w+)" x="([-0-9.]+)" y="([-0-9.]+)" width="([-0-9.]+)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    out.push_back({m[1].str(), std::stod(m[2].str()), std::stod(m[4].str()),
                   static_cast<int>(std::lround((std::stod(m[3].str()) - top) / row_pitch))});
  }
  return out;
}
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("SVG: well-formed, one box per op (a pair is one), widths to scale, rows by rank") {
  const ctpipe::cost_model costs{.forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1};
  auto check_one = [&](const ctpipe::dynamic_table& t) {
    CAPTURE(std::string(t.params.name.view()));
    const std::string svg = ctpipe::to_svg(t, costs);
    CHECK(xml_problem(svg) == "");
    const auto [compute, comm] = test::drawn_ops(t);
    const auto b = boxes(svg);
    CHECK(static_cast<int>(b.size()) == compute);
    int skips = 0;  // skip messages: ticks of their own colour, with a key in the legend
    for (int r = 0; r < t.ranks(); ++r)
      for (const auto& x : t.program(r)) skips += ctpipe::is_skip(x.op);
    CHECK(count(svg, "<rect class=\"comm\"") == comm - skips);
    CHECK(count(svg, "<rect class=\"skip\"") == skips);
    CHECK((svg.find("skip message</text>") != std::string::npos) == (skips > 0));
    // Every box as wide as its op's cost at the picture's scale (the makespan spans 1200 px).
    const double scale = 1200.0 / ctpipe::analyse(t, costs).makespan;
    std::map<std::string, double> cost{{"F", 1}, {"B", 2}, {"I", 1}, {"W", 1}, {"pair", 3}};
    for (const auto& x : b) {
      CAPTURE(x.kind);
      CHECK(x.width == doctest::Approx(cost[x.kind] * scale).epsilon(0.001));
      CHECK(x.row >= 0);
      CHECK(x.row < t.ranks());
    }
    return b;
  };
  const auto b = check_one(ctpipe::generate(ctpipe::one_f_one_b(4, 8)));
  // 1F1B p=4 m=8: 16 boxes a rank; rank 3's first F starts where 3 forwards have gone before it.
  for (int r = 0; r < 4; ++r) CHECK(std::count_if(b.begin(), b.end(), [&](const box& x) { return x.row == r; }) == 16);
  const double scale = 1200.0 / 33.0;
  const auto first3 = std::find_if(b.begin(), b.end(), [](const box& x) { return x.row == 3; });
  CHECK(first3->x == doctest::Approx(64.0 + 3 * scale).epsilon(0.001));
  check_one(ctpipe::generate(ctpipe::zb_h2(4, 8)));
  check_one(ctpipe::generate(ctpipe::dualpipe_v(4, 8)));  // pairs: one box each
  check_one(ctpipe::generate(ctpipe::dualpipe(4, 8)));
  check_one(ctpipe::generate(ctpipe::interleaved(4, 8, 2)));
  check_one(ctpipe::generate(ctpipe::zb_v(4, 8), std::vector<ctpipe::crossing>{{0, 3, 8}, {2, 7, 8}}));
}

TEST_CASE("SVG: legend, figures, labels where they fit, at 2,000+ ops labels drop before boxes do") {
  const auto small = ctpipe::to_svg(ctpipe::generate(ctpipe::one_f_one_b(2, 2)), ctpipe::cost_model{1, 2});
  for (const char* s : {"forward F", "backward B", "input gradient I", "weight gradient W", "overlapped F&amp;B",
                        "send/receive", "makespan 9.0", "peak live activations per rank 2 1", "1f1b: ranks 2"})
    CHECK_MESSAGE(small.find(s) != std::string::npos, s);
  CHECK(count(small, "<text class=\"label\"") == 8);                        // every box wide enough for "0F1"
  const auto big_table = ctpipe::generate(ctpipe::interleaved(16, 64, 2));  // 12,032 tasks
  const auto big = ctpipe::to_svg(big_table, ctpipe::cost_model{1, 2});
  CHECK(xml_problem(big) == "");
  CHECK(static_cast<int>(boxes(big).size()) == test::drawn_ops(big_table).first);
  CHECK(count(big, "<text class=\"label\"") < static_cast<int>(boxes(big).size()) / 10);
  // Wider, the labels come back.
  ctpipe::svg_options wide;
  wide.width = 20000;
  CHECK(count(ctpipe::to_svg(big_table, ctpipe::cost_model{1, 2}, wide), "<text class=\"label\"") ==
        test::drawn_ops(big_table).first);
}
