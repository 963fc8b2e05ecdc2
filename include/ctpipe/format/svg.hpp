// SVG of a table's timeline under a cost model: one row per rank, time to scale, one box per
// compute op (an overlapped pair F&B is one box) coloured by kind and labelled with its stage and
// microbatch where the label fits, comm ops as ticks, idle time as the row's background showing
// through, a legend above and the figures below. Written without an XML library (the format layer
// has no dependencies); run time only.
#pragma once

#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <ctpipe/format/text.hpp>

namespace ctpipe {

/// The picture's geometry, in pixels.
struct svg_options {
  double width = 1200.0;     // the time axis: the makespan spans this many pixels
  double row_height = 22.0;  // one rank's row
  double row_gap = 4.0;      // between rows
  double char_width = 6.2;   // of the label font (11 px sans-serif), to decide whether a label fits
  std::string_view title{};  // above the legend; the schedule's name and sizes when empty
};

namespace detail::svg {

// A number for an attribute: two decimals, no trailing zeros.
inline std::string num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s(buf);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}
// Text content with XML's special characters escaped.
inline std::string escape(std::string_view in) {
  std::string out;
  for (char c : in) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}
// The class (and colour) of a box: its op kind (F, B, I, W), "pair" or "comm".
inline std::string_view box_class(const timeline_item& x) {
  return x.pair ? "pair" : x.comm ? "comm" : op_name(x.op.op);
}

}  // namespace detail::svg

namespace detail::svg {

// One row of the picture: its label and its items.
struct row {
  std::string label;
  const std::vector<timeline_item>* items = nullptr;
};

// The document: the title, the legend, one row per entry of `rows` (time to scale: `makespan` spans
// o.width pixels), the time axis and `lines` of figures below.
inline std::string document(const std::string& title, const std::vector<row>& rows, double makespan,
                            const std::vector<std::string>& lines, const svg_options& o) {
  const double scale = makespan > 0.0 ? o.width / makespan : 0.0;  // pixels per unit of time
  const double left = 64.0, top = 58.0, right = 16.0;
  const int p = static_cast<int>(rows.size());
  const double rows_bottom = top + p * (o.row_height + o.row_gap);
  const double height = rows_bottom + 24.0 + static_cast<double>(lines.size()) * 16.0;
  const double width = left + o.width + right;

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
       "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s += "<style>.F{fill:#4c9be8}.B{fill:#e8844c}.I{fill:#e8c14c}.W{fill:#6dbf6d}.pair{fill:#9b6bd6}"
       ".comm{fill:#555}.skip{fill:#c0392b}.idle{fill:#eeeeee}.op{stroke:#fff;stroke-width:0.5}.label{fill:#111}"
       ".axis{stroke:#999;stroke-width:1}</style>\n";
  s += "<text x=\"" + num(left) + "\" y=\"16\" font-size=\"13\">" + escape(title) + "</text>\n";
  // Skip messages (skip connections across stages) get a colour and a key of their own where any is drawn.
  bool skips = false;
  for (const row& w_row : rows)
    for (const auto& x : *w_row.items) skips = skips || (x.comm && is_skip(x.op.op));
  std::vector<std::array<const char*, 2>> legend = {
      {"F", "forward F"},         {"B", "backward B"},      {"I", "input gradient I"}, {"W", "weight gradient W"},
      {"pair", "overlapped F&B"}, {"comm", "send/receive"}, {"idle", "idle"}};
  if (skips) legend.insert(legend.end() - 1, {"skip", "skip message"});
  double lx = left;
  s += "<g class=\"legend\">";
  for (const auto& entry : legend) {
    s +=
        "<rect class=\"key " + std::string(entry[0]) + "\" x=\"" + num(lx) + "\" y=\"26\" width=\"12\" height=\"12\"/>";
    s += "<text x=\"" + num(lx + 16) + "\" y=\"36\">" + escape(entry[1]) + "</text>";
    lx += 16 + o.char_width * static_cast<double>(std::string_view(entry[1]).size()) + 18;
  }
  s += "</g>\n";
  // One row per entry: the background (idle shows through), then its boxes and ticks.
  for (int r = 0; r < p; ++r) {
    const double y = top + r * (o.row_height + o.row_gap);
    const row& w_row = rows[detail::ix(r)];
    s += "<g class=\"rank\" id=\"rank" + std::to_string(r) + "\">";
    s += "<text x=\"" + num(left - 8) + "\" y=\"" + num(y + o.row_height / 2 + 4) + "\" text-anchor=\"end\">" +
         escape(w_row.label) + "</text>";
    s += "<rect class=\"idle\" x=\"" + num(left) + "\" y=\"" + num(y) + "\" width=\"" + num(makespan * scale) +
         "\" height=\"" + num(o.row_height) + "\"/>";
    for (const auto& x : *w_row.items) {
      const double x0 = left + x.start * scale, w = (x.end - x.start) * scale;
      if (x.comm) {
        s += "<rect class=\"" + std::string(is_skip(x.op.op) ? "skip" : "comm") + "\" x=\"" + num(x0 - 0.5) +
             "\" y=\"" + num(y + o.row_height - 4) + "\" width=\"1\" height=\"4\"><title>" + escape(describe(x.op)) +
             "</title></rect>";
        continue;
      }
      s += "<rect class=\"op " + std::string(box_class(x)) + "\" x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" +
           num(w) + "\" height=\"" + num(o.row_height) + "\"><title>" + escape(w_row.label) + ": " +
           escape(detail::item_name(x)) + " (" + detail::format_number(x.start) + " to " +
           detail::format_number(x.end) + ")</title></rect>";
      // The label: stage and microbatch ("2F5", "0F7&7B3"), where it fits; labels go before boxes do.
      const std::string label = x.pair ? action_string(x.op) + "&" + action_string(x.second) : action_string(x.op);
      if (w >= o.char_width * static_cast<double>(label.size()) + 2.0)
        s += "<text class=\"label\" x=\"" + num(x0 + w / 2) + "\" y=\"" + num(y + o.row_height / 2 + 4) +
             "\" text-anchor=\"middle\">" + escape(label) + "</text>";
    }
    s += "</g>\n";
  }
  // The time axis, and the figures below it.
  s += "<line class=\"axis\" x1=\"" + num(left) + "\" y1=\"" + num(rows_bottom + 2) + "\" x2=\"" +
       num(left + makespan * scale) + "\" y2=\"" + num(rows_bottom + 2) + "\"/>";
  s += "<text x=\"" + num(left) + "\" y=\"" + num(rows_bottom + 14) + "\">0</text>";
  s += "<text x=\"" + num(left + makespan * scale) + "\" y=\"" + num(rows_bottom + 14) + "\" text-anchor=\"end\">" +
       detail::format_number(makespan) + "</text>\n";
  for (std::size_t k = 0; k < lines.size(); ++k)
    s += "<text class=\"figures\" x=\"" + num(left) + "\" y=\"" +
         num(rows_bottom + 32 + 16.0 * static_cast<double>(k)) + "\">" + escape(lines[k]) + "</text>\n";
  s += "</svg>\n";
  return s;
}

// Numbers separated by spaces (format_number), and integers.
template <class V, class Format>
std::string joined(const V& v, Format format) {
  std::string out;
  for (auto x : v) {
    if (!out.empty()) out += ' ';
    out += format(x);
  }
  return out;
}
template <class V>
std::string numbers(const V& v) {
  return joined(v, [](auto x) { return detail::format_number(static_cast<double>(x)); });
}
template <class V>
std::string integers(const V& v) {
  return joined(v, [](auto x) { return std::to_string(x); });
}

// The title of a table's picture: its schedule's name and sizes, unless the options give one.
template <table_like Table>
std::string title_of(const Table& t, const svg_options& o) {
  if (!o.title.empty()) return std::string(o.title);
  std::string name = "custom";
  if constexpr (requires { t.params.name; }) name = std::string(t.params.name.view());
  return name + ": ranks " + std::to_string(t.ranks()) + ", microbatches " + std::to_string(t.microbatches()) +
         ", stages " + std::to_string(t.stages());
}

}  // namespace detail::svg

/// The timeline of `t` under `costs` as a standalone SVG document, with the figures of `rep`
/// (analyse(t, costs)) written below it.
template <table_like Table, cost_function Costs, std::size_t R>
std::string to_svg(const Table& t, const Costs& costs, const report<R>& rep, const svg_options& o = {}) {
  using detail::svg::integers;
  using detail::svg::numbers;
  double makespan = 0.0;
  const auto items = detail::timeline_items(t, costs, makespan);
  std::vector<detail::svg::row> rows;
  for (int r = 0; r < t.ranks(); ++r) rows.push_back({"rank " + std::to_string(r), &items[detail::ix(r)]});
  // (Appending piece by piece: g++ 12 -O3 warns falsely on `literal + string` here, PR 105651.)
  std::vector<std::string> lines;
  lines.push_back("makespan " + detail::format_number(rep.makespan) + ", bubble fraction " +
                  detail::format_number(std::round(rep.bubble_fraction * 10000.0) / 10000.0) + ", bubble rate " +
                  detail::format_number(std::round(rep.bubble_rate * 10000.0) / 10000.0));
  lines.push_back("busy per rank " + numbers(rep.busy) + "; bubble per rank " + numbers(rep.bubble));
  lines.push_back("peak live activations per rank " + integers(rep.peak_live) + " (awaiting I " +
                  integers(rep.peak_awaiting_input) + ", awaiting W " + integers(rep.peak_awaiting_weight) + ")");
  lines.push_back("activation slots per rank " + integers(rep.activation_slots) + "; gradient slots per rank " +
                  integers(rep.gradient_slots));
  return detail::svg::document(detail::svg::title_of(t, o), rows, makespan, lines, o);
}

/// The same, analysing `t` under `costs` itself.
template <table_like Table, cost_function Costs = cost_model>
std::string to_svg(const Table& t, const Costs& costs = {}, const svg_options& o = {}) {
  return to_svg(t, costs, analyse(t, costs), o);
}

}  // namespace ctpipe
