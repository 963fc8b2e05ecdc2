// Faults across processes: a layer that throws in one process ends the step on every process with
// an error naming the failed rank; a peer that hangs ends it with timeout_error within the deadline;
// a bad launch is refused by every process at construction.
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/mpi.hpp>

#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "mpi_numerics.hpp"
#include "support/mlp.hpp"

namespace {

using ctpipe::layers::dense;
using test::batch;
using test::hidden;

// A dense layer that, while armed in this process, throws (or sleeps) on its n-th forward call.
struct fault_plan {
  bool armed = false;
  int countdown = 0;
  int sleep_ms = 0;  // 0: throw
};
inline fault_plan fault;

struct faulty : dense<batch, hidden, hidden> {
  void forward(const input_type& x, output_type& y) const {
    if (fault.armed && fault.countdown-- == 0) {
      fault.armed = false;
      if (fault.sleep_ms == 0) throw std::runtime_error("injected fault");
      std::this_thread::sleep_for(std::chrono::milliseconds(fault.sleep_ms));
    }
    dense<batch, hidden, hidden>::forward(x, y);
  }
};

using net =
    ctpipe::model<dense<batch, test::features, hidden>, dense<batch, hidden, hidden>, dense<batch, hidden, hidden>,
                  dense<batch, hidden, hidden>, faulty, dense<batch, hidden, hidden>, dense<batch, hidden, hidden>,
                  dense<batch, hidden, test::classes, ctpipe::layers::activation::none>>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
constexpr auto stages = ctpipe::partition<net, 2>();
static_assert(stages.first[1] <= 4, "the faulty layer (4) is on rank 1");

int process() {
  int p = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &p);
  return p;
}

net make_net() {
  net m;
  std::uint64_t k = 1;
  ctpipe::for_each_layer(m, [&](auto& l) { l.init(k++); });
  return m;
}

}  // namespace

TEST_SUITE("np2") {
  TEST_CASE("mpi executor: a layer that throws in process 1 ends the step on both, naming rank 1") {
    net model = make_net(), reference = make_net();
    test::loss l;
    ctpipe::mpi::executor<table, net, stages, test::loss> exec(model, l, MPI_COMM_WORLD,
                                                               {.timeout = std::chrono::seconds(60)});
    const test::data_set d = test::make_data(test::microbatches);
    fault = {process() == 1, 2, 0};  // rank 1's third forward: microbatch 2 (1F1B runs them in order)
    std::string message;
    try {
      exec.step(d.inputs, d.targets);
      FAIL("the step did not fail");
    } catch (const ctpipe::mpi::peer_failure& e) {
      CHECK(process() == 0);
      CHECK(e.process() == 1);
      CHECK(e.rank() == 1);
      CHECK(e.replica() == 0);
      CHECK(e.stage() == 1);
      CHECK(e.microbatch() == 2);
      CHECK(e.op() == ctpipe::op_kind::forward);
      message = e.what();
    } catch (const ctpipe::task_failure& e) {
      CHECK(process() == 1);
      CHECK(e.rank() == 1);
      CHECK(e.stage() == 1);
      CHECK(e.microbatch() == 2);
      message = e.what();
    }
    CHECK(message == "ctpipe::mpi::executor: rank 1, replica 0, stage 1, microbatch 2, op F failed: injected fault");
    // The executor stays usable: the next step is bitwise equal to sequential training.
    fault = {};
    std::vector<double> ref(d.inputs.size());
    ctpipe::sequential_step(reference, l, std::span<const test::input>(d.inputs),
                            std::span<const test::target>(d.targets), std::span<double>(ref));
    const auto got = exec.step(d.inputs, d.targets);
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(got[i] == ref[i]);
    CHECK(test::bitwise_equal(test::rank_values<stages, table>(reference, exec.rank(), true),
                              test::rank_values<stages, table>(model, exec.rank(), true)));
    // The same in a forward-only pass: evaluate() fails on both processes with the same words, and
    // the next pass is the sequential forward's.
    fault = {process() == 1, 2, 0};
    std::string forward_message;
    try {
      exec.evaluate(d.inputs, d.targets);
      FAIL("the forward pass did not fail");
    } catch (const ctpipe::mpi::peer_failure& e) {
      CHECK(process() == 0);
      forward_message = e.what();
    } catch (const ctpipe::task_failure& e) {
      CHECK(process() == 1);
      forward_message = e.what();
    }
    CHECK(forward_message == message);
    fault = {};
    ctpipe::sequential_evaluate(reference, l, std::span<const test::input>(d.inputs),
                                std::span<const test::target>(d.targets), std::span<double>(ref));
    const auto evaluated = exec.evaluate(d.inputs, d.targets);
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(evaluated[i] == ref[i]);
  }

  TEST_CASE("mpi executor: a target that is not a class ends the step on both, naming rank, microbatch and sample") {
    net model = make_net(), reference = make_net();
    test::loss l;
    ctpipe::mpi::executor<table, net, stages, test::loss> exec(model, l, MPI_COMM_WORLD,
                                                               {.timeout = std::chrono::seconds(60)});
    test::data_set d = test::make_data(test::microbatches);
    const test::data_set good = d;
    d.targets[5][1] = 9;
    const auto before = test::rank_values<stages, table>(model, exec.rank(), false);
    const std::string expected =
        "ctpipe::mpi::executor: rank 1, replica 0, stage 1, microbatch 5, op B failed: "
        "ctpipe::layers::softmax_cross_entropy: microbatch 5, sample 1: target 9 is not a class (0 to 3)";
    std::string message;
    try {
      exec.step(d.inputs, d.targets);
      FAIL("the step did not fail");
    } catch (const ctpipe::mpi::peer_failure& e) {
      CHECK(process() == 0);
      message = e.what();
    } catch (const ctpipe::task_failure& e) {
      CHECK(process() == 1);
      CHECK_THROWS_AS(std::rethrow_exception(e.cause()), std::out_of_range);
      message = e.what();
    }
    CHECK(message == expected);
    CHECK(test::bitwise_equal(test::rank_values<stages, table>(model, exec.rank(), false), before));  // no update
    // The next step, with good targets, is bitwise equal to sequential training.
    std::vector<double> ref(good.inputs.size());
    ctpipe::sequential_step(reference, l, std::span<const test::input>(good.inputs),
                            std::span<const test::target>(good.targets), std::span<double>(ref));
    const auto got = exec.step(good.inputs, good.targets);
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(got[i] == ref[i]);
  }

  TEST_CASE("mpi executor: a peer that hangs ends the step with timeout_error within the deadline") {
    net model = make_net();
    test::loss l;
    const auto deadline = std::chrono::milliseconds(1000);
    ctpipe::mpi::executor<table, net, stages, test::loss> exec(model, l, MPI_COMM_WORLD, {.timeout = deadline});
    const test::data_set d = test::make_data(test::microbatches);
    fault = {process() == 1, 2, 3000};  // rank 1 sleeps 3 s in a forward
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(exec.step(d.inputs, d.targets), ctpipe::mpi::timeout_error);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("process %d: timeout_error after %.2f s (deadline %.2f s)\n", process(), waited,
                static_cast<double>(deadline.count()) / 1000.0);
    CHECK_THROWS_AS(exec.step(d.inputs, d.targets), std::logic_error);  // it refuses further steps
    fault = {};
  }

  TEST_CASE("mpi executor: launched with too few processes for the table, every process refuses") {
    constexpr auto three = ctpipe::make_table<ctpipe::one_f_one_b(3, test::microbatches)>();
    test::mlp m = test::make_mlp();
    test::loss l;
    using exec_t = ctpipe::mpi::executor<three, test::mlp, ctpipe::partition<test::mlp, 3>(), test::loss>;
    CHECK_THROWS_WITH_AS(exec_t(m, l), doctest::Contains("launched as 2 processes, but the table has 3 ranks"),
                         ctpipe::mpi::launch_error);
    using two_t = ctpipe::mpi::executor<table, net, stages, test::loss>;
    net n = make_net();
    CHECK_THROWS_WITH_AS(two_t(n, l, MPI_COMM_WORLD, {.replicas = 2}),
                         doctest::Contains("options::replicas is 2: start 4"), ctpipe::mpi::launch_error);
  }

  TEST_CASE("mpi executor: a process started with another table is refused by every process") {
    test::mlp m = test::make_mlp();
    test::loss l;
    constexpr auto gpipe = ctpipe::make_table<ctpipe::gpipe(2, test::microbatches)>();
    constexpr auto one = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
    constexpr auto stages2 = ctpipe::partition<test::mlp, 2>();
    const auto make = [&] {
      if (process() == 1)
        ctpipe::mpi::executor<gpipe, test::mlp, stages2, test::loss> e(m, l);
      else
        ctpipe::mpi::executor<one, test::mlp, stages2, test::loss> e(m, l);
    };
    CHECK_THROWS_WITH_AS(make(), doctest::Contains("process(es) 1 run another table"), ctpipe::mpi::launch_error);
  }
}
