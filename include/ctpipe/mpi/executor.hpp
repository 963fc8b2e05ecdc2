// The MPI executor: one process per pipeline rank, times D data-parallel replicas, launched by
// mpirun (or srun, or any MPI launcher) as ranks x D processes of one program. Each process learns
// its place from the communicator (ctpipe/mpi/grid.hpp), picks its rank's program once, at
// construction, and runs it as the host executor runs a rank: expanded at compile time, with the
// shared host compute (exec/detail/host_compute.hpp), buffers allocated once. A tensor crosses a
// rank boundary as one MPI message, sent and received in the table's proven order:
//  - receives are posted ahead into a ring of as many slots as the table's analysis proves messages
//    in flight on that boundary: the first ones as the step begins, each next one as soon as the
//    message before it in its slot is consumed (so that a message finds its receive waiting); a
//    RECV task, just before its consumer, waits for its message;
//  - an activation leaves in place, from its stash slot, where the table proves the slot is not
//    written before the send completes (mpi/detail/engine.hpp: sends_in_place); a chain's gradient
//    from its stage's gradient buffer, which the stage's next B or I waits for before writing it
//    (gradients_in_place); any other tensor (with extents, a graph's) is copied into a slot of such
//    a ring; the send is MPI_Isend (MPI_Issend with options::synchronous_sends), which waits for the
//    send that used the slot before, never for MPI to buffer anything;
//  - activations and gradients of boundary b travel with tags 2b and 2b + 1: two FIFOs per pair.
// With D > 1, each stage's gradients are summed across its D replicas (MPI_Iallreduce, in place,
// one per layer with parameters), started as soon as the stage's last backward of the step has
// run, overlapped with the rest of the step; step() returns when all have finished.
//
//   MPI_Init(&argc, &argv);
//   constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 8)>();
//   ctpipe::mpi::executor<table, net, ctpipe::partition<net, 2>(), loss> exec(model, l);
//   auto losses = exec.step(inputs, targets);  // this replica's microbatches; the global batch's losses
//   ctpipe::sgd_step(model, rate);             // this process's stages now hold the replicas' sum
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/face.hpp>
#include <ctpipe/exec/detail/hang_record.hpp>  // set_record_pass
#include <ctpipe/exec/detail/host_compute.hpp>
#include <ctpipe/exec/detail/layer_holders.hpp>
#include <ctpipe/exec/detail/shape.hpp>
#include <ctpipe/model/extent.hpp>
#include <ctpipe/model/partition.hpp>
#include <ctpipe/mpi/detail/engine.hpp>
#include <ctpipe/mpi/detail/fingerprint.hpp>
#include <ctpipe/mpi/detail/recorder.hpp>
#include <ctpipe/mpi/detail/session.hpp>
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi {

/// Runs Table (a compute or lowered task table, verified at compile time) over Model's layers split
/// into stages by Stages, with loss Loss, as one process per rank per replica of the communicator
/// (ranks x D processes; see ctpipe/mpi/grid.hpp for who runs what). Host layers and tensors;
/// tensors that cross a rank boundary are sent as bytes, so they must be trivially copyable.
template <auto Table, model_type Model, auto Stages, class Loss, dispatch Dispatch = dispatch::automatic>
class executor : public ctpipe::detail::executor_shape<detail::executor_tag, Table, Model, Stages, Loss>,
                 public ctpipe::detail::executor_face<executor<Table, Model, Stages, Loss, Dispatch>,
                                                      "ctpipe::mpi::executor", Model, Loss> {
  using shape = ctpipe::detail::executor_shape<detail::executor_tag, Table, Model, Stages, Loss>;
  friend ctpipe::detail::executor_face<executor, "ctpipe::mpi::executor", Model, Loss>;

 public:
  using shape::plan, shape::table, shape::ranks, shape::stage_count, shape::stages, shape::microbatches;
  using input_type = typename shape::input_type;
  using output_type = typename shape::output_type;
  using target_type = typename shape::target_type;
  /// The forward-only table evaluate() and predict() run (as host_executor::forward_table).
  static constexpr auto forward_table = make_forward_table<plan.table>();
  static constexpr dispatch dispatch_strategy =
      resolve_dispatch(Dispatch, ctpipe::detail::ix(shape::longest_program), automatic_unroll_limit);

  static_assert(detail::tag_room<stage_count>::value);

  /// Collective over `comm` (every process constructs its executor): checks the launch (throws
  /// launch_error on every process), then sets up this process's rank: its buffers, allocated once.
  /// The model and the loss must outlive the executor; MPI must be initialised, and stay so.
  executor(Model& model, Loss& loss, MPI_Comm comm = MPI_COMM_WORLD, options o = {}) {
    ctpipe::detail::check_shared_parameters(model, detail::executor_tag::name, [](int k) {
      return ctpipe::detail::rank_of_layer<stages>(plan.table.stage_rank, k);
    });
    held_.session = std::make_unique<mpi::detail::session>(comm, ranks, o, fingerprint());
    ctpipe::detail::with_index<ctpipe::detail::ix(ranks)>(ctpipe::detail::ix(held_.session->where().rank), [&](auto r) {
      held_.program = std::make_unique<rank_program<static_cast<int>(decltype(r)::value)>>(model, loss, *held_.session);
    });
  }

  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  // step, evaluate and predict (with extents too): detail::executor_face, each collective (every
  // process calls it, with its replica's microbatches; only the ranks holding the first and last
  // stage read them). A step zeroes the gradients of this process's layers, runs its rank's
  // program, and with D > 1 sums each stage's gradients across the replicas. step and evaluate
  // return the global batch's losses (and tokens) on every process: D x microbatches, replica d's
  // microbatch i at d x microbatches + i. With extents, the first stage's process reads them and
  // each message carries its microbatch's extent on (packed: a header, then only the used
  // tokens). predict gives this replica's outputs on every process of the replica (the processes
  // of the last stages send them on: one all-reduce of the outputs' bytes within the replica). A
  // task that throws ends the call on every process: with task_failure where it failed,
  // peer_failure elsewhere (both name the rank, replica, stage, microbatch and op); the executor
  // stays usable. A peer that does not answer within options::timeout ends it with
  // timeout_error, after which the program should end. The first evaluate or predict sets up the
  // pass's own buffers.

  /// The tensor bytes this process's messages carried in the last step (with extents, only the
  /// tokens each microbatch used; each message adds an 8-byte header).
  std::size_t sent_bytes() const { return held_.program->sent_bytes(); }

  /// Where the steps that follow stand for the layers that take a context (ctpipe::context): the
  /// next step's number (from 0, one up per step) and the global index of replica 0's microbatch 0
  /// (replica d's microbatch i is first_microbatch + d x microbatches + i). Between steps, on every
  /// process alike.
  void set_context_origin(step_origin o) { held_.program->set_context_origin(o); }
  step_origin context_origin() const { return held_.program->context_origin(); }

  /// Records the start and end of every task of the training steps that follow, on every process,
  /// until record_steps(false) (which keeps the last recording). Collective: every process calls it
  /// alike, between steps. Off by default; off, a step runs the code it runs without this (one test
  /// per step). A recorded step walks the table (dispatch::table_walk), reads the clock around each
  /// task, aligns every process's clock with process 0's as it starts (a few barriers, each timed
  /// on every process: exec/detail/process_times.hpp) and gathers the times to process 0 as it
  /// ends. Allocates the first time, once.
  void record_steps(bool on) {
    ctpipe::detail::with_index<ctpipe::detail::ix(ranks)>(ctpipe::detail::ix(rank()), [&](auto r) {
      static_cast<rank_program<static_cast<int>(decltype(r)::value)>&>(*held_.program).record(on);
    });
  }
  /// On process 0: replica `replica`'s pipeline in the last recorded step, per rank, per position
  /// of `table` (the lowered table the executor runs), each task's start and end in seconds from
  /// the step's start on the first process to start it, on process 0's clock (as
  /// host_executor::recorded_step: compare_measured, measured_svg, measured_trace, `ctpipe
  /// compare`). Empty on the other processes, and where no step was recorded; a failed step is not
  /// gathered (the last good one stays).
  const measured_step& recorded_step(int replica = 0) const {
    static const measured_step none{};
    const mpi::detail::step_recorder* r = held_.program->recorder();
    return r ? r->step(replica) : none;
  }
  /// On process 0: how far two processes' times in the recorded step may be off one another
  /// (seconds: twice the widest bound of a clock's offset from process 0's); 0 elsewhere.
  double recorded_alignment_error() const {
    const mpi::detail::step_recorder* r = held_.program->recorder();
    return r ? r->alignment_error() : 0.0;
  }

  /// This process's place: its pipeline rank, replica, and the grid's size.
  const place& where() const noexcept { return held_.session->where(); }
  int rank() const noexcept { return where().rank; }
  int replica() const noexcept { return where().replica; }
  int replicas() const noexcept { return where().replicas; }

  /// For ctpipe::optimizer (a parameter_place): `ctpipe::optimizer opt(model, exec, rule, clip)`
  /// updates the layers this process runs (its rank's stages; with a bidirectional table, both of
  /// its model stages' copies), and counts each layer's gradient in the global norm once: on
  /// replica 0, at the process of the rank that runs the layer's stage in the first pipeline.
  bool updates_layer(std::size_t k) const noexcept {
    return ctpipe::detail::rank_runs_layer<plan, stages>(rank(), k, Model::size);
  }
  bool counts_layer(std::size_t k) const noexcept {
    return ctpipe::detail::rank_counts_layer<plan, stages>(rank(), replica(), k, Model::size);
  }
  /// Each element summed over every process (collective: every process calls it at once).
  void sum_norm_terms(std::span<double> terms) const { held_.session->sum_terms(terms); }
  /// Process 0 leads (writes a checkpoint's header, renames the file).
  bool leads() const noexcept { return where().process == 0; }

  /// Bytes of activation storage each rank's process holds (as host_executor::activation_bytes).
  static constexpr std::array<std::size_t, ctpipe::detail::ix(ranks)> activation_bytes() {
    std::array<std::size_t, ctpipe::detail::ix(ranks)> b{};
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      ((b[ctpipe::detail::ix(plan.table.stage_rank[S])] +=
        engine_t<plan.table.stage_rank[S]>::template stage_activation_bytes<static_cast<int>(S)>()),
       ...);
    }
    (std::make_index_sequence<ctpipe::detail::ix(stage_count)>{});
    return b;
  }

  /// What every process of one job must agree on: the table, the stage plan, recomputation and the
  /// boundary tensors' sizes (checked at construction).
  static constexpr std::uint64_t fingerprint() {
    using kinds = ctpipe::detail::stage_kinds<Model, stages>;
    constexpr auto bytes = []<std::size_t... B>(std::index_sequence<B...>) {
      return std::array<std::uint64_t, sizeof...(B) + 1>{
          sizeof(typename kinds::template forward_message<static_cast<int>(B)>) +
              sizeof(typename kinds::template backward_message<static_cast<int>(B)>) + Model::token_capacity...,
          0};
    }
    (std::make_index_sequence<ctpipe::detail::ix(plan.chain_length > 1 ? plan.chain_length - 1 : 0)>{});
    return mpi::detail::fingerprint_of<plan, stages>([&](int b) { return bytes[ctpipe::detail::ix(b)]; });
  }

 private:
  static constexpr auto layout = shape::layout;
  template <int R>
  using engine_t = mpi::detail::engine<Model, stages, Loss, layout, R>;
  template <int R>
  static constexpr auto program = ctpipe::detail::make_rank_program<plan, R>();
  // The forward-only pass: its own plan and buffers, made at the first evaluate() or predict().
  static constexpr auto forward_plan = make_execution_plan<forward_table>();
  template <int R>
  using forward_engine_t =
      mpi::detail::engine<Model, stages, Loss, ctpipe::detail::stage_layout_of(forward_plan, shape::model_stages), R>;
  template <int R>
  static constexpr auto forward_program = ctpipe::detail::make_rank_program<forward_plan, R>();
  static constexpr dispatch forward_dispatch = resolve_dispatch(
      Dispatch, ctpipe::detail::ix(*std::ranges::max_element(forward_plan.table.length)), automatic_unroll_limit);

  token_losses run_step(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                        std::span<const int> extents) {
    ctpipe::detail::check_microbatches(who, inputs.size(), targets.size(), microbatches);
    ctpipe::detail::check_extents(who, extents, inputs.size(), Model::token_capacity);
    const std::span<const double> losses =
        held_.program->step(inputs, targets, extents.empty() ? nullptr : extents.data());
    return {losses, held_.program->tokens()};
  }
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<output_type> outputs, std::span<const int> extents) {
    const bool predicting = targets.empty();
    ctpipe::detail::check_microbatches(who, inputs.size(), predicting ? outputs.size() : targets.size(), microbatches,
                                       predicting ? "outputs" : "targets");
    ctpipe::detail::check_extents(who, extents, inputs.size(), Model::token_capacity);
    std::span<const double> losses;
    ctpipe::detail::with_index<ctpipe::detail::ix(ranks)>(ctpipe::detail::ix(rank()), [&](auto r) {
      constexpr int R = static_cast<int>(decltype(r)::value);
      auto& p = static_cast<rank_program<R>&>(*held_.program);
      losses = p.forward(inputs, targets, outputs, extents.empty() ? nullptr : extents.data());
    });
    if (predicting)
      held_.session->or_within_replica(std::as_writable_bytes(outputs), who);  // from the last stages' processes
    return {losses, held_.program->tokens()};
  }

  template <int R, class Engine = engine_t<R>>
  struct runner {
    Engine& en;
    template <ctpipe::detail::task_code C, class A>
    void run(const A& a, std::size_t index) {
      en.template run_task<C.op, C.stage, C.other>(a, index);
      ctpipe::detail::after_task<plan, Model, stages, R, C>(
          static_cast<std::ptrdiff_t>(index), [&](auto s) { en.template reduce<s>(); },
          [&](auto g) { en.template arrive<g>(); });
    }
  };

  // The same, with each task's start and end (record_steps).
  template <int R>
  struct recording_runner {
    engine_t<R>& en;
    mpi::detail::step_recorder& rec;
    template <ctpipe::detail::task_code C, class A>
    void run(const A& a, std::size_t index) {
      rec.start(index);
      runner<R>{en}.template run<C>(a, index);
      rec.end(index);
    }
  };

  template <int R>
  struct rank_program final : mpi::detail::rank_base<input_type, target_type, output_type> {
    std::unique_ptr<engine_t<R>> en;
    std::unique_ptr<forward_engine_t<R>> fwd;  // made at the first forward pass (forward: not virtual, so
                                               // that only an executor that evaluates compiles it)
    Model& model;
    Loss& loss;
    mpi::detail::session& s;
    int offset;                 // replica x microbatches: where this replica's microbatches start
    bool last_forward = false;  // the last pass was a forward-only one (whose tokens tokens() gives)
    std::unique_ptr<mpi::detail::step_recorder> rec;  // record_steps: made once, kept
    std::span<const double> (*recorded)(rank_program&, std::span<const input_type>, std::span<const target_type>,
                                        const int*) = nullptr;
    rank_program(Model& m, Loss& l, mpi::detail::session& sn)
        : en(std::make_unique<engine_t<R>>(m, l, sn)),
          model(m),
          loss(l),
          s(sn),
          offset(sn.where().replica * microbatches) {
      ctpipe::detail::set_record_pass<plan.table, R>(sn.record(), 0, table.params.name.view());
    }
    void set_context_origin(step_origin o) override { en->set_context_origin({o.step, o.first_microbatch + offset}); }
    step_origin context_origin() const override {
      const step_origin o = en->context_origin();
      return {o.step, o.first_microbatch - offset};
    }
    std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets,
                                 const int* extents) override {
      last_forward = false;
      if (recorded != nullptr) [[unlikely]]
        return recorded(*this, inputs, targets, extents);
      return en->step(inputs, targets, extents,
                      [this] { ctpipe::detail::run_program<program<R>, dispatch_strategy>(runner<R>{*en}); });
    }
    // Reached through a pointer that record() sets, so that only a program that records compiles it.
    static std::span<const double> run_recorded(rank_program& p, std::span<const input_type> inputs,
                                                std::span<const target_type> targets, const int* extents) {
      p.rec->begin(p.s);
      const std::span<const double> losses = p.en->step(inputs, targets, extents, [&p] {
        ctpipe::detail::run_program<program<R>, dispatch::table_walk>(recording_runner<R>{*p.en, *p.rec});
      });
      p.rec->gather(p.s);
      return losses;
    }
    void record(bool on) {
      if (on && !rec)
        rec = std::make_unique<mpi::detail::step_recorder>(
            s.where(), std::vector<int>(plan.table.length.begin(), plan.table.length.end()));
      recorded = on ? &run_recorded : nullptr;
    }
    const mpi::detail::step_recorder* recorder() const override { return rec.get(); }
    std::span<const double> forward(std::span<const input_type> inputs, std::span<const target_type> targets,
                                    std::span<output_type> outputs, const int* extents) {
      if (!fwd) {
        fwd = std::make_unique<forward_engine_t<R>>(model, loss, s);
        ctpipe::detail::set_record_pass<forward_plan.table, R>(s.record(), 1, table.params.name.view());
      }
      fwd->set_context_origin(en->context_origin());  // the training steps run so far
      std::fill(outputs.begin(), outputs.end(), output_type{});
      fwd->set_outputs(outputs.empty() ? nullptr : outputs.data());
      last_forward = true;
      return fwd->step(inputs, targets, extents, [this] {
        ctpipe::detail::run_program<forward_program<R>, forward_dispatch>(runner<R, forward_engine_t<R>>{*fwd});
      });
    }
    std::span<const int> tokens() const override { return last_forward ? fwd->global_tokens() : en->global_tokens(); }
    std::size_t sent_bytes() const override { return en->sent_bytes(); }
  };

  mpi::detail::held<mpi::detail::rank_base<input_type, target_type, output_type>> held_;
};

}  // namespace ctpipe::mpi
