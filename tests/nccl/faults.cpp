// The NCCL executor's faults, on the simulator and the NCCL stand-in: a layer that throws in one
// process ends the step on every process with an error naming the failed rank, stage, microbatch
// and op (the failed one runs the rest of its step hollow, so that no other waits forever), and the
// next step is right; a process that never runs its step makes the others give up after
// options::timeout; a bad launch is refused at construction. The forward-only pass (evaluate,
// predict) ends the same ways, and refuses to start while a step is in flight.
#include "support/nccl_numerics.hpp"

#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

int fail_microbatch = -1;  // the forward of this microbatch throws (at issue, as a layer's check would)

struct throwing_dense : test::device::sim_dense<test::batch, test::hidden, test::hidden> {
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    if (c.microbatch == fail_microbatch) throw std::runtime_error("injected fault");
    sim_dense::forward(c, x, y);
  }
};
using test::batch, test::features, test::hidden, test::classes;
using test::device::sim_dense;
using faulty_mlp = ctpipe::model<sim_dense<batch, features, hidden>, sim_dense<batch, hidden, hidden>,
                                 sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, hidden>, throwing_dense,
                                 sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, hidden>,
                                 sim_dense<batch, hidden, classes, ctpipe::layers::activation::none>>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using exec_t = test::nccl::sim_executor<table, faulty_mlp>;
static_assert(ctpipe::partition<faulty_mlp, 2>().stage_of_layer(4) == 1, "the throwing layer is stage 1's (rank 1)");
// The executor's tensor types, from the process-mode core it derives from.
static_assert(std::is_same_v<exec_t::input_type, faulty_mlp::input_type> &&
              std::is_same_v<exec_t::output_type, faulty_mlp::output_type> &&
              std::is_same_v<exec_t::target_type, test::device::sim_loss::target_type>);

// A graph model that throws in its last stage (rank 2 of 3): layer 3 adds layer 2's output to
// layer 0's, a skip message from rank 0 to rank 2, so the failed process's hollow step keeps the
// skip FIFOs' bookkeeping too.
using faulty_graph = ctpipe::model<sim_dense<batch, features, hidden>, sim_dense<batch, hidden, hidden>, throwing_dense,
                                   ctpipe::node<test::device::sim_add<batch, hidden>, ctpipe::back<1>, ctpipe::back<3>>,
                                   sim_dense<batch, hidden, classes, ctpipe::layers::activation::none>>;
constexpr auto graph_stages = ctpipe::stage_bounds<faulty_graph, 0, 1, 2, 5>();
constexpr auto graph_table =
    ctpipe::make_table<ctpipe::one_f_one_b(3, 6), ctpipe::model_crossings<faulty_graph, graph_stages>()>();
static_assert(graph_table.crossings.size() == 1 && graph_table.crossings[0].from == 0 &&
              graph_table.crossings[0].to == 2);
using graph_exec_t = test::nccl::sim_executor<graph_table, faulty_graph, ctpipe::dispatch::automatic, graph_stages>;

// A job of N processes of Exec (one rank each), every process with its model copy and data.
template <class Exec, class Model, int N>
struct job_of {
  std::vector<sim::nccl::handle*> world;
  std::vector<Model> models;
  std::vector<test::device::sim_loss> losses{N};
  std::vector<std::unique_ptr<test::device::device_data>> data;
  std::vector<std::unique_ptr<Exec>> exec;
  explicit job_of(const test::data_set& d, ctpipe::nccl::options o = {}) {
    world = sim::nccl::make_world(N);
    for (int q = 0; q < N; ++q) {
      models.push_back(test::device::make_mlp<Model>());
      data.push_back(std::make_unique<test::device::device_data>(d, q, q));
    }
    for (int q = 0; q < N; ++q)
      exec.push_back(
          std::make_unique<Exec>(models[static_cast<std::size_t>(q)], losses[static_cast<std::size_t>(q)],
                                 ctpipe::nccl::job<sim::nccl::net>{world[static_cast<std::size_t>(q)], q, N, q}, o));
  }
  void enqueue(int q, ctpipe::cuda::launch how) {
    exec[static_cast<std::size_t>(q)]->enqueue(data[static_cast<std::size_t>(q)]->inputs,
                                               data[static_cast<std::size_t>(q)]->targets, how);
  }
};
using job_of_two = job_of<exec_t, faulty_mlp, 2>;

// An executor whose communicators were aborted is left behind, never destroyed (as after any abort:
// its buffers may still be in use by work that will never end). It stays reachable from here, so
// that LeakSanitizer does not count it as a leak.
template <class T>
void abandon(std::unique_ptr<T>& p) {
  static auto* const left_behind = new std::vector<const void*>;
  left_behind->push_back(p.release());
}

}  // namespace

TEST_CASE(
    "nccl executor (simulated): a layer that throws ends the step on every process, naming it, the next is right") {
  for (auto how : {ctpipe::cuda::launch::eager, ctpipe::cuda::launch::graph}) {
    CAPTURE(static_cast<int>(how));
    sim::world::get().reset(5, 2);
    sim::nccl::state::get().reset();
    const test::data_set d = test::make_data(4);
    {
      job_of_two j(d);
      fail_microbatch = 2;
      j.enqueue(0, how);
      j.enqueue(1, how);
      // Process 1 (rank 1) ran stage 1's F of microbatch 2: its own task_failure.
      try {
        j.exec[1]->wait();
        FAIL("process 1's step should have failed");
      } catch (const ctpipe::peer_failure&) {
        FAIL("process 1 failed itself: task_failure, not peer_failure");
      } catch (const ctpipe::task_failure& e) {
        CHECK(e.rank() == 1);
        CHECK(e.stage() == 1);
        CHECK(e.microbatch() == 2);
        CHECK(e.op() == ctpipe::op_kind::forward);
        CHECK(std::string(e.what()).find("injected fault") != std::string::npos);
        CHECK(std::string(e.what()).find("ctpipe::nccl::executor: rank 1") == 0);
      }
      // Process 0 learns of it at the end of its step, within the step.
      try {
        j.exec[0]->wait();
        FAIL("process 0's step should have failed");
      } catch (const ctpipe::peer_failure& e) {
        CHECK(e.process() == 1);
        CHECK(e.rank() == 1);
        CHECK(e.replica() == 0);
        CHECK(e.stage() == 1);
        CHECK(e.microbatch() == 2);
        CHECK(e.op() == ctpipe::op_kind::forward);
      }
      // The next step is right (the failed one changed no parameter).
      fail_microbatch = -1;
      test::mlp seq = test::make_mlp();
      test::loss l;
      const std::vector<double> want = test::reference_step(seq, l, d, 1, 4);
      j.enqueue(0, how);
      j.enqueue(1, how);
      for (int q = 0; q < 2; ++q) {
        const auto got = j.exec[static_cast<std::size_t>(q)]->wait();
        CHECK(std::vector<double>(got.begin(), got.end()) == want);
        CHECK(test::bitwise_equal(
            test::rank_values<exec_t::stages, exec_t::plan.table>(seq, q, true),
            test::rank_values<exec_t::stages, exec_t::plan.table>(j.models[static_cast<std::size_t>(q)], q, true)));
      }
      if (how == ctpipe::cuda::launch::graph) CHECK(j.exec[0]->graph_captures() == 1);
    }
    CHECK(sim::nccl::state::get().violations.empty());
    CHECK(sim::world::get().live_allocations == 0);
  }
}

TEST_CASE("nccl executor (simulated): a graph model's layer that throws (a skip FIFO's end) ends the step everywhere") {
  for (auto how : {ctpipe::cuda::launch::eager, ctpipe::cuda::launch::graph}) {
    CAPTURE(static_cast<int>(how));
    sim::world::get().reset(7, 3);
    sim::nccl::state::get().reset();
    const test::data_set d = test::make_data(6);
    {
      job_of<graph_exec_t, faulty_graph, 3> j(d);
      fail_microbatch = 2;
      for (int q = 0; q < 3; ++q) j.enqueue(q, how);
      try {
        j.exec[2]->wait();
        FAIL("process 2's step should have failed");
      } catch (const ctpipe::peer_failure&) {
        FAIL("process 2 failed itself: task_failure, not peer_failure");
      } catch (const ctpipe::task_failure& e) {
        CHECK(e.rank() == 2);
        CHECK(e.stage() == 2);
        CHECK(e.microbatch() == 2);
        CHECK(e.op() == ctpipe::op_kind::forward);
      }
      for (int q = 0; q < 2; ++q) {
        CAPTURE(q);
        CHECK_THROWS_AS(j.exec[static_cast<std::size_t>(q)]->wait(), ctpipe::peer_failure);
      }
      // The next step is right on every process.
      fail_microbatch = -1;
      using host_graph =
          ctpipe::model<test::dense<batch, features, hidden>, test::dense<batch, hidden, hidden>,
                        test::dense<batch, hidden, hidden>,
                        ctpipe::node<ctpipe::layers::add<batch, hidden>, ctpipe::back<1>, ctpipe::back<3>>,
                        test::dense<batch, hidden, classes, ctpipe::layers::activation::none>>;
      host_graph seq = test::make_mlp<host_graph>();
      test::loss l;
      const std::vector<double> want = test::reference_step(seq, l, d, 1, 6);
      for (int q = 0; q < 3; ++q) j.enqueue(q, how);
      for (int q = 0; q < 3; ++q) {
        CAPTURE(q);
        const auto got = j.exec[static_cast<std::size_t>(q)]->wait();
        CHECK(std::vector<double>(got.begin(), got.end()) == want);
        CHECK(test::bitwise_equal(
            test::rank_values<graph_stages, graph_exec_t::plan.table>(seq, q, true),
            test::rank_values<graph_stages, graph_exec_t::plan.table>(j.models[static_cast<std::size_t>(q)], q, true)));
      }
    }
    INFO((sim::nccl::state::get().violations.empty() ? std::string() : sim::nccl::state::get().violations[0]));
    CHECK(sim::nccl::state::get().violations.empty());
    CHECK(sim::world::get().live_allocations == 0);
  }
}

TEST_CASE("nccl executor (simulated): a process that never runs its step: the other gives up after options::timeout") {
  sim::world::get().reset(6, 2);
  sim::nccl::state::get().reset();
  const test::data_set d = test::make_data(4);
  job_of_two j(d, ctpipe::nccl::options{std::chrono::milliseconds(100)});
  j.enqueue(0, ctpipe::cuda::launch::eager);  // process 1 is dead: it never enqueues
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(j.exec[0]->wait(), doctest::Contains("did not end within 100 ms"), ctpipe::nccl::timeout_error);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("gave up after " << seconds << " s (timeout 0.1 s)");
  CHECK(seconds < 5.0);
  CHECK(sim::nccl::state::get().aborted >= 2);  // its FIFOs' communicators
  CHECK_THROWS_WITH_AS(j.enqueue(0, ctpipe::cuda::launch::eager), doctest::Contains("timed out"), std::logic_error);
  // (Its buffers and the dead process's are left behind, as after an abort they must be.)
  abandon(j.exec[0]);
  abandon(j.exec[1]);
}

TEST_CASE(
    "nccl executor (simulated): evaluate is refused during a step, and a throwing layer or a dead peer ends it everywhere") {
  using ctpipe::cuda::launch;
  sim::world::get().reset(8, 2);
  sim::nccl::state::get().reset();
  const test::data_set d = test::make_data(4);
  {
    job_of_two j(d);
    j.enqueue(0, launch::eager);
    j.enqueue(1, launch::eager);
    CHECK_THROWS_WITH_AS(j.exec[0]->evaluate(j.data[0]->inputs, j.data[0]->targets),
                         doctest::Contains("a step is in flight: wait() for it"), std::logic_error);
    for (int q = 0; q < 2; ++q) j.exec[static_cast<std::size_t>(q)]->wait();
    // Both processes evaluate at once (it is collective), each on a thread of its own.
    std::vector<std::vector<double>> got(2);
    std::vector<std::exception_ptr> errors(2);
    const auto evaluate_everywhere = [&] {
      std::vector<std::jthread> threads;
      for (std::size_t q = 0; q < 2; ++q)
        threads.emplace_back([&, q] {
          try {
            const auto r = j.exec[q]->evaluate(j.data[q]->inputs, j.data[q]->targets);
            got[q].assign(r.begin(), r.end());
            errors[q] = nullptr;
          } catch (...) {
            errors[q] = std::current_exception();
          }
        });
    };
    fail_microbatch = 1;  // stage 1's F of microbatch 1 throws: on process 1
    evaluate_everywhere();
    REQUIRE(errors[1]);
    try {
      std::rethrow_exception(errors[1]);
    } catch (const ctpipe::task_failure& e) {
      CHECK(e.rank() == 1);
      CHECK(e.stage() == 1);
      CHECK(e.microbatch() == 1);
      CHECK(e.op() == ctpipe::op_kind::forward);
    }
    REQUIRE(errors[0]);
    CHECK_THROWS_AS(std::rethrow_exception(errors[0]), ctpipe::peer_failure);
    // The next pass is right (the step above changed no parameter: no update followed it).
    fail_microbatch = -1;
    evaluate_everywhere();
    test::mlp seq = test::make_mlp();
    test::loss l;
    std::vector<double> want(4);
    ctpipe::sequential_evaluate(seq, l, std::span<const test::mlp::input_type>(d.inputs),
                                std::span<const test::target>(d.targets), {}, std::span<double>(want), {1, 0});
    for (std::size_t q = 0; q < 2; ++q) {
      CAPTURE(q);
      REQUIRE_FALSE(errors[q]);
      CHECK(got[q] == want);
    }
  }
  CHECK(sim::nccl::state::get().violations.empty());
  CHECK(sim::world::get().live_allocations == 0);
  // A process that never evaluates: the other gives up after options::timeout, and the training
  // step's communicators, which the pass ran on, are aborted with it.
  sim::world::get().reset(9, 2);
  sim::nccl::state::get().reset();
  job_of_two j(d, ctpipe::nccl::options{std::chrono::milliseconds(100)});
  CHECK_THROWS_WITH_AS(j.exec[0]->evaluate(j.data[0]->inputs, j.data[0]->targets),
                       doctest::Contains("did not end within 100 ms"), ctpipe::nccl::timeout_error);
  CHECK(sim::nccl::state::get().aborted >= 2);
  CHECK_THROWS_WITH_AS(j.enqueue(0, launch::eager), doctest::Contains("timed out"), std::logic_error);
  abandon(j.exec[0]);  // (left behind, as after any abort)
  abandon(j.exec[1]);
}

TEST_CASE("nccl executor (simulated): a bad launch is refused by every process at construction") {
  sim::world::get().reset(1, 3);
  sim::nccl::state::get().reset();
  const auto world = sim::nccl::make_world(3);
  faulty_mlp m = test::device::make_mlp<faulty_mlp>();
  test::device::sim_loss l;
  CHECK_THROWS_WITH_AS(exec_t(m, l, ctpipe::nccl::job<sim::nccl::net>{world[0], 0, 3, 0}),
                       doctest::Contains("launched as 3 processes, but the table has 2 ranks"),
                       ctpipe::nccl::launch_error);
  CHECK_THROWS_WITH_AS(
      exec_t(m, l, ctpipe::nccl::job<sim::nccl::net>{world[0], 0, 2, 0}, {std::chrono::milliseconds(0)}),
      doctest::Contains("options::timeout must be positive"), ctpipe::nccl::launch_error);
}
