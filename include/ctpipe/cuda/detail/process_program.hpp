// A rank's step for the executors of one process per rank on the CUDA engine in process mode (the
// NCCL executor, the MPI executor's device path): the rank's tasks in program order, each issued by
// the engine, and with data parallelism each stage's gradients handed to the transport's sums once
// its last B or W of the step has been issued. The program is built at compile time and run by the
// core (unrolled or walked), as every executor's is.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/detail/index.hpp>
#include <ctpipe/exec/detail/program.hpp>
#include <ctpipe/exec/detail/run.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>  // after_task
#include <ctpipe/exec/dispatch.hpp>
#include <ctpipe/model/layer.hpp>  // has_parameters
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe::cuda::detail {

template <auto ExecPlan, auto Issue, int R>
struct process_program {
  static constexpr bool mirrored = ExecPlan.chain_length != static_cast<int>(ExecPlan.table.stage_rank.size());
  static constexpr auto tasks = [] {
    constexpr auto n = ctpipe::detail::ix(ExecPlan.table.length[ctpipe::detail::ix(R)]);
    std::array<ctpipe::detail::program_task<device_args>, n> t{};
    for (std::size_t k = 0; k < n; ++k) {
      const task& x = ExecPlan.table.programs[ctpipe::detail::ix(R)][k];
      t[k] = {{R, x.op, x.stage, is_skip(x.op) ? x.other : -1}, Issue.args[ctpipe::detail::ix(R)][k]};
    }
    return t;
  }();
  static constexpr auto labels = [] {
    constexpr auto n = ctpipe::detail::ix(ExecPlan.table.length[ctpipe::detail::ix(R)]);
    std::array<label, n> l{};
    for (std::size_t k = 0; k < n; ++k) l[k] = make_label(ExecPlan.table.programs[ctpipe::detail::ix(R)][k]);
    return l;
  }();
  static constexpr auto program = ctpipe::detail::make_program<tasks>();

  // Issues each task; with `sums`, stage S's gradients go to tr.sum() after its last B or W (the
  // transport is told where on the rank's stream they are final: tr.sums_after()). A shared
  // group's members are summed once the rank's last B or W of them has been issued (the engine's
  // group_final), and only then, with `sums`, across the replicas. A bidirectional table's stage
  // copy is handed to the engine's mirror sums instead (mirror_final), which sum the replicas
  // after the two copies.
  template <auto Stages, class Engine, class Transport, class Model>
  struct runner {
    Engine& en;
    Transport& tr;
    Model& model;
    bool sums;
    template <ctpipe::detail::task_code C, class A>
    void run(const A& a, std::size_t i) {
      tr.enter(static_cast<int>(i));
      en.template issue_task<R, C.op, C.stage, C.other>(a, labels[i].text.data(), false);
      tr.entered(static_cast<int>(i), en.stream(R));
      ctpipe::detail::after_task<ExecPlan, Model, Stages, R, C>(
          static_cast<std::ptrdiff_t>(i),
          [&](auto s) {
            if constexpr (mirrored)
              en.template mirror_final<s>();
            else if (sums)
              sum_stage<s>();
          },
          [&](auto g) { en.template group_final<g>(); });
    }
    // Stage S's gradients, summed across the replicas: one sum per layer with parameters.
    template <int S>
    void sum_stage() {
      tr.sums_after(S, en.stream(R));
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (sum_layer<ctpipe::detail::ix(Stages.first[ctpipe::detail::ix(S)]) + K>(), ...);
      }
      (std::make_index_sequence<ctpipe::detail::ix(Stages.first[ctpipe::detail::ix(S) + 1] -
                                                   Stages.first[ctpipe::detail::ix(S)])>{});
    }
    template <std::size_t L>
    void sum_layer() {
      if constexpr (has_parameters<typename Model::template layer_type<L>> &&
                    ctpipe::detail::group_of<Model>(static_cast<int>(L)) < 0) {
        auto g = model.template layer<L>().gradients();
        tr.sum(g.data(), g.size());
      }
    }
  };

  /// Issues rank R's step (the engine's enqueue calls this between its start and its end).
  template <dispatch D, auto Stages, class Engine, class Transport, class Model>
  static void run(Engine& en, Transport& tr, Model& model, bool sums) {
    ctpipe::detail::run_program<program, D>(runner<Stages, Engine, Transport, Model>{en, tr, model, sums});
  }
  /// The same, each task between two timed events on the rank's stream (record_steps: Events is
  /// task_events), over the table walk.
  template <class Inner, class Events>
  struct recording_runner {
    Inner inner;
    const Events& events;
    template <ctpipe::detail::task_code C, class A>
    void run(const A& a, std::size_t i) {
      const auto s = inner.en.stream(R);
      events.start(R, i, s);
      inner.template run<C>(a, i);
      events.end(R, i, s);
    }
  };
  template <auto Stages, class Engine, class Transport, class Model, class Events>
  static void run_recorded(Engine& en, Transport& tr, Model& model, bool sums, const Events& events) {
    using inner = runner<Stages, Engine, Transport, Model>;
    events.begin(R, en.stream(R));
    ctpipe::detail::run_program<program, dispatch::table_walk>(
        recording_runner<inner, Events>{inner{en, tr, model, sums}, events});
  }
};

}  // namespace ctpipe::cuda::detail
