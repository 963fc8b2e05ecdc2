// What really ran: the host executor records one step's task times when asked (off by default),
// and the record is consistent with the table: every task once, in program order, receives after
// their sends; the numerics do not change; a failed step leaves the failing task without an end.
#include "support/recording.hpp"
#include "support/numerics.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <type_traits>

namespace {

constexpr auto table_1f1b = ctpipe::make_table<ctpipe::one_f_one_b(3, test::microbatches)>();
constexpr auto stages_3 = ctpipe::partition<test::mlp, 3>();
constexpr auto table_zb_v = ctpipe::make_table<ctpipe::zb_v(2, test::microbatches)>();
constexpr auto stages_4 = ctpipe::partition<test::mlp, 4>();

template <auto Table, auto Stages>
void record_one_step() {
  using exec_t = ctpipe::host_executor<Table, test::mlp, Stages, test::loss>;
  static_assert(std::is_same_v<typename exec_t::input_type, test::mlp::input_type> &&
                std::is_same_v<typename exec_t::output_type, test::mlp::output_type> &&
                std::is_same_v<typename exec_t::target_type, test::loss::target_type>);
  auto model = test::make_mlp(), reference = test::make_mlp();
  test::loss l;
  const auto d = test::make_data();
  exec_t exec(model, l);
  CHECK(exec.recorded_step().ranks.empty());  // off by default
  exec.record_steps(true);
  const auto recorded = exec.step(d.inputs, d.targets);
  const std::vector<double> losses(recorded.begin(), recorded.end());
  test::check_record(exec_t::table, exec.recorded_step());
  // The numerics are those of a step that does not record.
  exec_t plain(reference, l);
  const auto plain_losses = plain.step(d.inputs, d.targets);
  CHECK(std::equal(losses.begin(), losses.end(), plain_losses.begin()));
  CHECK(test::gradients(model) == test::gradients(reference));
  // The comparison: the replay never takes longer than what ran; the pictures draw every task.
  const auto c = ctpipe::compare_measured(exec_t::table, exec.recorded_step());
  CHECK(c.replayed <= c.measured + 1e-9);
  CHECK(c.replayed > 0.0);
  const auto trace = nlohmann::json::parse(ctpipe::measured_trace(exec_t::table, exec.recorded_step()));
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) complete += e["ph"] == "X";
  int items = 0;
  for (int r = 0; r < exec_t::table.ranks(); ++r)
    for (std::size_t i = 0; i < exec_t::table.program(r).size(); ++i) {
      const auto& x = exec_t::table.program(r)[i];
      items += ctpipe::is_compute(x.op) && !(i > 0 && exec_t::table.program(r)[i - 1].overlapped);
    }
  CHECK(complete == 2 * items);  // as it ran, and the replay
  const std::string svg = ctpipe::measured_svg(exec_t::table, exec.recorded_step());
  CHECK(svg.find("replay 1") != std::string::npos);
  // Off again: the last recording stays readable, and the steps that follow record nothing.
  const ctpipe::measured_step last = exec.recorded_step();
  exec.record_steps(false);
  CHECK(exec.recorded_step().ranks == last.ranks);
  exec.step(d.inputs, d.targets);
  CHECK(exec.recorded_step().ranks == last.ranks);
  // On again: the next step's recording replaces it.
  exec.record_steps(true);
  exec.step(d.inputs, d.targets);
  test::check_record(exec_t::table, exec.recorded_step());
  CHECK_FALSE(exec.recorded_step().ranks == last.ranks);
}

}  // namespace

TEST_CASE("record_steps: 1F1B on 3 ranks") { record_one_step<table_1f1b, stages_3>(); }
TEST_CASE("record_steps: ZB-V on 2 ranks (split backward, V turn)") { record_one_step<table_zb_v, stages_4>(); }

TEST_CASE("record_steps: a failed step leaves the failing task without an end") {
  struct throwing : test::dense<test::batch, test::hidden, test::hidden> {
    void forward(const input_type&, output_type&) const { throw std::runtime_error("injected"); }
  };
  using net = ctpipe::model<test::dense<test::batch, test::features, test::hidden>, throwing,
                            test::dense<test::batch, test::hidden, test::classes, test::activation::none>>;
  constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
  constexpr auto stages = ctpipe::partition<net, 2>();
  net model;
  test::loss l;
  const auto d = test::make_data(2);
  ctpipe::host_executor<table, net, stages, test::loss> exec(model, l);
  exec.record_steps(true);
  CHECK_THROWS_AS(exec.step(d.inputs, d.targets), ctpipe::task_failure);
  int unfinished = 0;
  for (const auto& row : exec.recorded_step().ranks)
    for (const auto& x : row) unfinished += !x.ran();
  CHECK(unfinished > 0);
}
