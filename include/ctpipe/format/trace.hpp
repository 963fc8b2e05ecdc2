// The Chrome trace event format (JSON) of a table's timeline under a cost model, for Perfetto
// (ui.perfetto.dev) and chrome://tracing: a process per rank, a thread for its compute ops and one
// for its sends and receives. Each compute op is a complete event ("X") from its simulated start to
// its end (an overlapped pair F&B is one event); each send or receive an instant event ("i") at
// the moment it completes. Written without a JSON library; run time only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <ctpipe/format/text.hpp>

namespace ctpipe {

struct trace_options {
  double microseconds_per_unit = 1000.0;  // one unit of cost shows as this long (default: 1 ms)
};

namespace detail {
// Appends the events of `rows` (one row per process pid_base + r, named name(r)) to the document `s`.
template <class Name>
void trace_events(const std::vector<std::vector<timeline_item>>& rows, int pid_base, Name&& name, double k,
                  std::string& s, bool& first) {
  auto event = [&](const std::string& e) {
    s += first ? "\n" : ",\n";
    first = false;
    s += e;
  };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::string pid = std::to_string(pid_base + static_cast<int>(r));
    event("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"args\": {\"name\": \"" +
          name(static_cast<int>(r)) + "\"}}");
    event("{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + pid + ", \"args\": {\"sort_index\": " + pid +
          "}}");
    event("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid +
          ", \"tid\": 0, \"args\": {\"name\": \"compute\"}}");
    event("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid +
          ", \"tid\": 1, \"args\": {\"name\": \"send/receive\"}}");
    for (const auto& x : rows[r]) {
      std::string e = "{\"name\": \"" + detail::item_name(x) + "\", \"cat\": \"" +
                      (x.pair ? std::string("F&B") : std::string(op_name(x.op.op))) + "\", \"pid\": " + pid;
      if (x.comm) {
        e += ", \"tid\": 1, \"ph\": \"i\", \"s\": \"t\", \"ts\": " + detail::format_number(x.start * k) +
             ", \"args\": {\"peer\": " + std::to_string(x.op.peer) +
             (is_skip(x.op.op)
                  ? ", \"stage\": " + std::to_string(x.op.stage) + ", \"other\": " + std::to_string(x.op.other)
                  : std::string()) +
             "}}";
      } else {
        e += ", \"tid\": 0, \"ph\": \"X\", \"ts\": " + detail::format_number(x.start * k) +
             ", \"dur\": " + detail::format_number((x.end - x.start) * k) +
             ", \"args\": {\"stage\": " + std::to_string(x.op.stage) +
             ", \"microbatch\": " + std::to_string(x.op.microbatch) + "}}";
      }
      event(e);
    }
  }
}
}  // namespace detail

/// The trace events of `t` under `costs` as one JSON document ({"traceEvents": [...]}).
template <table_like Table, cost_function Costs = cost_model>
std::string to_trace(const Table& t, const Costs& costs = {}, const trace_options& o = {}) {
  double makespan = 0.0;
  const auto rows = detail::timeline_items(t, costs, makespan);
  std::string s = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool first = true;
  detail::trace_events(
      rows, 0, [](int r) { return "rank " + std::to_string(r); }, o.microseconds_per_unit, s, first);
  return s + "\n]}\n";
}

}  // namespace ctpipe
