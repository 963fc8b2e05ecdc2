// Shared body of the simulated CUDA executor tests: every schedule, p = 1..4, one device (ranks on
// streams, tensors passed by pointer) and one device per rank (peer copies through rings), both
// dispatch strategies, eager and graph steps, against the sequential reference, bit for bit, under
// random interleavings of the streams.
#pragma once
#include "numerics.hpp"  // bitwise_equal
#include "sim_mlp.hpp"

#include <ctpipe/cuda/optimizer.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <deque>

namespace test::device {

// After training: evaluate() and predict() through the executor's forward-only table (the trained
// parameters, `step` training steps run), equal to the bit to the sequential forward pass of `seq`
// (losses, tokens, outputs read back from the device), with the gradients of `pipe` and the
// executor's step count left as they were. The outputs go to buffers on each pipeline's last
// stage's device (`out_devices`).
template <class Executor, class Host, class Device, class Loss, class Data, class DeviceData>
void forward_against_sequential(Executor& exec, Host& seq, Device& pipe, Loss& l, const Data& d, const DeviceData& dd,
                                const std::vector<int>& out_devices, std::uint64_t step, ctpipe::cuda::launch how) {
  using host_input = typename Host::input_type;
  using host_output = typename Host::output_type;
  using output = typename Executor::output_type;
  const int m = Executor::microbatches;
  const std::vector<int> e = Device::token_capacity > 0 ? test::extents(m, step) : std::vector<int>{};
  const std::vector<float> before = test::gradients(pipe);
  std::vector<double> want(d.inputs.size());
  ctpipe::sequential_evaluate(seq, l, std::span<const host_input>(d.inputs), std::span<const test::target>(d.targets),
                              std::span<const int>(e), std::span<double>(want), {step, 0});
  for (int pass = 0; pass < 2; ++pass) {  // (twice: a graph pass is captured, then replayed)
    const ctpipe::token_losses got = exec.evaluate(dd.inputs, dd.targets, e, how);
    REQUIRE(got.losses.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(got.losses[i] == want[i]);
    if constexpr (Device::token_capacity > 0)
      REQUIRE(std::equal(got.tokens.begin(), got.tokens.end(), e.begin(), e.end()));
  }
  std::vector<host_output> want_out(d.inputs.size());
  ctpipe::sequential_predict(seq, std::span<const host_input>(d.inputs), std::span<const int>(e),
                             std::span<host_output>(want_out), {step, 0});
  static_assert(sizeof(host_output{}.v) == output::bytes);
  std::deque<sim::buffer> buffers;
  std::vector<output> outs;
  const std::size_t per = d.inputs.size() / out_devices.size();
  for (const int device : out_devices) {
    const sim::buffer& b = buffers.emplace_back(per * output::bytes, device);
    std::memset(b.p, 0x7f, per * output::bytes);  // (not zeros: predict must write the zeros past an extent)
    for (std::size_t k = 0; k < per; ++k) outs.push_back({b.as<float>() + k * output::bytes / sizeof(float)});
  }
  exec.predict(dd.inputs, outs, e, how);
  for (std::size_t i = 0; i < want_out.size(); ++i)
    REQUIRE(std::memcmp(want_out[i].v.data(), outs[i].data, output::bytes) == 0);
  REQUIRE(test::bitwise_equal(before, test::gradients(pipe)));
  REQUIRE(exec.context_origin().step == step);  // no training step of its own
}

// One optimizer's state of every layer (`held(k)`: of those it holds) equals another's (host or
// device), to the bit.
template <class Host, class Device, class Held = bool (*)(std::size_t)>
bool same_state(
    Host& ref, const Device& opt, Held held = [](std::size_t) { return true; }) {
  bool same = true;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          if (!held(K)) return;
          for (std::size_t t = 0; t < ref.template tensors<K>().size(); ++t)
            for (std::size_t j = 0; j < ctpipe::state_count_v<typename Host::rule_type>; ++j) {
              const auto want = ref.template state<K>(t, j);
              const auto got = opt.template state<K>(t, j);
              same = same && want.size() == got.size() &&
                     std::memcmp(want.data(), got.data(), want.size() * sizeof(want[0])) == 0;
            }
        }(),
        ...);
  }
  (std::make_index_sequence<Host::model_type::size>{});
  return same;
}

// Trains the sequential reference and the executor side by side for `steps` steps: the reference
// followed by the sweep's update (AdamW, clipped: test::sweep_rule) through ctpipe::optimizer, the
// executor's steps each ending with the same update on the device (ctpipe::cuda::device_optimizer,
// captured with the step into its graph); losses, each update's norm and scale, the gradients as
// the updates leave them, the parameters, and at the end the optimizers' state must agree to the
// bit, whatever order the simulator runs the streams in. Then (Forward) the forward-only pass on
// the trained parameters.
// A bidirectional table (dualpipe) runs its second pipeline on a mirror model, and its reference
// sums each pipeline's half of the microbatches, then adds the two (test::reference_step).
template <class Executor, bool Forward = true>
void train_device_against_sequential(int devices, unsigned seed, ctpipe::cuda::launch how, int steps = 4) {
  sim::world::get().reset(seed, devices);
  using model_t = std::remove_reference_t<decltype(std::declval<Executor&>().model())>;
  using host_t = host_model_t<model_t>;
  using host_input = typename host_t::input_type;
  constexpr bool tokens = model_t::token_capacity > 0;  // then every step has its own mixed extents
  host_t seq = test::make_mlp<host_t>();
  test::loss_for<host_t> l;
  constexpr bool mirrored = Executor::mirrored;
  model_t pipe = make_mlp<model_t>();
  model_t mirror = make_mlp<model_t>();  // (a dualpipe's second pipeline's layers; unused otherwise)
  sim_loss_for<model_t> dl;
  const auto d = test::make_data<host_input>(Executor::microbatches);
  // Each pipeline's inputs on its first stage's device, its targets on its last stage's.
  std::vector<int> in_devices, target_devices;
  constexpr int chain = Executor::plan.chain_length;
  for (int c = 0; c < (mirrored ? 2 : 1); ++c) {
    const auto device_of = [](int stage) {
      return Executor::devices[static_cast<std::size_t>(
          Executor::plan.table.stage_rank[static_cast<std::size_t>(stage)])];
    };
    in_devices.push_back(device_of(c * chain));
    target_devices.push_back(device_of(mirrored ? c * chain + chain - 1 : Executor::stage_count - 1));
  }
  const basic_device_data<typename model_t::input_type> dd(d, in_devices, target_devices);
  std::vector<double> seq_losses(d.inputs.size());
  {
    Executor exec = [&] {
      if constexpr (mirrored)
        return Executor(pipe, mirror, dl);
      else
        return Executor(pipe, dl);
    }();
    ctpipe::optimizer ref(seq, test::sweep_rule, test::sweep_clip);
    ctpipe::cuda::device_optimizer opt(exec, test::sweep_rule, test::sweep_clip);  // (each step ends with it)
    int clipped = 0;
    for (int step = 0; step < steps; ++step) {
      const std::vector<int> e =
          tokens ? test::extents(Executor::microbatches, static_cast<std::uint64_t>(step)) : std::vector<int>{};
      if constexpr (mirrored)
        seq_losses = test::reference_step(seq, l, d, 1, Executor::microbatches, static_cast<std::uint64_t>(step),
                                          std::span<const int>(e), 2);
      else
        ctpipe::sequential_step(seq, l, std::span<const host_input>(d.inputs), std::span<const test::target>(d.targets),
                                std::span<const int>(e), std::span<double>(seq_losses),
                                {static_cast<std::uint64_t>(step), 0});
      std::span<const double> losses;
      if constexpr (tokens) {
        const ctpipe::token_losses r = exec.step(dd.inputs, dd.targets, e, how);
        REQUIRE(std::equal(r.tokens.begin(), r.tokens.end(), e.begin(), e.end()));
        losses = r.losses;
      } else {
        losses = exec.step(dd.inputs, dd.targets, how);
      }
      REQUIRE(losses.size() == seq_losses.size());
      for (std::size_t i = 0; i < seq_losses.size(); ++i) REQUIRE(losses[i] == seq_losses[i]);
      test::same_update(ref.step(), opt.result(), clipped);
      // (the gradients as each optimizer left them: clipped where the update clipped)
      REQUIRE(test::bitwise_equal(test::gradients(seq), test::gradients(pipe)));
      REQUIRE(test::bitwise_equal(test::parameters(seq), test::parameters(pipe)));
    }
    CHECK(clipped > 0);
    REQUIRE(same_state(ref, opt));
    if (how == ctpipe::cuda::launch::graph) CHECK(exec.graph_captures() == 1);
    if constexpr (Forward)
      forward_against_sequential(exec, seq, pipe, l, d, dd, target_devices, static_cast<std::uint64_t>(steps), how);
    INFO((sim::world::get().wrong_device_work.empty() ? std::string() : sim::world::get().wrong_device_work[0]));
    CHECK(sim::world::get().wrong_device_work.empty());
  }
  CHECK(sim::world::get().live_allocations == dd.buffers.size());  // the data set's; the executor freed its own
}

// Three interleavings of the streams each: eager steps and graph steps dispatched as Main, each
// followed, on one device (Walk), by evaluate() and predict() (eager and captured:
// forward_against_sequential; there the forward pass's messages across ranks are its own copies and
// a stage on the same rank reads its producer's slot in place; a device per rank adds only the peer
// copies, which the training steps run, and would double the build)
// (unrolled, or walking the table), and (on one device, to keep the build short) eager steps through
// the table walk as well where Main unrolls.
template <auto Table, auto Placement, bool Walk, class Model = token_block_mlp,
          ctpipe::dispatch Main = ctpipe::dispatch::unrolled, auto Stages = ctpipe::partition<Model, Table.stages()>()>
void all_ways(int devices) {
  using ctpipe::dispatch;
  using ctpipe::cuda::launch;
  for (unsigned seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    train_device_against_sequential<sim_executor<Table, Placement, Main, Model, Stages>, Walk>(devices, seed,
                                                                                               launch::eager);
    train_device_against_sequential<sim_executor<Table, Placement, Main, Model, Stages>, Walk>(devices, seed,
                                                                                               launch::graph);
    if constexpr (Walk && Main == dispatch::unrolled)
      train_device_against_sequential<sim_executor<Table, Placement, dispatch::table_walk, Model, Stages>, false>(
          devices, seed, launch::eager);  // (the forward pass: through Main's executor, to keep the build short)
  }
}

// Main = table_walk: the larger tables of the split-backward sweep (p = 3, 4), whose unrolled
// steps cost most of that target's compile time; unrolling is tested at p = 1, 2 and in
// sim_split.cpp, and the two strategies run the same task code.
template <auto S, class Model = token_block_mlp, ctpipe::dispatch Main = ctpipe::dispatch::unrolled>
void every_placement() {
  constexpr auto stages = sweep_stages<S, Model>();
  constexpr auto table = sweep_table<S, Model>();
  constexpr std::size_t p = table.static_ranks;
  SUBCASE("one device") { all_ways<table, 0, true, Model, Main, stages>(1); }
  if constexpr (p > 1) {
    SUBCASE("a device per rank") {
      all_ways<table, ctpipe::cuda::device_per_rank<p>(), false, Model, Main, stages>(static_cast<int>(p));
    }
  }
}

}  // namespace test::device
