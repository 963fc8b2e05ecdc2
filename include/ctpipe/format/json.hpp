// JSON of a table and its figures, written without a JSON library (the format layer has no
// dependencies). Shape: {"schedule", "ranks", "microbatches", "chunks", "group" (grouped schedules),
// "directions" (bidirectional ones), "forward_only" (forward-only tables), "stages",
// "stage_rank", "crossings": [{"from", "to", "bytes"}, ...] (tables with skip connections),
// "programs": [[{"op", "stage", "mb"[, "peer"][, "other"][, "overlapped"]}, ...], ...], "makespan",
// "bubble_fraction", "bubble_rate", "busy", "idle", "span", "bubble", "peak_live",
// "peak_awaiting_input", "peak_awaiting_weight", "activation_slots", "gradient_slots",
// "skip_value_slots", "skip_gradient_slots" (tables with skip connections),
// "channel_capacity": [{"from", "to", "capacity"}, ...]}.
#pragma once

#include <cmath>
#include <string>

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
  std::string s = "{\"schedule\": \"" + std::string(t.params.name.view()) + "\"";
  s += ", \"ranks\": " + std::to_string(t.ranks());
  s += ", \"microbatches\": " + std::to_string(t.microbatches());
  s += ", \"chunks\": " + std::to_string(t.params.chunks);
  if (t.params.group > 0) s += ", \"group\": " + std::to_string(t.params.group);
  if (t.params.directions != 1) s += ", \"directions\": " + std::to_string(t.params.directions);
  if (forward_only_of(t)) s += ", \"forward_only\": true";
  s += ", \"stages\": " + std::to_string(t.stages());
  std::vector<int> placement;
  for (int st = 0; st < t.stages(); ++st) placement.push_back(t.rank_of(st));
  s += ", \"stage_rank\": " + list(placement);
  const auto crossings = crossings_of(t);
  if (!crossings.empty()) {
    s += ", \"crossings\": [";
    for (std::size_t k = 0; k < crossings.size(); ++k)
      s += std::string(k ? ", " : "") + "{\"from\": " + std::to_string(crossings[k].from) +
           ", \"to\": " + std::to_string(crossings[k].to) + ", \"bytes\": " + std::to_string(crossings[k].bytes) + "}";
    s += "]";
  }
  s += ", \"programs\": [";
  for (int r = 0; r < t.ranks(); ++r) {
    s += r ? ", [" : "[";
    bool first = true;
    for (const task& x : t.program(r)) {
      s += first ? "" : ", ";
      first = false;
      s += "{\"op\": \"" + std::string(op_name(x.op)) + "\", \"stage\": " + std::to_string(x.stage) +
           ", \"mb\": " + std::to_string(x.microbatch);
      if (is_comm(x.op)) s += ", \"peer\": " + std::to_string(x.peer);
      if (is_skip(x.op)) s += ", \"other\": " + std::to_string(x.other);
      if (x.overlapped) s += ", \"overlapped\": true";
      s += "}";
    }
    s += "]";
  }
  s += "]";
  s += ", \"makespan\": " + detail::format_number(rep.makespan);
  s += ", \"bubble_fraction\": " + detail::format_number(std::round(rep.bubble_fraction * 10000.0) / 10000.0);
  s += ", \"bubble_rate\": " + detail::format_number(std::round(rep.bubble_rate * 10000.0) / 10000.0);
  s += ", \"busy\": " + list(rep.busy) + ", \"idle\": " + list(rep.idle);
  s += ", \"span\": " + list(rep.span) + ", \"bubble\": " + list(rep.bubble);
  s += ", \"peak_live\": " + list(rep.peak_live);
  s += ", \"peak_awaiting_input\": " + list(rep.peak_awaiting_input);
  s += ", \"peak_awaiting_weight\": " + list(rep.peak_awaiting_weight);
  s += ", \"activation_slots\": " + list(rep.activation_slots) + ", \"gradient_slots\": " + list(rep.gradient_slots);
  if (!crossings.empty())
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
