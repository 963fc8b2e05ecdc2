// The host executor: rank 0 on the thread that calls step(), a persistent thread for each other
// rank, each running its rank's program from the table, expanded at compile time (unrolled, or an
// inlined walk over a constexpr array: see ctpipe::dispatch). At every call site the op and stage
// are constants, and the microbatch and buffer slots too when unrolled: no interpreter, no virtual
// call, no std::function, no lock, no allocation per step. Ranks hand values over through bounded single-producer
// single-consumer channels, one per stage boundary and direction, whose capacities come from the table's analysis.
//
//   constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
//   constexpr auto stages = ctpipe::partition<net, 4>();
//   ctpipe::host_executor<table, net, stages, loss> exec(model, loss);
//   auto losses = exec.step(inputs, targets);   // gradients now in the model's layers
//   auto eval = exec.evaluate(inputs, targets); // forward only: the losses, no gradients
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/face.hpp>
#include <ctpipe/exec/detail/forward_pass.hpp>
#include <ctpipe/exec/detail/host_compute.hpp>
#include <ctpipe/exec/detail/host_engine.hpp>
#include <ctpipe/exec/detail/rank_threads.hpp>
#include <ctpipe/exec/detail/shape.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>
#include <ctpipe/model/extent.hpp>
#include <ctpipe/model/partition.hpp>

namespace ctpipe {

namespace detail {
/// The host executor, for the rules it keeps (executor_requirements) and its messages.
struct host_executor_tag {
  static constexpr std::string_view name = "ctpipe::host_executor";
  static constexpr layer_kind layers = layer_kind::host;
  static constexpr bool frozen_prefix = true, recompute = true, copies_layers = false, sends_bytes = false,
                        graphs = true, shared_parameters = true, bidirectional = true, mirror_copies = true;
};
}  // namespace detail

/// Runs Table (a compute or lowered task table, verified at compile time) over Model's layers split
/// into stages by Stages (a stage_plan with Table.stages() stages), with loss Loss after the last layer.
/// Rank 0 runs on the thread that calls step(); ranks 1..p-1 on threads of their own. Dispatch picks
/// how each rank's program becomes code (see ctpipe::dispatch); both give the same results.
template <auto Table, model_type Model, auto Stages, class Loss, dispatch Dispatch = dispatch::automatic>
class host_executor : public detail::executor_shape<detail::host_executor_tag, Table, Model, Stages, Loss>,
                      public detail::executor_face<host_executor<Table, Model, Stages, Loss, Dispatch>,
                                                   "ctpipe::host_executor", Model, Loss> {
  using shape = detail::executor_shape<detail::host_executor_tag, Table, Model, Stages, Loss>;
  friend detail::executor_face<host_executor, "ctpipe::host_executor", Model, Loss>;

 public:
  using shape::plan, shape::table, shape::ranks, shape::stage_count, shape::stages, shape::microbatches;
  using input_type = typename shape::input_type;
  using output_type = typename shape::output_type;
  using target_type = typename shape::target_type;
  /// The forward-only table evaluate() and predict() run: each rank's F ops of `table`, in its
  /// order, with the same stages on the same ranks (make_forward_table).
  static constexpr auto forward_table = make_forward_table<plan.table>();
  /// The strategy in use: dispatch::automatic unrolls where every rank's program has at most
  /// ctpipe::automatic_unroll_limit tasks.
  static constexpr dispatch dispatch_strategy =
      resolve_dispatch(Dispatch, detail::ix(shape::longest_program), automatic_unroll_limit);

 private:
  static constexpr auto layout = shape::layout;
  using engine_t = detail::engine<detail::host_executor_tag, Model, stages, Loss, layout>;

 public:
  /// Starts one thread for each rank but rank 0. The model and the loss must outlive the executor.
  /// (The destructor stops and joins them; it never blocks on a rank.) Where layers share parameters
  /// (ctpipe::shared_with), starts their copies equal (tie_parameters); throws std::invalid_argument
  /// where two layers on different ranks hold overlapping parameters (a buffer shared by hand).
  explicit host_executor(Model& model, Loss& loss) : loss_(loss), engine_(checked(model), loss) {
    engine_.start([this]<int R>() { this->template run_rank<R>(); });
  }

  // step, evaluate and predict (with extents too): detail::executor_face. Rank 0 runs on the
  // thread that calls them; evaluate and predict start the forward pass's own threads and buffers
  // at the first call.

  /// The tensor bytes the last step's messages carried between ranks (with extents, only the tokens
  /// each microbatch used). Between steps.
  std::size_t sent_bytes() const noexcept { return engine_->sent_bytes(); }

  Model& model() noexcept { return engine_->model(); }

  /// Where the steps that follow stand for the layers that take a context (ctpipe::context): the
  /// next step's number (from 0 at construction, one up per step) and the global index of
  /// microbatch 0 (0; a data-parallel replica r of m microbatches: r x m). Between steps.
  void set_context_origin(step_origin o) noexcept { engine_->set_context_origin(o); }
  step_origin context_origin() const noexcept { return engine_->context_origin(); }

  /// Where the stage plan freezes a prefix of layers (freeze_partition: stages.frozen() > 0), the
  /// tensor that prefix gives the first stage.
  using prefix_type = typename engine_t::prefix_type;
  /// The frozen prefix's cache, for the steps that follow: for microbatch i, `in[i]` (if not null)
  /// is used instead of running the prefix, and the prefix's output is copied to `out[i]` (if not
  /// null). Each span empty, or of `microbatches` pointers; both empty: no cache. The pointers and
  /// their tensors must stay valid while steps use them. Call it between steps.
  void use_prefix_cache(std::span<const prefix_type* const> in, std::span<prefix_type* const> out) {
    if ((!in.empty() && in.size() != detail::ix(microbatches)) ||
        (!out.empty() && out.size() != detail::ix(microbatches)))
      throw std::invalid_argument("ctpipe::host_executor::use_prefix_cache: give no pointers or one per microbatch (" +
                                  std::to_string(microbatches) + ")");
    engine_->set_prefix_cache(in.empty() ? nullptr : in.data(), out.empty() ? nullptr : out.data());
  }

  /// Records the start and end of every task of the steps that follow, until record_steps(false),
  /// which keeps the last recording for recorded_step(). Off by default; off, a step runs exactly
  /// the code it runs without this (one test per rank and step). Recording walks the table
  /// (dispatch::table_walk) and reads the clock around each task. Allocates the first time, once;
  /// call it between steps.
  void record_steps(bool on) {
    if (on && !recorder_) {
      auto r = std::make_unique<recorder>();
      r->step.ranks.resize(detail::ix(ranks));
      for (int k = 0; k < ranks; ++k) r->step.ranks[detail::ix(k)].resize(detail::ix(plan.table.length[detail::ix(k)]));
      recorder_ = std::move(r);
    }
    recorded_ = on ? &run_recorded : nullptr;
  }
  /// The last step recorded: per rank, per position of `table` (the lowered table the executor runs),
  /// its task's start and end in seconds from the step's start (-1 for a task that did not end: a
  /// step that failed); kept after record_steps(false) until the next recorded step. Empty where no
  /// step was recorded. Compare it with the table: compare_measured, measured_svg, measured_trace.
  const measured_step& recorded_step() const noexcept {
    static const measured_step none{};
    return recorder_ ? recorder_->step : none;
  }

  /// Bytes of activation storage each rank holds: stash slots x the stage's stashed tensors (with
  /// split backward, plus the gradients an I keeps for its W), plus one full set of tensors per
  /// recomputing stage (sizeof only: tensors that own heap memory count
  /// their handles). Allocated once, at construction; it is the step's peak.
  static constexpr std::array<std::size_t, detail::ix(ranks)> activation_bytes() {
    std::array<std::size_t, detail::ix(ranks)> b{};
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      ((b[detail::ix(plan.table.stage_rank[S])] += engine_t::template stage_activation_bytes<static_cast<int>(S)>()),
       ...);
    }
    (std::make_index_sequence<detail::ix(stage_count)>{});
    return b;
  }

 private:
  static Model& checked(Model& m) {
    detail::check_shared_parameters(m, detail::host_executor_tag::name,
                                    [](int k) { return detail::rank_of_layer<stages>(plan.table.stage_rank, k); });
    tie_parameters(m);
    return m;
  }

  token_losses run_step(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                        std::span<const int> extents) {
    detail::check_microbatches(who, inputs.size(), targets.size(), microbatches);
    detail::check_extents(who, extents, inputs.size(), Model::token_capacity);
    if (recorded_ != nullptr) [[unlikely]] {
      for (auto& row : recorder_->step.ranks) std::fill(row.begin(), row.end(), measured_task{});
      recorder_->t0 = clock::now();
    }
    engine_->begin_step(inputs, targets, true, true, extents.empty() ? nullptr : extents.data());
    run_rank<0>();
    const std::span<const double> losses = engine_->end_step();
    return {losses, engine_->tokens()};
  }

  // The forward-only pass, at the training steps run so far.
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<output_type> outputs, std::span<const int> extents) {
    return forward_.run(engine_->model(), loss_, who, inputs, targets, outputs, extents, engine_->context_origin());
  }

  template <int R>
  void run_rank() noexcept {
    try {
      engine_->template begin_rank<R>();
      // The engine's address, once, in a local: every task then reaches its buffers at a constant
      // offset from it, with nothing to reload after a task's user code has run.
      if (recorded_ != nullptr) [[unlikely]] {
        recorded_(*this, R);
      } else {
        runner<R> run{*engine_};
        detail::run_program<program<R>, dispatch_strategy>(run);
      }
    } catch (const detail::aborted&) {
    }
  }

  // Rank R's program, run by the core (unrolled or walked) on this runner: each task is one inlined
  // call of the engine's code for its op and stage.
  template <int R>
  static constexpr auto program = detail::make_rank_program<plan, R>();
  template <int R>
  struct runner {
    engine_t& en;
    template <detail::task_code C, class A>
    void run(const A& a, std::size_t i) {
      en.template run_task<R, C.op, C.stage, C.other>(a);
      shared_sums<R, C>(en, i);
    }
  };

  // The same, with each task's start and end written to `out` (record_steps), over the table walk.
  // Reached through a pointer that record_steps sets, so that only a program that records compiles
  // it (unused, it had cost each executor about 9 of the 53 MiB it took to compile, g++ -O2).
  using clock = std::chrono::steady_clock;
  static void run_recorded(host_executor& x, int rank) {
    [&]<int... R>(std::integer_sequence<int, R...>) {
      ((rank == R ? detail::run_program<program<R>, dispatch::table_walk>(
                        recording_runner<R>{*x.engine_, x.recorder_->step.ranks[detail::ix(R)].data(), x.recorder_->t0})
                  : void()),
       ...);
    }
    (std::make_integer_sequence<int, ranks>{});
  }
  template <int R>
  struct recording_runner {
    engine_t& en;
    measured_task* out;
    clock::time_point t0;
    template <detail::task_code C, class A>
    void run(const A& a, std::size_t i) {
      out[i].start = std::chrono::duration<double>(clock::now() - t0).count();
      en.template run_task<R, C.op, C.stage, C.other>(a);
      shared_sums<R, C>(en, i);
      out[i].end = std::chrono::duration<double>(clock::now() - t0).count();
    }
  };
  // After task i of rank R (C: its code), the sums it lets start (exec/detail/shared_sums.hpp): a
  // bidirectional table's mirrors, then the shared groups it finishes on R.
  template <int R, detail::task_code C>
  static void shared_sums(engine_t& en, std::size_t i) noexcept {
    constexpr bool mirrored = layout.chain_length != stage_count;  // (a lambda of g++ 12 does not see stage_count)
    detail::after_task<plan, Model, stages, R, C>(
        static_cast<std::ptrdiff_t>(i),
        [&](auto s) {
          if constexpr (mirrored) en.template mirror_arrive<s % layout.chain_length>();
        },
        [&](auto g) { en.template arrive<g>(); });
  }
  struct recorder {
    measured_step step;
    clock::time_point t0{};
  };

  std::unique_ptr<recorder> recorder_;               // the last recording, kept
  void (*recorded_)(host_executor&, int) = nullptr;  // run_recorded while steps are recorded (into recorder_)
  Loss& loss_;
  detail::running_engine<engine_t, ranks> engine_;  // its threads end before the rest goes
  // evaluate() and predict(): last, its threads end first.
  detail::forward_pass<detail::host_executor_tag, forward_table, Model, stages, Loss, shape::model_stages, Dispatch>
      forward_;
};

/// Deduces Model and Loss: make_host_executor<table, stages>(model, loss).
template <auto Table, auto Stages, model_type Model, class Loss>
auto make_host_executor(Model& model, Loss& loss) {
  return std::make_unique<host_executor<Table, Model, Stages, Loss>>(model, loss);
}

}  // namespace ctpipe
