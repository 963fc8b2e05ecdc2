// Faults: a layer that throws ends step() with task_failure naming rank, stage, microbatch and op;
// every rank stops promptly; the next step runs correctly. Misuse gets a clear error.
#include "support/numerics.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <thread>

namespace {

using dense_mid = test::dense<test::batch, test::hidden, test::hidden>;

// A dense layer that throws on its n-th forward or backward call (counting from 0), once.
struct faulty : dense_mid {
  int forward_throw_at = -1, backward_throw_at = -1;
  mutable int forward_calls = 0;
  int backward_calls = 0;
  void forward(const input_type& x, output_type& y) const {
    if (forward_calls++ == forward_throw_at) throw std::runtime_error("injected forward fault");
    dense_mid::forward(x, y);
  }
  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    if (backward_calls++ == backward_throw_at) throw std::domain_error("injected backward fault");
    dense_mid::backward(x, y, dy, dx);
  }
};

// A dense layer that waits, in its forward, until released.
struct gate : dense_mid {
  static inline std::atomic<bool> closed{false}, entered{false};
  void forward(const input_type& x, output_type& y) const {
    entered = true;
    while (closed.load()) std::this_thread::yield();
    dense_mid::forward(x, y);
  }
};

template <class Mid>
using net =
    ctpipe::model<test::dense<test::batch, test::features, test::hidden>, dense_mid, dense_mid, dense_mid, dense_mid,
                  Mid, dense_mid, test::dense<test::batch, test::hidden, test::classes, test::activation::none>>;

template <class M>
M make_net() {
  M m;
  std::uint64_t k = 1;
  ctpipe::for_each_layer(m, [&](auto& l) { l.init(k++); });
  return m;
}

// Runs f on another thread; fails the whole test run at once if it does not finish in time.
template <class F>
auto within_deadline(F&& f, std::chrono::seconds limit = std::chrono::seconds(20)) {
  auto fut = std::async(std::launch::async, std::forward<F>(f));
  if (fut.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "deadline of %d s passed: the executor hangs\n", static_cast<int>(limit.count()));
    std::_Exit(1);
  }
  return fut.get();
}

// Runs `run` (a step or a forward pass, named `what`), which must fail within the deadline, and
// returns its task_failure.
template <class Run>
ctpipe::task_failure failure_in(Run&& run, const char* what) {
  return within_deadline([&]() -> ctpipe::task_failure {
    try {
      run();
    } catch (const ctpipe::task_failure& e) {
      return e;
    }
    std::fprintf(stderr, "%s did not throw\n", what);
    std::_Exit(1);
  });
}
template <class Exec>
ctpipe::task_failure failure_of(Exec& exec, const test::data_set& d) {
  return failure_in([&] { exec.step(d.inputs, d.targets); }, "step()");
}

// After a failed step: the executor runs the next step afresh, with the losses and gradients of the
// sequential reference (started from the same parameters).
template <class Exec, class M>
void next_step_is_correct(Exec& exec, M& m, M& reference, test::loss& l, const test::data_set& d) {
  std::vector<double> ref_losses(d.inputs.size());
  ctpipe::sequential_step(reference, l, std::span<const test::input>(d.inputs),
                          std::span<const test::target>(d.targets), std::span<double>(ref_losses));
  const auto losses = within_deadline([&] {
    const auto s = exec.step(d.inputs, d.targets);
    return std::vector<double>(s.begin(), s.end());
  });
  CHECK(losses == ref_losses);
  CHECK(test::bitwise_equal(test::gradients(m), test::gradients(reference)));
}

// 1F1B over 4 ranks, 2 layers a stage: layer 5 is on stage 2, rank 2.
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, test::microbatches)>();
constexpr auto stages = ctpipe::partition<net<faulty>, 4>();
static_assert(stages.stage_of_layer(5) == 2);
using exec_t = ctpipe::host_executor<table, net<faulty>, stages, test::loss>;

}  // namespace

TEST_CASE("host executor: a forward that throws names rank, stage, microbatch and op, and the next step is correct") {
  auto m = make_net<net<faulty>>();
  auto reference = m;
  test::loss l;
  const auto d = test::make_data();
  exec_t exec(m, l);
  m.layer<5>().forward_throw_at = 3;  // the 4th forward of layer 5: microbatch 3
  const auto e = failure_of(exec, d);
  CHECK(e.executor() == "ctpipe::host_executor");
  CHECK(e.rank() == 2);
  CHECK(e.stage() == 2);
  CHECK(e.microbatch() == 3);
  CHECK(e.op() == ctpipe::op_kind::forward);
  CHECK(std::string(e.what()) ==
        "ctpipe::host_executor: rank 2, stage 2, microbatch 3, op F failed: injected forward fault");
  CHECK_THROWS_AS(std::rethrow_exception(e.cause()), std::runtime_error);
  // The executor runs the next step afresh: gradients as the sequential reference's.
  next_step_is_correct(exec, m, reference, l, d);
}

TEST_CASE("host executor: a fault on rank 0 (the calling thread) and a fault under the table walk") {
  // Layer 1 is on stage 0, which rank 0 runs on the thread that called step().
  using first_faulty = ctpipe::model<test::dense<test::batch, test::features, test::hidden>, faulty, dense_mid,
                                     dense_mid, dense_mid, dense_mid, dense_mid,
                                     test::dense<test::batch, test::hidden, test::classes, test::activation::none>>;
  auto m = make_net<first_faulty>();
  auto reference = m;
  test::loss l;
  const auto d = test::make_data();
  ctpipe::host_executor<table, first_faulty, ctpipe::partition<first_faulty, 4>(), test::loss> exec(m, l);
  m.layer<1>().backward_throw_at = 10;
  CHECK(std::string(failure_of(exec, d).what()) ==
        "ctpipe::host_executor: rank 0, stage 0, microbatch 10, op B failed: injected backward fault");
  next_step_is_correct(exec, m, reference, l, d);

  // The table walk reads the microbatch from the table at run time; the error names it all the same.
  auto w = make_net<net<faulty>>();
  ctpipe::host_executor<table, net<faulty>, stages, test::loss, ctpipe::dispatch::table_walk> walk(w, l);
  w.layer<5>().forward_throw_at = 6;
  const auto e = failure_of(walk, d);
  CHECK(std::string(e.what()) ==
        "ctpipe::host_executor: rank 2, stage 2, microbatch 6, op F failed: injected forward fault");
  CHECK(e.rank() == 2);
  CHECK(e.microbatch() == 6);
}

TEST_CASE("host executor: a backward that throws, and a loss that throws") {
  auto m = make_net<net<faulty>>();
  test::loss l;
  const auto d = test::make_data();
  exec_t exec(m, l);
  m.layer<5>().backward_throw_at = 7;
  const auto e = failure_of(exec, d);
  CHECK(std::string(e.what()) ==
        "ctpipe::host_executor: rank 2, stage 2, microbatch 7, op B failed: injected backward fault");
  CHECK_THROWS_AS(std::rethrow_exception(e.cause()), std::domain_error);
  // A target outside the classes: the loss refuses it (in the last stage's B, where it runs), the
  // step names rank, stage, microbatch and the sample, updates no parameter, and the next step is
  // correct; evaluate() names it the same way (in the last stage's F).
  auto mb = make_net<net<faulty>>();
  auto reference = mb;
  exec_t exec2(mb, l);
  auto bad = d;
  bad.targets[5][1] = 9;
  const auto before = test::parameters(mb);
  const auto f = failure_of(exec2, bad);
  CHECK(std::string(f.what()) ==
        "ctpipe::host_executor: rank 3, stage 3, microbatch 5, op B failed: ctpipe::layers::softmax_cross_entropy: "
        "microbatch 5, sample 1: target 9 is not a class (0 to 3)");
  CHECK_THROWS_AS(std::rethrow_exception(f.cause()), std::out_of_range);
  CHECK(test::parameters(mb) == before);
  const auto g = failure_in([&] { exec2.evaluate(bad.inputs, bad.targets); }, "evaluate()");
  CHECK(std::string(g.what()) ==
        "ctpipe::host_executor: rank 3, stage 3, microbatch 5, op F failed: ctpipe::layers::softmax_cross_entropy: "
        "microbatch 5, sample 1: target 9 is not a class (0 to 3)");
  next_step_is_correct(exec2, mb, reference, l, d);
}

TEST_CASE("host executor: every rank stops promptly after a fault, for every schedule") {
  auto run = [](auto exec_tag) {
    using E = typename decltype(exec_tag)::type;
    auto m = make_net<net<faulty>>();
    test::loss l;
    const auto d = test::make_data();
    E exec(m, l);
    for (int at : {0, 5, 11}) {
      m.template layer<5>().forward_calls = 0;
      m.template layer<5>().forward_throw_at = at;
      within_deadline([&] { CHECK_THROWS_AS(exec.step(d.inputs, d.targets), ctpipe::task_failure); });
    }
  };
  using M = net<faulty>;
  run(std::type_identity<ctpipe::host_executor<ctpipe::make_table<ctpipe::gpipe(4, test::microbatches)>(), M,
                                               ctpipe::partition<M, 4>(), test::loss>>{});
  run(std::type_identity<ctpipe::host_executor<ctpipe::make_table<ctpipe::interleaved(4, test::microbatches, 2)>(), M,
                                               ctpipe::partition<M, 8>(), test::loss>>{});
  run(std::type_identity<ctpipe::host_executor<ctpipe::make_table<ctpipe::naive(2, test::microbatches)>(), M,
                                               ctpipe::partition<M, 2>(), test::loss>>{});
}

TEST_CASE("host executor: destroying never hangs") {
  test::loss l;
  auto m = make_net<net<faulty>>();
  within_deadline([&] {
    for (int i = 0; i < 50; ++i) exec_t exec(m, l);  // threads may not have started yet
    return 0;
  });
  within_deadline([&] {
    exec_t exec(m, l);
    m.layer<5>().forward_throw_at = 0;
    m.layer<5>().forward_calls = 0;
    CHECK_THROWS_AS(exec.step(test::make_data().inputs, test::make_data().targets), ctpipe::task_failure);
    return 0;  // destroyed right after a failed step
  });
}

TEST_CASE("host executor: misuse gets a clear error") {
  auto m = make_net<net<faulty>>();
  test::loss l;
  exec_t exec(m, l);
  const auto d = test::make_data(5);
  CHECK_THROWS_WITH_AS(
      exec.step(d.inputs, d.targets),
      "ctpipe::host_executor::step: inputs (5) and targets (5) must each hold 12 microbatches, as the table does",
      std::invalid_argument);

  // Two steps at once on one executor.
  using gated = net<gate>;
  auto g = make_net<gated>();
  ctpipe::host_executor<table, gated, ctpipe::partition<gated, 4>(), test::loss> ge(g, l);
  const auto full = test::make_data();
  gate::closed = true;
  gate::entered = false;
  auto first = std::async(std::launch::async, [&] { ge.step(full.inputs, full.targets); });
  while (!gate::entered) std::this_thread::yield();
  CHECK_THROWS_WITH_AS(ge.step(full.inputs, full.targets),
                       "ctpipe::host_executor::step: a step is already running on another thread", std::logic_error);
  gate::closed = false;
  within_deadline([&] {
    first.get();
    return 0;
  });
}

TEST_CASE("host executor: a forward that throws in evaluate() names its task, and the next pass is correct") {
  auto m = make_net<net<faulty>>();
  auto reference = m;
  test::loss l;
  const auto d = test::make_data();
  exec_t exec(m, l);
  m.layer<5>().forward_throw_at = 3;  // the 4th forward of layer 5: microbatch 3
  const auto e = failure_in([&] { exec.evaluate(d.inputs, d.targets); }, "evaluate()");
  CHECK(std::string(e.what()) ==
        "ctpipe::host_executor: rank 2, stage 2, microbatch 3, op F failed: injected forward fault");
  // The next pass runs afresh; evaluate then step, each as the sequential reference.
  std::vector<double> want(d.inputs.size());
  ctpipe::sequential_evaluate(reference, l, std::span<const test::input>(d.inputs),
                              std::span<const test::target>(d.targets), std::span<double>(want));
  const auto got = within_deadline([&] {
    const auto s = exec.evaluate(d.inputs, d.targets);
    return std::vector<double>(s.begin(), s.end());
  });
  CHECK(got == want);
  next_step_is_correct(exec, m, reference, l, d);
  // Misuse: the wrong number of microbatches.
  const auto five = test::make_data(5);
  CHECK_THROWS_WITH_AS(
      exec.evaluate(five.inputs, five.targets),
      "ctpipe::host_executor::evaluate: inputs (5) and targets (5) must each hold 12 microbatches, as the table does",
      std::invalid_argument);
  std::vector<net<faulty>::output_type> outputs(5);
  CHECK_THROWS_WITH_AS(
      exec.predict(d.inputs, outputs),
      "ctpipe::host_executor::predict: inputs (12) and outputs (5) must each hold 12 microbatches, as the table does",
      std::invalid_argument);
}
