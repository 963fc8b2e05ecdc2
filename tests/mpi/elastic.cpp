// Elastic freezing over MPI (4 processes): through 4 x 1 -> 2 x 2 -> 1 x 4, the parameters move to
// their new owners as messages; every step's losses and, after synchronize(), every parameter on
// every process equal the sequential reference's, bitwise. A communicator of another size is
// refused on every process with a clear error.
#include <ctpipe/mpi.hpp>
#include <ctpipe/mpi/elastic.hpp>

#include <doctest/doctest.h>
#include <mpi.h>

#include <array>
#include <string>
#include <type_traits>
#include <vector>

#include "support/elastic_reference.hpp"
#include "support/numerics.hpp"  // bitwise_equal
#include "support/recording.hpp"

namespace {
using plan = ctpipe::elastic_plan<test::mlp, 4, 4, 8, std::array{0, 4, 6}, true>;
using trainer = ctpipe::mpi::elastic_trainer<plan, test::loss, ctpipe::sgd>;
// The MLP with state-saving layers and dropout (layer 5, in the frozen prefix after the second
// freeze, which then runs it every step with that step's mask).
using stateful_plan = ctpipe::elastic_plan<test::stateful_mlp, 4, 4, 8, std::array{0, 4, 6}, true>;

// Every step recorded (record_steps, the first plan's run): on process 0, each replica's pipeline
// as its point's table ran it, within the clocks' stated error.
template <class Plan, std::size_t I, class Trainer>
void check_recorded(const Trainer& train) {
  constexpr ctpipe::elastic_point pt = Plan::points[I];
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(pt.ranks, pt.microbatches)>();
  int process = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  if (process != 0) {
    CHECK(train.recorded_step(0).ranks.empty());
    return;
  }
  for (int r = 0; r < pt.replicas; ++r)
    test::check_record(table, train.recorded_step(r), train.recorded_alignment_error());
  CHECK(train.recorded_comparison(0).replayed > 0.0);
  CHECK(train.recorded_trace().find("traceEvents") != std::string::npos);
}

// Nine steps, freezing 4 layers after step 3 and 6 after step 6: every step's losses on every
// process, and at the end every parameter, the sequential reference's.
template <class Plan>
void through_freezes() {
  using model_t = typename Plan::model_t;
  const auto d = test::make_data(24);
  model_t model = test::make_mlp<model_t>();
  test::loss l;
  ctpipe::optimizer opt(model, test::elastic_rule);
  ctpipe::mpi::elastic_trainer<Plan, test::loss, decltype(opt)> train(model, l, opt);
  test::elastic_reference<model_t> ref;
  constexpr bool record = std::is_same_v<Plan, plan>;
  if constexpr (record) train.record_steps(true);
  for (int k = 0; k < 9; ++k) {
    if (k == 3) train.freeze(4);
    if (k == 6) train.freeze(6);
    CAPTURE(k);
    const auto at = static_cast<std::size_t>((k % 3) * 8);
    const auto losses =
        train.step(std::span<const test::input>(&d.inputs[at], 8), std::span<const test::target>(&d.targets[at], 8));
    const auto expected = ref.step(d, at, train.point());
    REQUIRE(std::vector<double>(losses.begin(), losses.end()) == expected);
    if constexpr (record) {
      if (train.point_index() == 0) check_recorded<Plan, 0>(train);
      if (train.point_index() == 1) check_recorded<Plan, 1>(train);
      if (train.point_index() == 2) check_recorded<Plan, 2>(train);
    }
  }
  CHECK(train.point().replicas == 4);
  train.synchronize();
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(ref.model)));
  // Forward only: every replica's losses and outputs on every process, the sequential forward's.
  CHECK(test::forward_matches(train, ref, d));
  if constexpr (std::is_same_v<Plan, plan>)  // the policies see the same norms on every process: a
    CHECK(train.end_epoch(ctpipe::geometric_freezing{0.1}) == 6);  // geometric policy moves no further
}
}  // namespace

TEST_SUITE("np4") {
  TEST_CASE("mpi elastic trainer: through two freezes and re-partitions, bitwise equal to the sequential reference") {
    through_freezes<plan>();
  }
  TEST_CASE(
      "mpi elastic trainer: saved state and dropout through the freezes, bitwise (global microbatches, steps "
      "counted across re-partitions)") {
    through_freezes<stateful_plan>();
  }

  TEST_CASE("mpi elastic trainer: a communicator of another size than the plan's devices is refused") {
    int world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm half = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world / 2, world, &half);
    test::mlp model = test::make_mlp();
    test::loss l;
    ctpipe::sgd opt{0.02};
    try {
      trainer train(model, l, opt, half);
      FAIL("a 2-process communicator was taken");
    } catch (const ctpipe::mpi::launch_error& e) {
      CHECK(std::string(e.what()) ==
            "ctpipe::mpi::elastic_trainer: the elastic plan runs on 4 processes (its devices), but the communicator "
            "has 2: its pipelines and replicas cannot be formed on another process count");
    }
    MPI_Comm_free(&half);
  }
}
