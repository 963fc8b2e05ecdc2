// ctpipe::optimizer and checkpoints on the CUDA executor (stream simulator): the sweeps' model of
// device layers (saved state, dropout, residuals across stages, a head tied to the embedding,
// microbatches of mixed lengths) on a device per rank, updated on host copies. The sweeps
// (sim_numerics.hpp) hold each update to the host model's to the bit; here: clipping that never
// triggers and one that always does, a NaN in one device's gradient skipping the step, an update
// asked for while a step is in flight, evaluate and predict between steps (and refused during
// one, or for a batch of the wrong size), and a checkpoint written at step 10 of 20 at p = 4 and
// resumed at p = 4, at p = 2 (ZB-V) and in the sequential host model, bitwise the run that never
// stopped (the model's layer 7 computes with a bf16 copy of its weights, rewritten after every
// update and after a load; the checkpoint holds the float weights, which load as well into a model
// without the copy). Then ctpipe::cuda::device_optimizer (the update on the device, ending each step; the
// sweeps train with it): a NaN skipping the step on every device, the learning rate and a
// gradient scale changed between replayed steps and a rule of the user's own, bitwise the host's,
// with no allocation in a step, and its misuses refused.
#include "support/sim_numerics.hpp"

#include <ctpipe/cuda/checkpoint.hpp>
#include <ctpipe/cuda/optimizer.hpp>
#include <ctpipe/optim/checkpoint.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

namespace {

using Model = test::device::token_block_mlp;
using Host = test::device::host_model_t<Model>;
using Data = test::device::basic_device_data<Model::input_type>;
using Opt = ctpipe::optimizer<Model, ctpipe::adamw>;
using HostOpt = ctpipe::optimizer<Host, ctpipe::adamw>;
constexpr int m = test::microbatches;
constexpr auto walk = ctpipe::dispatch::table_walk;

constexpr auto four = ctpipe::one_f_one_b(4, m);
using exec4 = test::device::sim_executor<test::device::sweep_table<four, Model>(), ctpipe::cuda::device_per_rank<4>(),
                                         walk, Model, test::device::sweep_stages<four, Model>()>;
constexpr auto two = ctpipe::zb_v(2, m);
using exec2 = test::device::sim_executor<test::device::sweep_table<two, Model>(), ctpipe::cuda::device_per_rank<2>(),
                                         walk, Model, test::device::sweep_stages<two, Model>()>;

const auto data = test::make_data<Host::input_type>(m);

std::vector<int> extents_of(int step) { return test::extents(m, static_cast<std::uint64_t>(step)); }

// Steps [from, to) through `exec` (whose steps stand at `from`), each followed by opt.step(), which
// must apply; the results of the updates.
template <class Exec>
std::vector<ctpipe::update_result> train(Exec& exec, Opt& opt, const Data& d, int from, int to) {
  std::vector<ctpipe::update_result> r;
  for (int step = from; step < to; ++step) {
    REQUIRE(exec.context_origin().step == static_cast<std::uint64_t>(step));
    const std::vector<int> e = extents_of(step);
    exec.step(d.inputs, d.targets, e);
    r.push_back(opt.step());
    REQUIRE(r.back().applied);
  }
  return r;
}
// The same steps of the sequential host model.
std::vector<ctpipe::update_result> train_host(Host& model, HostOpt& opt, int from, int to) {
  test::loss_for<Host> l;
  std::vector<double> losses(data.inputs.size());
  std::vector<ctpipe::update_result> r;
  for (int step = from; step < to; ++step) {
    const std::vector<int> e = extents_of(step);
    ctpipe::sequential_step(model, l, std::span<const Host::input_type>(data.inputs),
                            std::span<const test::target>(data.targets), std::span<const int>(e),
                            std::span<double>(losses), {static_cast<std::uint64_t>(step), 0});
    r.push_back(opt.step());
    REQUIRE(r.back().applied);
  }
  return r;
}

template <class O>
std::vector<float> state_of(O& opt) {
  std::vector<float> v;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          for (std::size_t t = 0; t < opt.template tensors<K>().size(); ++t)
            for (std::size_t j = 0; j < 2; ++j)
              for (float x : opt.template state<K>(t, j)) v.push_back(x);
        }(),
        ...);
  }
  (std::make_index_sequence<Model::size>{});
  return v;
}

// Each device on the simulator, and the data on the devices of exec4's first and last stages and of
// exec2's (ZB-V: both on rank 0).
struct devices {
  devices() { sim::world::get().reset(7, 4); }
  Data four{data, 0, 3}, two{data, 0, 0};
};
// The sweeps' model at p = 4, a device per rank, with its optimizer (clipped AdamW).
struct on_four : devices {
  Model pipe = test::device::make_mlp<Model>();
  test::device::sim_loss_for<Model> dl;
  exec4 exec{pipe, dl};
  Opt opt{pipe, exec, test::sweep_rule, test::sweep_clip};
};

}  // namespace

TEST_CASE("cuda executor (simulated): AdamW with clipping that never and that always triggers, bitwise the host's") {
  for (const double max_norm : {1e9, 1e-3}) {
    CAPTURE(max_norm);
    const devices dev;
    Host seq = test::make_mlp<Host>();
    HostOpt ref(seq, test::sweep_rule, {.max_norm = max_norm});
    Model pipe = test::device::make_mlp<Model>();
    test::device::sim_loss_for<Model> dl;
    exec4 exec(pipe, dl);
    Opt opt(pipe, exec, test::sweep_rule, {.max_norm = max_norm});
    const auto want = train_host(seq, ref, 0, 3);
    const auto got = train(exec, opt, dev.four, 0, 3);
    int clipped = 0;
    for (std::size_t i = 0; i < want.size(); ++i) test::same_update(want[i], got[i], clipped);
    CHECK(clipped == (max_norm < 1.0 ? 3 : 0));
    CHECK(test::bitwise_equal(test::parameters(seq), test::parameters(pipe)));
    CHECK(test::bitwise_equal(state_of(ref), state_of(opt)));
  }
}

TEST_CASE("cuda executor (simulated): a NaN in one device's gradient skips the step, parameters and state untouched") {
  on_four run;
  Model& pipe = run.pipe;
  exec4& exec = run.exec;
  Opt& opt = run.opt;
  const Data& four = run.four;
  train(exec, opt, four, 0, 1);
  exec.step(four.inputs, four.targets, extents_of(1));
  const std::vector<float> params = test::parameters(pipe), state = state_of(opt);
  pipe.layer<5>().gradients()[3] = std::numeric_limits<float>::quiet_NaN();  // (on rank 2's device)
  const ctpipe::update_result r = opt.step();
  CHECK_FALSE(r.applied);
  CHECK_FALSE(std::isfinite(r.norm));
  CHECK(opt.updates() == 1);
  CHECK(test::bitwise_equal(params, test::parameters(pipe)));
  CHECK(test::bitwise_equal(state, state_of(opt)));
  train(exec, opt, four, 2, 3);  // and the next step updates again
  CHECK(opt.updates() == 2);
}

TEST_CASE("cuda executor (simulated): the optimizer refuses to run while a step is in flight") {
  on_four run;
  run.exec.enqueue(run.four.inputs, run.four.targets, extents_of(0));
  CHECK_THROWS_WITH_AS(run.opt.step(), doctest::Contains("a step is in flight: wait() for it"), std::logic_error);
  CHECK(run.opt.updates() == 0);
  run.exec.wait();
  CHECK(run.opt.step().applied);
}

TEST_CASE(
    "cuda executor (simulated): evaluate and predict between steps on a device per rank, bitwise the host's, and "
    "refused while a step is in flight or for a batch of the wrong size") {
  on_four run;
  Host seq = test::make_mlp<Host>();
  HostOpt ref(seq, test::sweep_rule, test::sweep_clip);
  train_host(seq, ref, 0, 2);
  train(run.exec, run.opt, run.four, 0, 2);
  test::loss_for<Host> l;
  // (peer copies between devices into the forward pass's rings; the sweeps run it on one device)
  test::device::forward_against_sequential(run.exec, seq, run.pipe, l, data, run.four, {3}, 2,
                                           ctpipe::cuda::launch::eager);
  run.exec.enqueue(run.four.inputs, run.four.targets, extents_of(2));
  CHECK_THROWS_WITH_AS(run.exec.evaluate(run.four.inputs, run.four.targets, extents_of(2)),
                       doctest::Contains("a step is in flight: wait() for it"), std::logic_error);
  run.exec.wait();
  const std::span<const exec4::target_type> short_targets(run.four.targets.data(), m - 1);
  CHECK_THROWS_WITH_AS(run.exec.evaluate(run.four.inputs, short_targets, extents_of(2)),
                       doctest::Contains("ctpipe::cuda::executor::evaluate: inputs (12) and targets (11)"),
                       std::invalid_argument);
  const std::vector<exec4::output_type> outputs(m - 1);
  CHECK_THROWS_WITH_AS(run.exec.predict(run.four.inputs, outputs, extents_of(2)),
                       doctest::Contains("ctpipe::cuda::executor::predict: inputs (12) and outputs (11)"),
                       std::invalid_argument);
  CHECK(run.exec.context_origin().step == 3);  // (the step above counted; the passes did not)
}

TEST_CASE(
    "cuda executor (simulated): checkpoint at step 10 of 20 at p = 4, resumed at p = 4, at p = 2 and in the "
    "host model: bitwise the same run") {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("ctpipe_device_resume_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  on_four run;
  const devices& dev = run;
  Model& pipe = run.pipe;
  auto& dl = run.dl;
  exec4& exec = run.exec;
  Opt& opt = run.opt;
  train(exec, opt, dev.four, 0, 10);
  ctpipe::save_checkpoint(file, opt, {exec.context_origin(), "sample 120"});
  const std::vector<float> at_ten = test::parameters(pipe);  // (layer 7's float master weights among them)
  train(exec, opt, dev.four, 10, 20);                        // the run that never stopped
  const auto resumed = [&](auto& model, auto& o) {
    CHECK(test::bitwise_equal(test::parameters(model), test::parameters(pipe)));
    CHECK(test::bitwise_equal(state_of(o), state_of(opt)));
    CHECK(o.updates() == 20);
  };
  const auto load = [&](auto& o) {
    const ctpipe::training_state s = ctpipe::load_checkpoint(file, o);
    CHECK(s.origin.step == 10);
    CHECK(s.data == "sample 120");
    CHECK(o.updates() == 10);
    return s;
  };
  // A fresh model of other weights (the checkpoint must replace them all) through Exec.
  const auto on = [&]<class Exec>(const Data& d) {
    Model model = test::device::make_mlp<Model>(99);
    Exec x(model, dl);
    Opt o(model, x, test::sweep_rule, test::sweep_clip);
    x.set_context_origin(load(o).origin);
    train(x, o, d, 10, 20);
    resumed(model, o);
  };
  SUBCASE("p = 4") { on.operator()<exec4>(dev.four); }
  SUBCASE("p = 2, another placement") { on.operator()<exec2>(dev.two); }
  SUBCASE("the sequential host model") {
    Host model = test::make_mlp<Host>(99);
    HostOpt o(model, test::sweep_rule, test::sweep_clip);
    load(o);
    train_host(model, o, 10, 20);
    resumed(model, o);
  }
  SUBCASE("a host model whose layer 7 keeps no bf16 copy: the checkpoint's float weights") {
    test::block_mlp model = test::make_mlp<test::block_mlp>(99);
    ctpipe::optimizer o(model, test::sweep_rule, test::sweep_clip);
    load(o);
    CHECK(test::bitwise_equal(test::parameters(model), at_ten));
  }
  std::filesystem::remove(file);
}

namespace {

// A rule of a user's own, with an element form: sign descent with a decaying step, whose state
// counts the updates in which each element's gradient was positive.
struct sign_descent {
  double lr = 0.01;
  static constexpr std::array<std::string_view, 1> state_names{"positive"};
  template <class T>
  struct scalars {
    T rate;
  };
  template <class T>
  scalars<T> prepare(const ctpipe::update_info& u) const {
    return {static_cast<T>(lr / static_cast<double>(u.step))};
  }
  template <class T>
  CTPIPE_HOST_DEVICE static void element(const scalars<T>& s, T& w, T g, T& positive) {
    w = ctpipe::rn::sub(w, g > T(0) ? s.rate : g < T(0) ? -s.rate : T(0));
    positive = ctpipe::rn::add(positive, g > T(0) ? T(1) : T(0));
  }
  template <class T>
  void operator()(const ctpipe::update_info& u, std::span<T> w, std::span<const T> g, std::span<T> p) const {
    ctpipe::apply_elements(*this, u, w, g, p);
  }
};

// The sweeps' model at p = 4, a device per rank, its update on the device.
template <class Rule = ctpipe::adamw>
struct on_four_device : devices {
  Model pipe = test::device::make_mlp<Model>();
  test::device::sim_loss_for<Model> dl;
  exec4 exec{pipe, dl};
  ctpipe::cuda::device_optimizer<exec4, Rule> opt;
  explicit on_four_device(Rule rule = test::sweep_rule, ctpipe::clipping clip = test::sweep_clip)
      : opt(exec, rule, clip) {}
};

}  // namespace

TEST_CASE("device optimizer (simulated): a NaN in one layer skips the step on every device, nothing updated") {
  on_four_device<> run;
  const Data& four = run.four;
  run.exec.step(four.inputs, four.targets, extents_of(0));
  REQUIRE(run.opt.result().applied);
  const std::vector<float> params = test::parameters(run.pipe);
  std::vector<float> state;
  for (std::size_t t = 0; t < 2; ++t)
    for (const float x : run.opt.state<5>(t, 1)) state.push_back(x);
  // A NaN weight of layer 5 (rank 2's device): its output, and every gradient before it, are NaN.
  float& w = run.pipe.layer<5>().parameters()[3];
  const float kept = w;
  w = std::numeric_limits<float>::quiet_NaN();
  run.exec.step(four.inputs, four.targets, ctpipe::cuda::launch::graph);  // (no extents: every microbatch full)
  const ctpipe::update_result r = run.opt.result();
  CHECK_FALSE(r.applied);
  CHECK_FALSE(std::isfinite(r.norm));
  CHECK(run.opt.updates() == 1);
  CHECK(run.opt.layer_updates(5) == 1);
  w = kept;
  CHECK(test::bitwise_equal(params, test::parameters(run.pipe)));
  std::vector<float> after;
  for (std::size_t t = 0; t < 2; ++t)
    for (const float x : run.opt.state<5>(t, 1)) after.push_back(x);
  CHECK(test::bitwise_equal(state, after));
  run.exec.step(four.inputs, four.targets, ctpipe::cuda::launch::graph);  // the replay updates again
  CHECK(run.opt.result().applied);
  CHECK(run.opt.updates() == 2);
  CHECK(run.exec.graph_captures() == 1);
}

TEST_CASE(
    "device optimizer (simulated): the learning rate and a gradient scale changed between replayed steps, and a "
    "rule of the user's own, bitwise the host's, a step allocates nothing") {
  const auto both = [&]<class Rule>(Rule rule, ctpipe::clipping clip) {
    on_four_device<Rule> run(rule, clip);
    Host seq = test::make_mlp<Host>();
    ctpipe::optimizer ref(seq, rule, clip);
    test::loss_for<Host> l;
    std::vector<double> losses(data.inputs.size());
    int clipped = 0;
    long mallocs = 0;
    for (int step = 0; step < 4; ++step) {
      const double lr = 0.01 / (1.0 + step), scale = step % 2 == 0 ? 1.0 : 0.25;
      ref.rule.lr = run.opt.rule.lr = lr;
      run.opt.gradient_scale = scale;
      ctpipe::sequential_step(seq, l, std::span<const Host::input_type>(data.inputs),
                              std::span<const test::target>(data.targets), {}, std::span<double>(losses),
                              {static_cast<std::uint64_t>(step), 0});
      run.exec.step(run.four.inputs, run.four.targets, ctpipe::cuda::launch::graph);
      test::same_update(ref.step(scale), run.opt.result(), clipped);
      if (step == 0) mallocs = sim::world::get().mallocs;
      REQUIRE(test::bitwise_equal(test::parameters(seq), test::parameters(run.pipe)));
      REQUIRE(test::bitwise_equal(test::gradients(seq), test::gradients(run.pipe)));
    }
    CHECK(sim::world::get().mallocs == mallocs);  // (three steps, one replayed graph each: nothing allocated)
    CHECK(run.exec.graph_captures() == 1);
    CHECK(run.opt.updates() == 4);
    CHECK(test::device::same_state(ref, run.opt));
    return clipped;
  };
  SUBCASE("AdamW, clipped at every step") { CHECK(both(ctpipe::adamw{}, {.max_norm = 1e-3}) == 4); }
  SUBCASE("a rule of the user's own, not clipped") { CHECK(both(sign_descent{}, {.max_norm = 0.0}) == 0); }
}

TEST_CASE("device optimizer (simulated): refused while a step is in flight, twice on one executor, or unwaited") {
  on_four_device<> run;
  const Data& four = run.four;
  run.exec.enqueue(four.inputs, four.targets, extents_of(0));
  CHECK_THROWS_WITH_AS(run.opt.state<0>(0, 0), doctest::Contains("a step is in flight: wait() for it"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS(run.exec.enqueue(four.inputs, four.targets, extents_of(1)),
                       doctest::Contains("the step before was not waited for"), std::logic_error);
  run.exec.wait();
  CHECK(run.opt.result().applied);
  CHECK_THROWS_WITH_AS(ctpipe::cuda::device_optimizer(run.exec, ctpipe::sgd{}),
                       doctest::Contains("a device optimizer is already attached"), std::logic_error);
  CHECK(run.opt.updates() == 1);
}

TEST_CASE(
    "device optimizer (simulated): a checkpoint at step 3 of 6 resumes on the device at p = 2 and on host copies, "
    "bitwise the run that never stopped") {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("ctpipe_device_opt_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  // Steps [from, to) through `exec`, each ending with its update, which must apply.
  const auto steps = [](auto& exec, auto& opt, const Data& d, int from, int to) {
    for (int step = from; step < to; ++step) {
      exec.step(d.inputs, d.targets, extents_of(step), ctpipe::cuda::launch::graph);
      REQUIRE(opt.result().applied);
    }
  };
  on_four_device<> run;
  steps(run.exec, run.opt, run.four, 0, 3);
  ctpipe::cuda::save_checkpoint(file, run.opt, {run.exec.context_origin(), "half"});
  steps(run.exec, run.opt, run.four, 3, 6);  // the run that never stopped
  const std::vector<float> want = test::parameters(run.pipe);
  SUBCASE("on the device, p = 2 (ZB-V)") {
    Model model = test::device::make_mlp<Model>(99);
    exec2 x(model, run.dl);
    ctpipe::cuda::device_optimizer<exec2, ctpipe::adamw> o(x, test::sweep_rule, test::sweep_clip);
    const ctpipe::training_state s = ctpipe::cuda::load_checkpoint(file, o);
    CHECK((s.origin.step == 3 && s.data == "half" && o.updates() == 3 && o.layer_updates(0) == 3));
    x.set_context_origin(s.origin);
    steps(x, o, run.two, 3, 6);
    CHECK(test::bitwise_equal(test::parameters(model), want));
    CHECK(test::device::same_state(run.opt, o));
  }
  SUBCASE("on host copies (ctpipe::optimizer), p = 4") {
    Model model = test::device::make_mlp<Model>(99);
    exec4 x(model, run.dl);
    Opt o(model, x, test::sweep_rule, test::sweep_clip);
    x.set_context_origin(ctpipe::load_checkpoint(file, o).origin);
    train(x, o, run.four, 3, 6);
    CHECK(test::bitwise_equal(test::parameters(model), want));
  }
  std::filesystem::remove(file);
}
