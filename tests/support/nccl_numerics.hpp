// Shared body of the NCCL executor's tests on the stream simulator and the NCCL stand-in: a job of
// one simulated process per rank, each with its own device, model copy and executor, trained side
// by side with the sequential reference; losses, the gradients of each process's own layers and
// its parameters must match the reference bit for bit, under random interleavings of every
// process's streams, with no NCCL rule broken; then evaluate() and predict() on the trained
// parameters must be the sequential forward pass's, to the bit.
#pragma once
#include "nccl_sim.hpp"
#include "numerics.hpp"      // bitwise_equal
#include "recording.hpp"     // check_record
#include "sim_numerics.hpp"  // sim_mlp

#include <ctpipe/nccl/executor.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <span>
#include <thread>
#include <vector>

namespace test::nccl {

// f(q) for every simulated process q at once, each on a thread of its own: for what is collective
// between steps (the optimizer's step, a checkpoint), where a process's call returns only once every
// process has made it. An exception of any is rethrown, the lowest process's first.
template <class F>
void on_every_process(int processes, F f) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(processes));
  {
    std::vector<std::jthread> threads;
    for (int q = 0; q < processes; ++q)
      threads.emplace_back([&, q] {
        try {
          f(q);
        } catch (...) {
          errors[static_cast<std::size_t>(q)] = std::current_exception();
        }
      });
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

template <auto Table, class Model = device::token_block_mlp, ctpipe::dispatch D = ctpipe::dispatch::automatic,
          auto Stages = ctpipe::partition<Model, Table.stages()>()>
using sim_executor =
    ctpipe::nccl::basic_executor<Table, Model, Stages, device::sim_loss_for<Model>, sim::backend, sim::nccl::net, D>;

// Trains `steps` steps of D = `replicas` replicas, the reference's each followed by the sweep's
// update (clipped AdamW, test::sweep_rule) through ctpipe::optimizer, each process's steps ending
// with the same update of its layers on its device (ctpipe::cuda::device_optimizer, captured with a
// graph step; the norm's terms summed in the step's all-reduce of the losses); every step's losses
// of the global batch (on every process), every process's update (norm, scale), each process's
// gradients as the update leaves them, its parameters and at the end its optimizer's state must be
// the reference's: each replica's microbatches summed in order, the replicas' sums added in replica
// order (a bidirectional table: each replica's two pipelines' halves first, test::reference_step).
// A model over tokens takes mixed extents, different every step (every process of a replica gives
// its own).
// Record: the last step is recorded (record_steps; every process at once, on threads of their own:
// it is collective) and checked on process 0 (every task of every process once, in order, each
// receive after its send within the stated error).
template <class Executor, class Model, bool Record = false>
void train_against_sequential(unsigned seed, ctpipe::cuda::launch how, int replicas = 1, int steps = 3) {
  constexpr int p = Executor::ranks, m = Executor::microbatches;
  const int processes = p * replicas;
  sim::world::get().reset(seed, processes);
  sim::nccl::state::get().reset();
  const std::vector<sim::nccl::handle*> world = sim::nccl::make_world(processes);
  using host_t = device::host_model_t<Model>;
  using host_input = typename host_t::input_type;
  constexpr bool tokens = Model::token_capacity > 0;
  host_t seq = test::make_mlp<host_t>();
  test::loss_for<host_t> l;
  const auto d = test::make_data<host_input>(m * replicas);
  {
    std::vector<Model> models;
    for (int q = 0; q < processes; ++q) models.push_back(device::make_mlp<Model>());
    std::vector<device::sim_loss_for<Model>> losses(static_cast<std::size_t>(processes));
    std::vector<std::unique_ptr<device::basic_device_data<typename Model::input_type>>> data;
    std::vector<std::unique_ptr<Executor>> exec;
    for (int q = 0; q < processes; ++q) {
      const auto first = static_cast<std::ptrdiff_t>(q % replicas * m);
      test::basic_data_set<host_input> mine;
      mine.inputs.assign(d.inputs.begin() + first, d.inputs.begin() + first + m);
      mine.targets.assign(d.targets.begin() + first, d.targets.begin() + first + m);
      data.push_back(std::make_unique<device::basic_device_data<typename Model::input_type>>(mine, q, q));
      exec.push_back(std::make_unique<Executor>(
          models[static_cast<std::size_t>(q)], losses[static_cast<std::size_t>(q)],
          ctpipe::nccl::job<sim::nccl::net>{world[static_cast<std::size_t>(q)], q, processes, q}));
      REQUIRE(exec.back()->replicas() == replicas);
    }
    sim::nccl::check_splits(*world[0]->comm);
    ctpipe::optimizer ref(seq, test::sweep_rule, test::sweep_clip);
    std::vector<std::unique_ptr<ctpipe::cuda::device_optimizer<Executor, ctpipe::adamw>>> opts;
    for (int q = 0; q < processes; ++q)
      opts.push_back(std::make_unique<ctpipe::cuda::device_optimizer<Executor, ctpipe::adamw>>(
          *exec[static_cast<std::size_t>(q)], test::sweep_rule, test::sweep_clip));
    int clipped = 0;
    for (int step = 0; step < steps; ++step) {
      // The global batch's extents (replica r's microbatch i at r x m + i).
      const std::vector<int> e =
          tokens ? test::extents(m * replicas, static_cast<std::uint64_t>(step)) : std::vector<int>{};
      const std::vector<double> want = test::reference_step(seq, l, d, replicas, m, static_cast<std::uint64_t>(step), e,
                                                            ctpipe::directions_of(Executor::plan.table));
      const auto enqueue = [&](int q) {
        Executor& x = *exec[static_cast<std::size_t>(q)];
        if constexpr (tokens)
          x.enqueue(
              data[static_cast<std::size_t>(q)]->inputs, data[static_cast<std::size_t>(q)]->targets,
              std::span<const int>(e).subspan(static_cast<std::size_t>(q % replicas * m), static_cast<std::size_t>(m)),
              how);
        else
          x.enqueue(data[static_cast<std::size_t>(q)]->inputs, data[static_cast<std::size_t>(q)]->targets, how);
      };
      const bool recorded = Record && step == steps - 1;
      std::vector<std::vector<double>> recorded_losses(static_cast<std::size_t>(processes));
      if (recorded) {
        on_every_process(processes, [&](int q) {
          Executor& x = *exec[static_cast<std::size_t>(q)];
          x.record_steps(true);
          enqueue(q);
          const auto got = x.wait();
          recorded_losses[static_cast<std::size_t>(q)].assign(got.begin(), got.end());
          x.record_steps(false);
        });
      } else {
        for (int q = 0; q < processes; ++q) enqueue(q);
      }
      const ctpipe::update_result want_update = ref.step();
      for (int q = 0; q < processes; ++q) {
        CAPTURE(q);
        Executor& x = *exec[static_cast<std::size_t>(q)];
        const auto got = recorded ? std::span<const double>(recorded_losses[static_cast<std::size_t>(q)]) : x.wait();
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == want[i]);
        if constexpr (tokens) REQUIRE(std::ranges::equal(x.tokens(), e));
        test::same_update(want_update, opts[static_cast<std::size_t>(q)]->result(), clipped);
        // (the gradients as each update left them: clipped where it clipped)
        REQUIRE(test::bitwise_equal(test::rank_values<Executor::stages, Executor::plan.table>(seq, x.rank(), true),
                                    test::rank_values<Executor::stages, Executor::plan.table>(
                                        models[static_cast<std::size_t>(q)], x.rank(), true)));
      }
    }
    CHECK(clipped > 0);
    if constexpr (Record) {
      const Executor& x = *exec[0];
      for (int r = 0; r < replicas; ++r)
        test::check_record(Executor::plan.table, x.recorded_step(r), x.recorded_alignment_error());
      for (int q = 1; q < processes; ++q) CHECK(exec[static_cast<std::size_t>(q)]->recorded_step(0).ranks.empty());
    }
    for (int q = 0; q < processes; ++q) {
      CAPTURE(q);
      const Executor& x = *exec[static_cast<std::size_t>(q)];
      REQUIRE(device::same_state(ref, *opts[static_cast<std::size_t>(q)],
                                 [&](std::size_t k) { return x.updates_layer(k); }));
    }
    // Forward only, on the trained parameters (collective: each process on a thread of its own):
    // every process gets the global batch's losses, and its replica's outputs on its own device
    // (broadcast by the process of the replica that ran the last stage), bitwise the sequential
    // forward pass's; no gradient touched, no step counted.
    {
      const auto s = static_cast<std::uint64_t>(steps);
      const std::vector<int> e = tokens ? test::extents(m * replicas, s) : std::vector<int>{};
      std::vector<double> want(d.inputs.size());
      ctpipe::sequential_evaluate(seq, l, std::span<const host_input>(d.inputs), std::span(d.targets),
                                  std::span<const int>(e), std::span<double>(want), {s, 0});
      using host_output = typename host_t::output_type;
      using output = typename Executor::output_type;
      static_assert(sizeof(host_output{}.v) == output::bytes);
      std::vector<host_output> want_out(d.inputs.size());
      ctpipe::sequential_predict(seq, std::span<const host_input>(d.inputs), std::span<const int>(e),
                                 std::span<host_output>(want_out), {s, 0});
      std::deque<sim::buffer> memory;
      std::vector<std::vector<output>> outs(static_cast<std::size_t>(processes));
      std::vector<std::vector<float>> grads;
      for (int q = 0; q < processes; ++q) {
        const sim::buffer& b = memory.emplace_back(static_cast<std::size_t>(m) * output::bytes, q);
        std::memset(b.p, 0x7f, static_cast<std::size_t>(m) * output::bytes);  // (every process must get each)
        for (int i = 0; i < m; ++i)
          outs[static_cast<std::size_t>(q)].push_back({b.as<float>() + static_cast<std::size_t>(i) * output::size});
        grads.push_back(test::rank_values<Executor::stages, Executor::plan.table>(
            models[static_cast<std::size_t>(q)], exec[static_cast<std::size_t>(q)]->rank(), true));
      }
      std::vector<std::vector<double>> got(static_cast<std::size_t>(processes));  // (copied: predict reuses the buffer)
      std::vector<std::vector<int>> got_tokens(static_cast<std::size_t>(processes));
      on_every_process(processes, [&](int q) {
        const auto u = static_cast<std::size_t>(q);
        Executor& x = *exec[u];
        const auto own = tokens ? std::span<const int>(e).subspan(static_cast<std::size_t>(q % replicas * m),
                                                                  static_cast<std::size_t>(m))
                                : std::span<const int>{};
        if constexpr (tokens) {
          const ctpipe::token_losses r = x.evaluate(data[u]->inputs, data[u]->targets, own);
          got[u].assign(r.losses.begin(), r.losses.end());
          got_tokens[u].assign(r.tokens.begin(), r.tokens.end());
          x.predict(data[u]->inputs, outs[u], own);
        } else {
          const std::span<const double> r = x.evaluate(data[u]->inputs, data[u]->targets);
          got[u].assign(r.begin(), r.end());
          x.predict(data[u]->inputs, outs[u]);
        }
      });
      for (int q = 0; q < processes; ++q) {
        CAPTURE(q);
        const auto u = static_cast<std::size_t>(q);
        REQUIRE(got[u] == want);
        if constexpr (tokens) REQUIRE(got_tokens[u] == e);
        for (int i = 0; i < m; ++i) {
          CAPTURE(i);
          REQUIRE(std::memcmp(want_out[static_cast<std::size_t>(q % replicas * m + i)].v.data(),
                              outs[u][static_cast<std::size_t>(i)].data, output::bytes) == 0);
        }
        REQUIRE(test::bitwise_equal(
            grads[u], test::rank_values<Executor::stages, Executor::plan.table>(models[u], exec[u]->rank(), true)));
        REQUIRE(exec[u]->context_origin().step == s);
      }
    }
    for (int q = 0; q < processes; ++q) {
      Executor& e = *exec[static_cast<std::size_t>(q)];
      CHECK(test::bitwise_equal(test::rank_values<Executor::stages, Executor::plan.table>(seq, e.rank(), false),
                                test::rank_values<Executor::stages, Executor::plan.table>(
                                    models[static_cast<std::size_t>(q)], e.rank(), false)));
      if (how == ctpipe::cuda::launch::graph) CHECK(e.graph_captures() == 1);
    }
  }
  INFO((sim::nccl::state::get().violations.empty() ? std::string() : sim::nccl::state::get().violations[0]));
  CHECK(sim::nccl::state::get().violations.empty());
  INFO((sim::world::get().wrong_device_work.empty() ? std::string() : sim::world::get().wrong_device_work[0]));
  CHECK(sim::world::get().wrong_device_work.empty());
  CHECK(sim::world::get().live_allocations == 0);  // the data sets' and every executor's, freed
}

// Three interleavings each, eager and graph steps. A graph model (the block MLP, by default) is
// split into stages of equal layer counts, its table built with its crossings (sim_numerics.hpp).
// Record: each run's last step recorded (train_against_sequential).
template <auto S, class Model = device::token_block_mlp, ctpipe::dispatch D = ctpipe::dispatch::automatic,
          bool Record = false>
void every_way(int replicas = 1) {
  constexpr auto table = device::sweep_table<S, Model>();
  using exec_t = sim_executor<table, Model, D, device::sweep_stages<S, Model>()>;
  for (unsigned seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    train_against_sequential<exec_t, Model, Record>(seed, ctpipe::cuda::launch::eager, replicas);
    train_against_sequential<exec_t, Model, Record>(seed, ctpipe::cuda::launch::graph, replicas);
  }
}

}  // namespace test::nccl
