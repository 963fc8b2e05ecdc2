// The simulated CUDA executor: its plan at compile time, graph capture and re-capture, NVTX labels,
// copies per step, and every error path (a failing CUDA call, a throwing layer, an asynchronous
// error, a capture a layer breaks, a bad placement, a wrong number of microbatches).
#include "support/recording.hpp"
#include "support/sim_numerics.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

namespace {

using namespace test::device;
using ctpipe::cuda::handoff;
using ctpipe::cuda::launch;

// ---- the plan, at compile time ------------------------------------------------------------------
constexpr auto t1f1b = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using one_device = sim_executor<t1f1b, 0>;
using two_devices = sim_executor<t1f1b, ctpipe::cuda::device_per_rank<2>()>;
// One device: the activation is read in place (a pointer), the gradient written straight into
// the consumer's ring; two devices: both through rings filled by peer copies.
static_assert(one_device::issue.forward[0] == handoff::pointer &&
              one_device::issue.backward[0] == handoff::ring_direct);
static_assert(two_devices::issue.forward[0] == handoff::ring_copy &&
              two_devices::issue.backward[0] == handoff::ring_copy);
static_assert(!one_device::issue.multi_device && two_devices::issue.multi_device);
// Events: a record per message and direction (4 + 4), a "consumed" event per ring slot written
// again, a fork and a join per rank. On one device nothing is copied forwards: no consumed events.
static_assert(one_device::issue.capacity[0] == 2);  // 1F1B p=2: two messages in flight at most
static_assert(one_device::issue.events == 4 + 4 + 2 + 1 + 2);
static_assert(two_devices::issue.events == 4 + 2 + 4 + 2 + 1 + 2);
// The global order is a topological order: every receive comes after its send.
constexpr bool receives_after_sends(const auto& ip, const auto& table) {
  for (std::size_t i = 0; i < ip.order.size(); ++i) {
    const auto& t =
        table.programs[static_cast<std::size_t>(ip.order[i].rank)][static_cast<std::size_t>(ip.order[i].index)];
    if (t.op != ctpipe::op_kind::recv_forward && t.op != ctpipe::op_kind::recv_backward) continue;
    const auto send =
        t.op == ctpipe::op_kind::recv_forward ? ctpipe::op_kind::send_forward : ctpipe::op_kind::send_backward;
    const int from = t.op == ctpipe::op_kind::recv_forward ? t.stage - 1 : t.stage + 1;
    bool found = false;
    for (std::size_t j = 0; j < i && !found; ++j) {
      const auto& u =
          table.programs[static_cast<std::size_t>(ip.order[j].rank)][static_cast<std::size_t>(ip.order[j].index)];
      found = u.op == send && u.stage == from && u.microbatch == t.microbatch;
    }
    if (!found) return false;
  }
  return true;
}
static_assert(receives_after_sends(one_device::issue, one_device::plan.table));
static_assert(receives_after_sends(two_devices::issue, two_devices::plan.table));
static_assert(one_device::issue.order.size() == static_cast<std::size_t>(one_device::plan.table.size()));
// Memory: per device, one allocation; a ring on device 1 appears only with two devices.
static_assert(one_device::device_bytes().size() == 1 && two_devices::device_bytes().size() == 2);
static_assert(two_devices::layout.memory.ring_forward_base[0] > 0 || two_devices::layout.memory.bytes[1] > 0);
// dispatch::automatic: unrolled up to 256 tasks, a walk beyond.
static_assert(ctpipe::cuda::automatic_unroll_limit == 256);
static_assert(one_device::dispatch_strategy == ctpipe::dispatch::unrolled);
using long_table = sim_executor<ctpipe::make_table<ctpipe::one_f_one_b(2, 33)>(), 0>;  // 264 tasks
static_assert(long_table::task_count == 264 && long_table::dispatch_strategy == ctpipe::dispatch::table_walk);
// NVTX labels.
static_assert(ctpipe::cuda::detail::make_label({ctpipe::op_kind::forward, 3, 5, -1}).text[0] == 'F');
constexpr auto label_of = [](ctpipe::task t) { return std::string(ctpipe::cuda::detail::make_label(t).text.data()); };

struct fixture {
  test::data_set d = test::make_data(4);
  fixture(int devices = 1) { sim::world::get().reset(5, devices); }
};

}  // namespace

TEST_CASE("cuda executor (simulated): NVTX labels name op, stage and microbatch") {
  CHECK(label_of({ctpipe::op_kind::forward, 3, 5, -1}) == "F s3 mb5");
  CHECK(label_of({ctpipe::op_kind::send_backward, 12, 107, 0}) == "SEND_B s12 mb107");
  fixture f;
  sim::world::get().record_ranges = true;
  mlp m = make_mlp();
  sim_loss l;
  device_data dd(f.d);
  one_device exec(m, l);
  exec.step(dd.inputs, dd.targets);
  const auto& r = sim::world::get().ranges;
  CHECK(r.size() == one_device::task_count);
  CHECK(std::count(r.begin(), r.end(), "F s0 mb0") == 1);
  CHECK(std::count(r.begin(), r.end(), "B s1 mb3") == 1);
}

TEST_CASE("cuda executor (simulated): one device copies nothing but the losses, two devices copy each message once") {
  for (int devices : {1, 2}) {
    fixture f(devices);
    mlp m = make_mlp();
    sim_loss l;
    device_data dd(f.d, 0, devices - 1);
    if (devices == 1) {
      one_device exec(m, l);
      exec.step(dd.inputs, dd.targets);
      CHECK(sim::world::get().memcpys == 0);  // device-to-device copies (the losses go to the host)
    } else {
      two_devices exec(m, l);
      exec.step(dd.inputs, dd.targets);
      // 4 activations and 4 gradients peer-copied, and each activation out of its ring into the stash.
      CHECK(sim::world::get().memcpys == 4 + 4 + 4);
    }
  }
}

TEST_CASE("cuda executor (simulated): a step allocates nothing, the graph is captured once and replayed") {
  fixture f;
  mlp m = make_mlp();
  sim_loss l;
  device_data dd(f.d);
  one_device exec(m, l);
  const long mallocs = sim::world::get().mallocs;
  const auto eager_span = exec.step(dd.inputs, dd.targets);
  const std::vector<double> eager(eager_span.begin(), eager_span.end());
  const auto eager_grads = test::gradients(m);
  for (int i = 0; i < 3; ++i) {
    const auto losses = exec.step(dd.inputs, dd.targets, launch::graph);
    CHECK(std::equal(losses.begin(), losses.end(), eager.begin(), eager.end()));
    CHECK(test::bitwise_equal(test::gradients(m), eager_grads));
  }
  CHECK(exec.graph_captures() == 1);
  CHECK(sim::world::get().mallocs == mallocs);
}

TEST_CASE("cuda executor (simulated): a graph model's step allocates nothing, and its replays equal its eager step") {
  // The block MLP at p = 4, a device per rank: a residual skips stage 2 (a skip message peer-copied
  // from stage 1's device to stage 3's), and gradient terms are summed on the devices.
  sim::world::get().reset(1, 4);
  using block = test::device::block_mlp;
  constexpr auto sched = ctpipe::one_f_one_b(4, 8);
  constexpr auto stages = test::device::sweep_stages<sched, block>();
  constexpr auto table = test::device::sweep_table<sched, block>();
  static_assert(table.crossings.size() == 1 && table.crossings[0].from == 1 && table.crossings[0].to == 3);
  using exec_t = sim_executor<table, ctpipe::cuda::device_per_rank<4>(), ctpipe::dispatch::table_walk, block, stages>;
  static_assert(exec_t::issue.skip_forward[0] == ctpipe::cuda::handoff::ring_copy &&
                exec_t::issue.skip_backward[0] == ctpipe::cuda::handoff::ring_copy);
  block m = make_mlp<block>();
  sim_loss l;
  const test::data_set d = test::make_data(exec_t::microbatches);
  device_data dd(d, 0, 3);
  exec_t exec(m, l);
  const long mallocs = sim::world::get().mallocs;
  const auto eager_span = exec.step(dd.inputs, dd.targets);
  const std::vector<double> eager(eager_span.begin(), eager_span.end());
  const auto eager_grads = test::gradients(m);
  CHECK(sim::world::get().adds > 0);
  for (int i = 0; i < 2; ++i) {
    exec.set_context_origin({0, 0});  // the eager step's number: its dropout masks
    const auto losses = exec.step(dd.inputs, dd.targets, launch::graph);
    CHECK(std::equal(losses.begin(), losses.end(), eager.begin(), eager.end()));
    CHECK(test::bitwise_equal(test::gradients(m), eager_grads));
  }
  CHECK(exec.graph_captures() == 1);
  CHECK(sim::world::get().mallocs == mallocs);
  CHECK(sim::world::get().wrong_device_work.empty());
}

TEST_CASE("cuda executor (simulated): the graph is captured again when the inputs point elsewhere, or on request") {
  fixture f;
  mlp m = make_mlp();
  sim_loss l;
  device_data a(f.d), b(f.d);  // the same data in two places
  one_device exec(m, l);
  const auto first_span = exec.step(a.inputs, a.targets, launch::graph);
  const std::vector<double> first(first_span.begin(), first_span.end());
  CHECK(exec.graph_captures() == 1);
  const auto second = exec.step(b.inputs, b.targets, launch::graph);
  CHECK(exec.graph_captures() == 2);
  CHECK(std::equal(second.begin(), second.end(), first.begin(), first.end()));
  exec.step(b.inputs, b.targets, launch::graph);
  CHECK(exec.graph_captures() == 2);
  exec.invalidate_graph();
  exec.step(b.inputs, b.targets, launch::graph);
  CHECK(exec.graph_captures() == 3);
}

TEST_CASE("cuda executor (simulated): a failing CUDA call names the call, rank, stage, microbatch and op") {
  fixture f(2);
  mlp m = make_mlp();
  sim_loss l;
  device_data dd(f.d, 0, 1);
  two_devices exec(m, l);
  // The first device-to-device copy of a step (after the step's number goes to each device's
  // memory: two host-to-device copies): rank 0 sends microbatch 0's activation to device 1.
  sim::world::get().fail = sim::call::memcpy;
  sim::world::get().countdown = 3;
  try {
    exec.step(dd.inputs, dd.targets);
    FAIL("no error");
  } catch (const ctpipe::cuda::error& e) {
    CHECK(
        std::string(e.what()) ==
        "ctpipe::cuda::executor: cudaMemcpyPeerAsync failed at rank 0, stage 0, microbatch 0, op SEND_F: sim: injected failure");
    CHECK(e.rank() == 0);
    CHECK(e.stage() == 0);
    CHECK(e.microbatch() == 0);
    CHECK(e.op() == ctpipe::op_kind::send_forward);
    CHECK(e.call() == "cudaMemcpyPeerAsync");
  }
  // The executor is usable afterwards, and the next step is right.
  test::mlp seq = test::make_mlp();
  test::loss hl;
  std::vector<double> ref(4);
  ctpipe::sequential_step(seq, hl, std::span<const test::input>(f.d.inputs), std::span<const test::target>(f.d.targets),
                          std::span<double>(ref));
  const auto losses = exec.step(dd.inputs, dd.targets);
  CHECK(std::equal(losses.begin(), losses.end(), ref.begin(), ref.end()));
}

TEST_CASE("cuda executor (simulated): an event wait that fails names its task") {
  fixture f;
  mlp m = make_mlp();
  sim_loss l;
  device_data dd(f.d);
  one_device exec(m, l);
  sim::world::get().fail = sim::call::wait;
  sim::world::get().countdown = 3;  // the fork's two waits, then rank 1's first receive
  CHECK_THROWS_WITH(
      exec.step(dd.inputs, dd.targets),
      "ctpipe::cuda::executor: cudaStreamWaitEvent failed at rank 1, stage 1, microbatch 0, op RECV_F: sim: "
      "injected failure");
}

TEST_CASE("cuda executor (simulated): an asynchronous error surfaces at wait() and says how to name the task") {
  fixture f;
  mlp m = make_mlp();
  sim_loss l;
  device_data dd(f.d);
  one_device exec(m, l);
  exec.enqueue(dd.inputs, dd.targets);
  sim::world::get().fail = sim::call::synchronize;
  sim::world::get().countdown = 1;
  CHECK_THROWS_WITH(exec.wait(),
                    doctest::Contains("cudaStreamSynchronize failed (waiting for the step; an asynchronous "
                                      "error of any task surfaces here: sync_after_each_task(true) names the task)"));
  sim::world::get().countdown = 0;
  exec.wait();
}

namespace {
// A layer of the MLP that throws on one microbatch's forward, or synchronises while captured.
struct faulty_state {
  int throw_on = -1;
  bool synchronise = false;
};
faulty_state faulty;
struct faulty_dense : sim_dense<test::batch, test::hidden, test::hidden> {
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    if (c.microbatch == faulty.throw_on) throw std::runtime_error("layer says no");
    if (faulty.synchronise) (void)sim::backend::synchronize(sim::stream_of(c));
    sim_dense::forward(c, x, y);
  }
};
using faulty_mlp = ctpipe::model<sim_dense<test::batch, test::features, test::hidden>, faulty_dense,
                                 sim_dense<test::batch, test::hidden, test::classes, ctpipe::layers::activation::none>>;
using faulty_exec = ctpipe::cuda::basic_executor<t1f1b, faulty_mlp, ctpipe::stage_bounds<faulty_mlp, 0, 2, 3>(),
                                                 sim_loss, 0, ctpipe::dispatch::automatic, sim::backend>;
}  // namespace

TEST_CASE("cuda executor (simulated): a layer that throws ends the step with task_failure naming the task") {
  fixture f;
  faulty_mlp m;
  sim_loss l;
  device_data dd(f.d);
  faulty_exec exec(m, l);
  faulty.throw_on = 2;
  try {
    exec.step(dd.inputs, dd.targets);
    FAIL("no error");
  } catch (const ctpipe::task_failure& e) {
    CHECK(std::string(e.what()) == "ctpipe::cuda::executor: rank 0, stage 0, microbatch 2, op F failed: layer says no");
    CHECK(e.executor() == "ctpipe::cuda::executor");
  }
  faulty.throw_on = -1;
  CHECK(exec.step(dd.inputs, dd.targets).size() == 4);
}

TEST_CASE("cuda executor (simulated): a layer that synchronises while captured fails the capture with a clear error") {
  fixture f;
  faulty_mlp m;
  sim_loss l;
  device_data dd(f.d);
  faulty_exec exec(m, l);
  faulty.synchronise = true;
  CHECK_THROWS_WITH(
      exec.step(dd.inputs, dd.targets, launch::graph),
      doctest::Contains("cudaStreamEndCapture / cudaGraphInstantiate failed (capturing the step into a graph: "
                        "a layer may have synchronised"));
  faulty.synchronise = false;
  CHECK(exec.graph_captures() == 0);
  CHECK(exec.step(dd.inputs, dd.targets, launch::graph).size() == 4);
  CHECK(exec.graph_captures() == 1);
}

TEST_CASE("cuda executor (simulated): bad run-time input is rejected with the numbers") {
  fixture f(1);
  mlp m = make_mlp();
  sim_loss l;
  CHECK_THROWS_WITH(two_devices(m, l),
                    "ctpipe::cuda::executor: the placement puts rank 1 on device 1, but 1 device(s) are visible");
  CHECK(sim::world::get().live_allocations == 0);  // nothing leaked
  device_data dd(f.d);
  one_device exec(m, l);
  CHECK_THROWS_WITH(exec.step(std::span(dd.inputs).first(3), dd.targets),
                    "ctpipe::cuda::executor::enqueue: inputs (3) and targets (4) must each hold 4 microbatches, as the "
                    "table does");
}

TEST_CASE("cuda executor (simulated): a target that is not a class ends the step with task_failure naming it") {
  fixture f(2);
  mlp m = make_mlp();
  const std::vector<float> before = test::parameters(m);
  sim_loss l;
  device_data dd(f.d, 0, 1);  // the targets on device 1, where the last stage's loss runs
  two_devices exec(m, l);
  dd.targets[3].data[2] = 4;
  try {
    exec.step(dd.inputs, dd.targets);
    FAIL("no error");
  } catch (const ctpipe::task_failure& e) {
    CHECK(std::string(e.what()) ==
          "ctpipe::cuda::executor: rank 1, stage 1, microbatch 3, op B failed: ctpipe::layers::softmax_cross_entropy: "
          "microbatch 3, sample 2: target 4 is not a class (0 to 3)");
    CHECK_THROWS_AS(std::rethrow_exception(e.cause()), std::out_of_range);
  }
  CHECK(test::parameters(m) == before);  // no update
  dd.targets[3].data[2] = f.d.targets[3][2];
  CHECK(exec.step(dd.inputs, dd.targets).size() == 4);
}

TEST_CASE("cuda executor (simulated): sync_after_each_task synchronises once per task, eager steps only") {
  fixture f;
  mlp m = make_mlp();
  sim_loss l;
  device_data dd(f.d);
  one_device exec(m, l);
  exec.sync_after_each_task(true);
  const long before = sim::world::get().syncs;
  exec.step(dd.inputs, dd.targets);
  CHECK(sim::world::get().syncs - before == static_cast<long>(one_device::task_count) + 1);  // + wait()
  const long graph_before = sim::world::get().syncs;
  exec.step(dd.inputs, dd.targets, launch::graph);  // a capture must not synchronise
  CHECK(sim::world::get().syncs - graph_before == 1);
  exec.sync_after_each_task(false);
  const long off = sim::world::get().syncs;
  exec.step(dd.inputs, dd.targets);
  CHECK(sim::world::get().syncs - off == 1);
}

// A layer whose parameters() are another layer's memory (test::borrowed) on the simulated device:
// on two ranks both would write one buffer at once, unsummed; the executor refuses it.
TEST_CASE("cuda executor (simulated): parameters shared by hand between ranks are refused at construction") {
  using borrowing = ctpipe::model<sim_dense<test::batch, test::features, test::hidden>,
                                  sim_dense<test::batch, test::hidden, test::hidden>, sim_of<test::borrowed>,
                                  sim_dense<test::batch, test::hidden, test::classes, test::activation::none>>;
  sim::world& w = sim::world::get();
  w.reset(1, 2);
  borrowing m = make_mlp<borrowing>();
  m.layer<2>().host.w = m.layer<1>().parameters();
  m.layer<2>().host.g = m.layer<1>().gradients();
  sim_loss l;
  constexpr auto stages = ctpipe::stage_bounds<borrowing, 0, 2, 4>();
  using exec_t = ctpipe::cuda::basic_executor<t1f1b, borrowing, stages, sim_loss, ctpipe::cuda::device_per_rank<2>(),
                                              ctpipe::dispatch::automatic, sim::backend>;
  CHECK_THROWS_WITH_AS(exec_t(m, l),
                       doctest::Contains("ctpipe::cuda::executor: layers 1 and 2 (on ranks 0 and 1) hold overlapping "
                                         "parameters() or gradients(): one buffer shared by hand"),
                       std::invalid_argument);
  CHECK(w.live_allocations == 0);  // what construction had made, released
}

TEST_CASE("cuda executor (simulated): a dualpipe mirror that holds the model's memory is refused at construction") {
  using borrowing = ctpipe::model<sim_dense<test::batch, test::features, test::hidden>,
                                  sim_dense<test::batch, test::hidden, test::hidden>, sim_of<test::borrowed>,
                                  sim_dense<test::batch, test::hidden, test::classes, test::activation::none>>;
  sim::world& w = sim::world::get();
  w.reset(1, 2);
  borrowing m = make_mlp<borrowing>(), mirror = make_mlp<borrowing>();
  std::vector<float> w0(8), g0(8), w1(8), g1(8);  // layer 2's buffers: the model's, the mirror's
  m.layer<2>().host.w = w0;
  m.layer<2>().host.g = g0;
  mirror.layer<2>().host.w = w1;
  mirror.layer<2>().host.g = g0;  // (its own parameters, the model's gradients)
  sim_loss l;
  constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
  constexpr auto stages = ctpipe::stage_bounds<borrowing, 0, 2, 4>();
  using exec_t = ctpipe::cuda::basic_executor<table, borrowing, stages, sim_loss, ctpipe::cuda::device_per_rank<2>(),
                                              ctpipe::dispatch::automatic, sim::backend>;
  static_assert(exec_t::mirrored);
  CHECK_THROWS_WITH_AS(exec_t(m, mirror, l),
                       doctest::Contains("ctpipe::cuda::executor: the mirror's layer 2 holds parameters() or "
                                         "gradients() that overlap the model's layer 2's"),
                       std::invalid_argument);
  CHECK(w.live_allocations == 0);  // what construction had made, released
  mirror.layer<2>().host.g = g1;   // memory of its own: accepted
  CHECK_NOTHROW(exec_t(m, mirror, l));
}

TEST_CASE("cuda executor (simulated): record_steps times every task on the devices' clocks, off by default") {
  // One device and two: every task ran once, in its rank's order, each receive ended after its
  // send began; the numbers those of an unrecorded step; a recorded graph step runs eagerly.
  for (int devices : {1, 2}) {
    CAPTURE(devices);
    fixture f(devices);
    mlp m = make_mlp();
    sim_loss l;
    device_data dd(f.d, 0, devices - 1);
    const auto run = [&](auto& exec) {
      using exec_t = std::remove_reference_t<decltype(exec)>;
      CHECK(exec.recorded_step().ranks.empty());
      const auto plain = exec.step(dd.inputs, dd.targets);
      const std::vector<double> expected(plain.begin(), plain.end());
      const auto grads = test::gradients(m);
      const long records = sim::world::get().records;
      exec.step(dd.inputs, dd.targets);
      const long per_step = sim::world::get().records - records;
      exec.record_steps(true);
      for (launch how : {launch::eager, launch::graph}) {
        const long before = sim::world::get().records;
        const auto losses = exec.step(dd.inputs, dd.targets, how);
        CHECK(std::equal(losses.begin(), losses.end(), expected.begin(), expected.end()));
        CHECK(test::bitwise_equal(test::gradients(m), grads));
        // Two events a task, one a rank, beside the step's own.
        CHECK(sim::world::get().records - before == per_step + 2 * exec_t::task_count + exec_t::ranks);
        // (Two devices: their clocks are aligned where each starts the step, which the simulator,
        // running one stream at a time, may delay by any part of the step: each rank's order only.)
        const auto cmp = ctpipe::compare_measured(exec_t::plan.table, exec.recorded_step());
        test::check_record(exec_t::plan.table, exec.recorded_step(), devices == 1 ? 0.0 : cmp.measured);
        CHECK(cmp.measured > 0.0);
        CHECK(cmp.replayed > 0.0);
      }
      CHECK(exec.graph_captures() == 0);
      exec.record_steps(false);
      const long before = sim::world::get().records;
      exec.step(dd.inputs, dd.targets);
      CHECK(sim::world::get().records - before == per_step);
      CHECK(exec.recorded_step().ranks.size() == 2);  // kept
      CHECK(exec.recorded_step().ranks[0][0].ran());
    };
    if (devices == 1) {
      one_device exec(m, l);
      run(exec);
    } else {
      two_devices exec(m, l);
      run(exec);
    }
  }
}

TEST_CASE("cuda executor (simulated): a recorded step that fails leaves no task's times") {
  fixture f;
  mlp m = make_mlp();
  sim_loss l;
  device_data dd(f.d);
  one_device exec(m, l);
  exec.record_steps(true);
  exec.step(dd.inputs, dd.targets);
  test::check_record(one_device::plan.table, exec.recorded_step());
  sim::world::get().fail = sim::call::wait;
  sim::world::get().countdown = 1;
  CHECK_THROWS(exec.step(dd.inputs, dd.targets));
  for (const auto& row : exec.recorded_step().ranks)
    for (const auto& t : row) CHECK(!t.ran());
  sim::world::get().countdown = 0;
  exec.step(dd.inputs, dd.targets);
  test::check_record(one_device::plan.table, exec.recorded_step());
}
