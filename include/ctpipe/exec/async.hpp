// The asynchronous executor: PipeDream's 1F1B with no flush between steps, on host threads (a
// thread per rank, as host_executor), with weight stashing or PipeDream-2BW (schedule/async.hpp).
//
//   constexpr auto schedule = ctpipe::pipedream_2bw(4, 8);      // or ctpipe::pipedream(4, 8)
//   constexpr auto stages = ctpipe::partition<net, 4>();
//   ctpipe::sgd opt{0.01};                                       // any opt(layer, parameters, gradients)
//   ctpipe::async_executor<schedule, net, stages, loss, ctpipe::sgd> exec(model, loss, opt);
//   for (...) losses = exec.step(inputs, targets);               // m microbatches; no flush
//   exec.finish();                                               // drains; newest weights into `model`
//
// The table make_table<schedule>() (two steps from a fresh start, then the drain) is verified at
// compile time like any other; the executor cuts each rank's program from it into three programs
// (the first step, the steady step every later step runs, and the drain), each expanded at compile
// time as host_executor's are. A microbatch's op, stage, place in the step and whether an update
// follows it are compile-time constants; its number since the pipeline's start (the step's base
// plus its place) picks, at run time, its activation stash (mod p - s), its weight version's slot
// and its message number: no flush means these rotate from step to step.
//
// Each stage keeps its versions in copies of its own layers (version_slots: p - s, or 2), made from
// the model's layers at the first step and written back by finish(). The user's optimizer is called
// by the rank that holds the stage, right after the backward that completes a gradient.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <concepts>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/face.hpp>
#include <ctpipe/exec/detail/forward_pass.hpp>
#include <ctpipe/exec/detail/version_store.hpp>
#include <ctpipe/exec/host.hpp>
#include <ctpipe/make_table.hpp>
#include <ctpipe/model/crossings.hpp>
#include <ctpipe/schedule/async.hpp>

namespace ctpipe {

namespace detail {

// What an asynchronous task's code knows at compile time: its microbatch's place in the step
// (negative: a backward of a microbatch fed by an earlier step) and whether an update follows it.
struct async_task_args {
  int microbatch = 0;
  bool update = false;
  constexpr bool operator==(const async_task_args&) const = default;
};
// ... and what its code reads at run time (exec/detail/host_compute.hpp): `global` counts
// microbatches from the pipeline's start.
struct async_args {
  int microbatch = 0;
  int stash = 0, local_in = -1, local_out = -1, message = 0, version = 0, global = 0;
};

// The three parts of rank R's program in the window table: [begin, end) and the microbatch that
// the part's place 0 stands for.
struct program_part {
  int begin = 0, end = 0, offset = 0;
};
enum class async_phase { first, steady, drain };

template <auto Schedule, auto ExecPlan, int R>
consteval program_part part_of(async_phase ph) {
  const auto& prog = ExecPlan.table.programs[detail::ix(R)];
  const int length = ExecPlan.table.length[detail::ix(R)], m = Schedule.microbatches;
  const int w = Schedule.warmup(R);
  // The first task (a receive or the op itself) of F(mb), or of B(mb).
  auto first_of = [&](op_kind op, op_kind recv, int mb) {
    for (int i = 0; i < length; ++i) {
      const task& t = prog[detail::ix(i)];
      if ((t.op == op || t.op == recv) && t.microbatch == mb) return i;
    }
    return length;
  };
  const int steady = first_of(op_kind::forward, op_kind::recv_forward, m);
  const int drain = w == 0 ? length : first_of(op_kind::backward, op_kind::recv_backward, 2 * m - w);
  switch (ph) {
    case async_phase::first:
      return {0, steady, 0};
    case async_phase::steady:
      return {steady, drain, m};
    case async_phase::drain:
      break;
  }
  return {drain, length, 2 * m};
}

template <auto Schedule, auto ExecPlan, int R, async_phase Ph>
consteval auto async_tasks() {
  constexpr program_part part = part_of<Schedule, ExecPlan, R>(Ph);
  std::array<program_task<async_task_args>, detail::ix(part.end - part.begin)> tasks{};
  for (int i = part.begin; i < part.end; ++i) {
    const task& t = ExecPlan.table.programs[detail::ix(R)][detail::ix(i)];
    tasks[detail::ix(i - part.begin)] = {
        {R, t.op, t.stage, t.other},
        {t.microbatch - part.offset, t.op == op_kind::backward && Schedule.update_after(t.microbatch)}};
  }
  return tasks;
}

/// The asynchronous executor, for the rules it keeps (executor_requirements) and its messages.
struct async_executor_tag {
  static constexpr std::string_view name = "ctpipe::async_executor";
  static constexpr layer_kind layers = layer_kind::host;
  static constexpr bool frozen_prefix = true, recompute = true, copies_layers = true, sends_bytes = false,
                        graphs = true, shared_parameters = false, bidirectional = false, mirror_copies = false;
};
}  // namespace detail

/// Runs Schedule (a ctpipe::async_schedule: pipedream(p, m) or pipedream_2bw(p, m)) over Model's
/// layers split into p stages by Stages, with loss Loss, calling `Optimizer` for every update:
/// opt(layer index, parameters, gradients), as ctpipe::sgd does. Rank 0 runs on the thread that
/// calls step() or finish(); ranks 1..p-1 on threads of their own.
///
/// Guarantees (bitwise; tests/exec/async.cpp): after N microbatches and finish(), every stage's
/// parameters are those of a sequential run that computes F(i) and B(i) of stage s with version
/// max(0, i - (p-1-s)) and updates once per microbatch (stashed), or computes every F and B of
/// minibatch k with version max(0, k - 1) and updates once per minibatch (double buffered).
template <auto Schedule, model_type Model, auto Stages, class Loss, class Optimizer>
class async_executor : public detail::executor_face<async_executor<Schedule, Model, Stages, Loss, Optimizer>,
                                                    "ctpipe::async_executor", Model, Loss> {
  friend detail::executor_face<async_executor, "ctpipe::async_executor", Model, Loss>;
  static_assert(std::same_as<CTPIPE_NTTP_TYPE(Schedule), async_schedule>,
                "ctpipe::async_executor: Schedule must be ctpipe::pipedream(p, m) or ctpipe::pipedream_2bw(p, m)");

 public:
  static constexpr async_schedule schedule = Schedule;
  static constexpr int ranks = Schedule.ranks;
  static constexpr int stage_count = Schedule.ranks;
  /// Stages (a stand-in where Stages breaks a rule: its static_assert has said which).
  static constexpr auto stages = detail::usable_stages<Model, stage_count, Stages>();
  /// The window: two steps from a fresh start and the drain, lowered, with the skip messages of a
  /// model that is not a chain; verified at compile time.
  static constexpr auto window = make_table<Schedule, model_crossings<Model, stages>()>();
  static constexpr auto plan = make_execution_plan<window>();
  static constexpr auto& table = plan.table;
  static constexpr int microbatches = Schedule.microbatches;
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;

  /// The forward-only table evaluate() and predict() run: stage s on rank s, each rank's F ops in
  /// microbatch order (GPipe's forward), with the model's skip messages.
  static constexpr auto forward_table = make_forward_table<
      make_table<gpipe(Schedule.ranks, Schedule.microbatches), model_crossings<Model, stages>()>()>();

  static_assert(detail::executor_requirements<detail::async_executor_tag, window, Model, Stages, stage_count,
                                              detail::backward_in_order(plan), Loss>::value);
  static_assert(detail::optimizer_requirements<Model, Optimizer>::value);

  /// Per stage: weight versions kept (p - s, or 2) and activation stashes (p - s).
  static constexpr std::array<int, detail::ix(stage_count)> version_slots = [] {
    std::array<int, detail::ix(stage_count)> v{};
    for (int s = 0; s < stage_count; ++s) v[detail::ix(s)] = Schedule.version_slots(s);
    return v;
  }();
  static constexpr std::array<int, detail::ix(stage_count)> stash_slots = [] {
    std::array<int, detail::ix(stage_count)> v{};
    for (int s = 0; s < stage_count; ++s) v[detail::ix(s)] = Schedule.stash_slots(s);
    return v;
  }();
  static_assert(plan.stash_slots == stash_slots,
                "ctpipe::async_executor: the table's activation stash depth differs from p - s (a bug in ctpipe)");

  /// Starts one thread for each rank but rank 0. The model, loss and optimizer must outlive the executor.
  async_executor(Model& model, Loss& loss, Optimizer& opt) : opt_(opt), loss_(loss), engine_(model, loss) {
    engine_.start([this]<int R>() { this->template run_rank<R>(); });
  }
  // (The destructor stops the rank threads. It does not drain: what the steps since the last
  // finish() learned reaches the model only through finish().)

  // step, evaluate and predict (with extents too): detail::executor_face. A step runs
  // `microbatches` microbatches with no flush: the first step after construction (or after
  // finish(), or a failed step) starts the pipeline from the model's weights; later steps carry on
  // the backwards of the microbatches earlier steps left in flight, and return this step's
  // microbatches' losses (the last stage runs them within the step). Each extent travels with its
  // microbatch through the pipeline, across steps too. A task that throws ends the step with
  // task_failure (its microbatch counted from the pipeline's start); the pipeline then starts
  // afresh at the next step, from the model's weights (those of the last finish(), or the first
  // step). evaluate and predict run on the model's parameters (the newest weights, once drained):
  // with microbatches in flight they throw std::logic_error; the first call starts the forward
  // pass's own threads and buffers.

  /// Drains the pipeline: the backwards and updates of the microbatches still in flight, then the
  /// newest version of every stage's parameters goes into the model's layers. Nothing to do when no
  /// step has run since the last finish().
  void finish() {
    if (!started_) return;
    phase_ = phase::drain;
    run_phase({}, {}, false);
    const int done = base_;
    engine_->versions().store(engine_->model(),
                              [done](int s) { return Schedule.slot_of(s, Schedule.versions_after(done)); });
    started_ = false;
    base_ = 0;
  }

  /// Records the start and end of every task of what follows, until record_steps(false), which
  /// keeps the last recording for recorded_step(). A recording is of `window`: the first step
  /// after a fresh start, the last step before finish() (the window's steady step) and finish()'s
  /// drain, each task at its position in `window`'s programs; the three parts laid end to end
  /// (each from the end of the one before: the time between the calls, the caller's, left out).
  /// Off by default; off, a step runs exactly the code it runs without this (one test per rank and
  /// step). A recorded step walks the table (dispatch::table_walk). Allocates the first time, once;
  /// between steps.
  void record_steps(bool on) {
    if (on && !recorder_) {
      auto r = std::make_unique<recorder>();
      r->step.ranks.resize(detail::ix(ranks));
      for (int k = 0; k < ranks; ++k) r->step.ranks[detail::ix(k)].resize(detail::ix(table.length[detail::ix(k)]));
      recorder_ = std::move(r);
    }
    recorded_ = on ? &run_recorded : nullptr;
  }
  /// The last recording: per rank, per position of `window`'s programs, each task's start and end
  /// in seconds (-1 for a task of a part not recorded yet, or of a step that failed). Whole after a
  /// recorded first step, steady step and drain: compare it with `table` (compare_measured,
  /// measured_svg, measured_trace). Empty where nothing was recorded.
  const measured_step& recorded_step() const noexcept {
    static const measured_step none{};
    return recorder_ ? recorder_->step : none;
  }

  /// Microbatches fed since the pipeline's start (0 when drained).
  int microbatches_fed() const noexcept { return base_; }
  Model& model() noexcept { return engine_->model(); }

  /// Where the steps that follow stand for the layers that take a context (as
  /// host_executor::set_context_origin; a step's microbatches are numbered within it).
  void set_context_origin(step_origin o) noexcept { engine_->set_context_origin(o); }
  step_origin context_origin() const noexcept { return engine_->context_origin(); }

  /// Bytes each rank holds for stashed activations (stash slots x the stage's stashed tensors) and
  /// for weight versions (version slots x the stage's layers); sizeof only, allocated once.
  static constexpr std::array<std::size_t, detail::ix(ranks)> activation_bytes() {
    std::array<std::size_t, detail::ix(ranks)> b{};
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      ((b[S] = engine_t::template stage_activation_bytes<static_cast<int>(S)>()), ...);
    }
    (std::make_index_sequence<detail::ix(stage_count)>{});
    return b;
  }
  static constexpr std::array<std::size_t, detail::ix(ranks)> weight_bytes() {
    std::array<std::size_t, detail::ix(ranks)> b{};
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      ((b[S] = detail::ix(version_slots[S]) * sizeof(detail::stage_copy<Model, stages, static_cast<int>(S)>)), ...);
    }
    (std::make_index_sequence<detail::ix(stage_count)>{});
    return b;
  }

 private:
  using phase = detail::async_phase;
  token_losses run_step(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                        std::span<const int> extents) {
    detail::check_microbatches(who, inputs.size(), targets.size(), microbatches);
    detail::check_extents(who, extents, inputs.size(), Model::token_capacity);
    if (base_ > INT_MAX - 3 * microbatches)
      throw std::length_error(std::string(who) + ": " + std::to_string(base_) +
                              " microbatches since the pipeline's start; call finish() (which drains and renumbers) "
                              "before 2^31 of them");
    const bool fresh = !started_;
    if (fresh) engine_->versions().load(engine_->model());
    phase_ = fresh ? phase::first : phase::steady;
    const std::span<const double> losses =
        run_phase(inputs, targets, fresh, extents.empty() ? nullptr : extents.data());
    return {losses, engine_->tokens()};
  }
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<output_type> outputs, std::span<const int> extents) {
    if (started_)
      throw std::logic_error(std::string(who) + ": " + std::to_string(base_) +
                             " microbatches are in flight, and the model's layers do not hold the newest weights; "
                             "call finish() first");
    return forward_.run(engine_->model(), loss_, who, inputs, targets, outputs, extents, engine_->context_origin());
  }
  static constexpr auto layout = [] {
    auto l = detail::stage_layout_of(plan);
    l.microbatches = microbatches;  // losses: this step's
    return l;
  }();
  using versions_t = detail::version_store<Model, stages, version_slots>;
  using engine_t = detail::engine<detail::async_executor_tag, Model, stages, Loss, layout, versions_t>;

  template <int R, phase Ph>
  static constexpr auto program = detail::make_program<detail::async_tasks<Schedule, plan, R, Ph>()>();
  static constexpr std::size_t longest = [] {
    std::size_t n = 0;
    [&]<int... R>(std::integer_sequence<int, R...>) {
      ((n = std::max(
            {n, program<R, phase::first>.length, program<R, phase::steady>.length, program<R, phase::drain>.length})),
       ...);
    }
    (std::make_integer_sequence<int, ranks>{});
    return n;
  }();
  static constexpr dispatch dispatch_strategy = resolve_dispatch(dispatch::automatic, longest, automatic_unroll_limit);

  std::span<const double> run_phase(std::span<const input_type> inputs, std::span<const target_type> targets,
                                    bool fresh, const int* extents = nullptr) {
    if (recorded_ != nullptr) [[unlikely]]
      begin_recorded_phase();
    engine_->begin_step(inputs, targets, fresh, phase_ != phase::drain, extents);  // a drain is no step of its own
    run_rank<0>();
    try {
      const auto losses = engine_->end_step();
      started_ = true;
      base_ += phase_ == phase::drain ? 0 : microbatches;
      return losses;
    } catch (...) {
      started_ = false;  // the microbatches in flight are lost: the next step starts afresh
      base_ = 0;
      throw;
    }
  }

  template <int R>
  void run_rank() noexcept {
    try {
      engine_->template begin_rank<R>();
      if (recorded_ != nullptr) [[unlikely]] {
        recorded_(*this, R);
        return;
      }
      const runner<R> run{*engine_, opt_, base_};
      switch (phase_) {
        case phase::first:
          detail::run_program<program<R, phase::first>, dispatch_strategy>(run);
          break;
        case phase::steady:
          detail::run_program<program<R, phase::steady>, dispatch_strategy>(run);
          break;
        case phase::drain:
          detail::run_program<program<R, phase::drain>, dispatch_strategy>(run);
          break;
      }
    } catch (const detail::aborted&) {
    }
  }

  // Each task: its run-time arguments from the step's base, the engine's code for its op and
  // stage, and after a backward that completes a gradient, the stage's update.
  template <int R>
  struct runner {
    engine_t& en;
    Optimizer& opt;
    int base;
    template <detail::task_code C, class A>
    void run(const A& a, std::size_t) const {
      constexpr int S = C.stage;
      const int j = base + a.microbatch;
      const detail::async_args x{
          a.microbatch, j % stash_slots[detail::ix(S)], -1, -1, j, Schedule.version_slot(S, j), j};
      en.template run_task<R, C.op, S, C.other>(x);
      if constexpr (C.op == op_kind::backward) {
        if (a.update) {
          const int v = Schedule.updated_version(j);
          en.template update<R, S>(x, Schedule.slot_of(S, v), Schedule.slot_of(S, v - 1), opt);
        }
      }
    }
  };

  // Recording (record_steps): each rank's task i of the phase at position part.begin + i of
  // `window`'s program, its times from the phase's start plus where the part before it ended.
  // Reached through a pointer that record_steps sets, so that only a program that records compiles
  // it.
  using clock = std::chrono::steady_clock;
  struct recorder {
    measured_step step;
    clock::time_point t0{};
    double offset = 0.0;  // where this phase starts in the recording: the end of the part before
  };
  template <int R>
  struct recording_runner {
    runner<R> inner;
    measured_task* out;  // the part's first position
    clock::time_point t0;
    double offset;
    template <detail::task_code C, class A>
    void run(const A& a, std::size_t i) const {
      out[i].start = offset + std::chrono::duration<double>(clock::now() - t0).count();
      inner.template run<C>(a, i);
      out[i].end = offset + std::chrono::duration<double>(clock::now() - t0).count();
    }
  };
  // Each rank's three parts of `window`'s program (first, steady, drain).
  static constexpr auto parts = [] {
    std::array<std::array<detail::program_part, 3>, detail::ix(ranks)> p{};
    [&]<int... R>(std::integer_sequence<int, R...>) {
      ((p[detail::ix(R)] = {detail::part_of<Schedule, plan, R>(phase::first),
                            detail::part_of<Schedule, plan, R>(phase::steady),
                            detail::part_of<Schedule, plan, R>(phase::drain)}),
       ...);
    }
    (std::make_integer_sequence<int, ranks>{});
    return p;
  }();
  static constexpr detail::program_part part(int r, phase ph) {
    return parts[detail::ix(r)][static_cast<std::size_t>(ph)];
  }
  // Before a recorded phase: a fresh start clears the recording; the phase's part starts where
  // the part before it ended (the first part's, for a steady step: the window's is the last one).
  CTPIPE_COLD void begin_recorded_phase() {
    recorder& rec = *recorder_;
    const phase before = phase_ == phase::drain ? phase::steady : phase::first;
    rec.offset = 0.0;
    for (int r = 0; r < ranks; ++r) {
      auto& row = rec.step.ranks[detail::ix(r)];
      if (phase_ == phase::first) std::fill(row.begin(), row.end(), measured_task{});
      const detail::program_part mine = part(r, phase_), prior = part(r, before);
      std::fill(row.begin() + mine.begin, row.begin() + mine.end, measured_task{});
      if (phase_ != phase::first)
        for (int i = prior.begin; i < prior.end; ++i) rec.offset = std::max(rec.offset, row[detail::ix(i)].end);
    }
    rec.t0 = clock::now();
  }
  static void run_recorded(async_executor& x, int rank) {
    [&]<int... R>(std::integer_sequence<int, R...>) { ((rank == R ? x.template run_recorded_rank<R>() : void()), ...); }
    (std::make_integer_sequence<int, ranks>{});
  }
  template <int R>
  void run_recorded_rank() {
    recorder& rec = *recorder_;
    measured_task* row = rec.step.ranks[detail::ix(R)].data();
    const runner<R> inner{*engine_, opt_, base_};
    const auto go = [&]<phase Ph>() {
      const recording_runner<R> run{inner, row + part(R, Ph).begin, rec.t0, rec.offset};
      detail::run_program<program<R, Ph>, dispatch::table_walk>(run);
    };
    switch (phase_) {
      case phase::first:
        go.template operator()<phase::first>();
        break;
      case phase::steady:
        go.template operator()<phase::steady>();
        break;
      case phase::drain:
        go.template operator()<phase::drain>();
        break;
    }
  }
  std::unique_ptr<recorder> recorder_;                // the last recording, kept
  void (*recorded_)(async_executor&, int) = nullptr;  // run_recorded while steps are recorded

  Optimizer& opt_;
  Loss& loss_;
  // Written by the calling thread before a step starts the ranks (begin_step publishes them).
  phase phase_ = phase::first;
  int base_ = 0;  // microbatches fed since the pipeline's start
  bool started_ = false;
  detail::running_engine<engine_t, ranks> engine_;  // its threads end before the rest goes
  // evaluate() and predict(): last, its threads end first.
  detail::forward_pass<detail::async_executor_tag, forward_table, Model, stages, Loss, stage_count, dispatch::automatic>
      forward_;
};

}  // namespace ctpipe
