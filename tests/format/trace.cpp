// Chrome trace events (Perfetto), checked against the simulation they come from.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "support/test_util.hpp"

TEST_CASE("trace: a process per rank, one complete event per op at the simulated times") {
  const ctpipe::cost_model costs{.forward = 0.5, .backward = 1, .backward_input = 0.5, .backward_weight = 0.5};
  for (const auto& t : {ctpipe::generate(ctpipe::one_f_one_b(4, 8)), ctpipe::generate(ctpipe::dualpipe_v(4, 8)),
                        ctpipe::generate(ctpipe::one_f_one_b(4, 8), std::vector<ctpipe::crossing>{{0, 2, 8}})}) {
    CAPTURE(std::string(t.params.name.view()));
    const auto j = nlohmann::json::parse(ctpipe::to_trace(t, costs));
    int complete = 0, instant = 0, processes = 0;
    std::map<int, double> last_end;
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
      if (e["ph"] == "i") ++instant;
      // A skip message names both its stages.
      if (e["ph"] == "i" && e["cat"] == "SEND_SKIP_F") CHECK(e["args"]["other"].get<int>() == 2);
      if (e["ph"] != "X") continue;
      ++complete;
      const double expected = e["cat"] == "F&B" ? 1500.0 : e["cat"] == "B" ? 1000.0 : 500.0;  // 1 unit = 1 ms
      CHECK(e["dur"].get<double>() == doctest::Approx(expected));
      const int pid = e["pid"].get<int>();
      CHECK(e["ts"].get<double>() >= last_end[pid] - 1e-9);  // a rank's compute ops do not overlap
      last_end[pid] = e["ts"].get<double>() + e["dur"].get<double>();
    }
    const auto [compute, comm] = test::drawn_ops(t);
    CHECK(processes == t.ranks());
    CHECK(complete == compute);
    CHECK(instant == comm);
    double end = 0.0;
    for (const auto& [pid, e] : last_end) end = std::max(end, e);
    CHECK(end == doctest::Approx(ctpipe::analyse(t, costs).makespan * 1000.0));
  }
}
