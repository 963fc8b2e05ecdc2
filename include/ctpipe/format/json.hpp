// JSON of a table and its figures, written without a JSON library (the format layer has no
// dependencies). Shape: the table's fields (table_json, format/table_json.hpp), then "makespan",
// "bubble_fraction", "bubble_rate", "busy", "idle", "span", "bubble", "peak_live",
// "peak_awaiting_input", "peak_awaiting_weight", "activation_slots", "gradient_slots",
// "skip_value_slots", "skip_gradient_slots" (tables with skip connections),
// "channel_capacity": [{"from", "to", "capacity"}, ...]}.
#pragma once

#include <cmath>
#include <string>

#include <ctpipe/format/table_json.hpp>
#include <ctpipe/format/text.hpp>

namespace ctpipe {

template <table_like Table, std::size_t R>
std::string to_json(const Table& t, const report<R>& rep) {
  auto list = [](const auto& v) {
    std::string s = "[";
    bool first = true;
    for (auto x : v) {
      s += first ? "" : ", ";
      first = false;
      if constexpr (std::is_floating_point_v<decltype(x)>)
        s += detail::format_number(x);
      else
        s += std::to_string(x);
    }
    return s + "]";
  };
  std::string s = table_json(t);
  s.pop_back();  // its closing brace: the figures follow
  const bool crossings = !crossings_of(t).empty();
  s += ", \"makespan\": " + detail::format_number(rep.makespan);
  s += ", \"bubble_fraction\": " + detail::format_number(std::round(rep.bubble_fraction * 10000.0) / 10000.0);
  s += ", \"bubble_rate\": " + detail::format_number(std::round(rep.bubble_rate * 10000.0) / 10000.0);
  s += ", \"busy\": " + list(rep.busy) + ", \"idle\": " + list(rep.idle);
  s += ", \"span\": " + list(rep.span) + ", \"bubble\": " + list(rep.bubble);
  s += ", \"peak_live\": " + list(rep.peak_live);
  s += ", \"peak_awaiting_input\": " + list(rep.peak_awaiting_input);
  s += ", \"peak_awaiting_weight\": " + list(rep.peak_awaiting_weight);
  s += ", \"activation_slots\": " + list(rep.activation_slots) + ", \"gradient_slots\": " + list(rep.gradient_slots);
  if (crossings)
    s += ", \"skip_value_slots\": " + list(rep.skip_value_slots) +
         ", \"skip_gradient_slots\": " + list(rep.skip_gradient_slots);
  s += ", \"channel_capacity\": [";
  bool first = true;
  const int p = t.ranks();
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b)
      if (rep.capacity(a, b) > 0) {
        s += first ? "" : ", ";
        first = false;
        s += "{\"from\": " + std::to_string(a) + ", \"to\": " + std::to_string(b) +
             ", \"capacity\": " + std::to_string(rep.capacity(a, b)) + "}";
      }
  return s + "]}";
}

}  // namespace ctpipe
