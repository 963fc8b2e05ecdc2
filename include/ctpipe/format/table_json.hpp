// A table alone as JSON, the part of to_json (format/json.hpp) that a reader needs to rebuild it:
// {"schedule", "ranks", "microbatches", "chunks", "group" (grouped schedules), "directions"
// (bidirectional ones), "forward_only" (forward-only tables), "stages", "stage_rank", "crossings":
// [{"from", "to", "bytes"}, ...] (tables with skip connections), "programs": [[{"op", "stage", "mb"
// [, "peer"][, "other"][, "overlapped"]}, ...], ...]}. What the `ctpipe` tool reads back (check,
// compare, hang-report); the hang report's files carry it (exec/detail/hang_record.hpp).
#pragma once

#include <string>

#include <ctpipe/config.hpp>
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

/// The table's fields as one JSON object (no figures: to_json adds them).
template <table_like Table>
CTPIPE_COLD std::string table_json(const Table& t) {
  std::string s = "{\"schedule\": \"" + std::string(t.params.name.view()) + "\"";
  s += ", \"ranks\": " + std::to_string(t.ranks());
  s += ", \"microbatches\": " + std::to_string(t.microbatches());
  s += ", \"chunks\": " + std::to_string(t.params.chunks);
  if (t.params.group > 0) s += ", \"group\": " + std::to_string(t.params.group);
  if (t.params.directions != 1) s += ", \"directions\": " + std::to_string(t.params.directions);
  if (forward_only_of(t)) s += ", \"forward_only\": true";
  s += ", \"stages\": " + std::to_string(t.stages());
  s += ", \"stage_rank\": [";
  for (int st = 0; st < t.stages(); ++st) s += (st ? ", " : "") + std::to_string(t.rank_of(st));
  s += "]";
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
      s += "{\"op\": \"";
      s += op_name(x.op);
      s += "\", \"stage\": " + std::to_string(x.stage) + ", \"mb\": " + std::to_string(x.microbatch);
      if (is_comm(x.op)) s += ", \"peer\": " + std::to_string(x.peer);
      if (is_skip(x.op)) s += ", \"other\": " + std::to_string(x.other);
      if (x.overlapped) s += ", \"overlapped\": true";
      s += "}";
    }
    s += "]";
  }
  return s + "]}";
}

}  // namespace ctpipe
