// The CUDA executor: every rank of a table on CUDA streams, issued by one host thread in one global
// order computed at compile time, with events for the cross-rank dependencies, every buffer
// allocated once, and a step that can be captured into a CUDA graph and replayed. Written against a
// backend: ctpipe::cuda::runtime (ctpipe/cuda/runtime.hpp, the CUDA runtime API) in production, a
// stream simulator in ctpipe's CPU tests; this header includes no CUDA header. The engine that
// issues the tasks is cuda/detail/engine.hpp's.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/cuda/detail/engine.hpp>
#include <ctpipe/cuda/detail/group_points.hpp>
#include <ctpipe/cuda/detail/layout.hpp>
#include <ctpipe/cuda/detail/predictable.hpp>
#include <ctpipe/cuda/detail/task_events.hpp>
#include <ctpipe/cuda/error.hpp>
#include <ctpipe/cuda/launch.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/shape.hpp>
#include <ctpipe/model/partition.hpp>

namespace ctpipe::cuda {

namespace detail {
// The program of one step of execution plan Plan with issue plan Issue: every rank's tasks in the
// global issue order (run by the core, unrolled or walked, each task issued into its rank's
// stream), and each task's label (NVTX, errors).
template <auto Plan, auto Issue>
struct step_program {
  static constexpr std::size_t size = Issue.order.size();
  static constexpr auto labels = [] {
    std::array<label, size> l{};
    for (std::size_t i = 0; i < size; ++i)
      l[i] = make_label(
          Plan.table.programs[ctpipe::detail::ix(Issue.order[i].rank)][ctpipe::detail::ix(Issue.order[i].index)]);
    return l;
  }();
  static constexpr auto tasks = [] {
    std::array<ctpipe::detail::program_task<device_args>, size> t{};
    for (std::size_t i = 0; i < size; ++i) {
      const auto r = ctpipe::detail::ix(Issue.order[i].rank), k = ctpipe::detail::ix(Issue.order[i].index);
      const task& x = Plan.table.programs[r][k];
      t[i] = {{static_cast<int>(r), x.op, x.stage, is_skip(x.op) ? x.other : -1}, Issue.args[r][k]};
    }
    return t;
  }();
  static constexpr auto program = ctpipe::detail::make_program<tasks>();
};
}  // namespace detail

/// Runs Table over Model's device layers split by Stages, with device loss Loss, on the devices of
/// Placement (a device number for every rank, or a placement<ranks>), through Backend. Use
/// ctpipe::cuda::executor (ctpipe/cuda.hpp) for the CUDA runtime.
template <auto Table, model_type Model, auto Stages, class Loss, auto Placement, dispatch Dispatch, class Backend>
class basic_executor
    : public ctpipe::detail::executor_shape<detail::executor_tag, Table, Model, Stages, Loss>,
      public ctpipe::detail::executor_face<basic_executor<Table, Model, Stages, Loss, Placement, Dispatch, Backend>,
                                           "ctpipe::cuda::executor", Model, Loss, detail::device_face<launch>> {
  using shape = ctpipe::detail::executor_shape<detail::executor_tag, Table, Model, Stages, Loss>;
  friend ctpipe::detail::executor_face<basic_executor, "ctpipe::cuda::executor", Model, Loss,
                                       detail::device_face<launch>>;

 public:
  using shape::plan, shape::ranks, shape::stage_count, shape::stages, shape::microbatches;
  using input_type = typename shape::input_type;
  using output_type = typename shape::output_type;
  using target_type = typename shape::target_type;
  static constexpr std::array<int, ctpipe::detail::ix(ranks)> devices =
      detail::devices_of<Placement, ctpipe::detail::ix(ranks)>();
  static constexpr auto issue = make_issue_plan<plan, devices, detail::graph_path<Model>>();
  static constexpr std::size_t task_count = issue.order.size();
  /// The strategy in use: dispatch::automatic unrolls a step of at most cuda::automatic_unroll_limit
  /// tasks (one host thread issues the whole step: it is one program).
  static constexpr dispatch dispatch_strategy = resolve_dispatch(Dispatch, task_count, automatic_unroll_limit);
  static constexpr int device_count = *std::ranges::max_element(devices) + 1;
  using stream_type = typename Backend::stream_type;
  using backend_type = Backend;
  using model_type = Model;

  static_assert(std::ranges::all_of(devices, [](int d) { return d >= 0; }),
                "ctpipe::cuda::executor: Placement: device numbers must be at least 0");

  static constexpr auto layout = detail::make_layout<Model, stages, plan, issue, ctpipe::detail::ix(device_count)>();

  /// Whether Table is bidirectional (dualpipe): two pipelines over mirrored copies of the stages.
  static constexpr bool mirrored = shape::model_stages != stage_count;

  /// Creates a stream per rank and one to fork and join a step on, every event, and every buffer
  /// (one allocation per device). Enables peer access between devices that exchange tensors, where
  /// the hardware allows it. The model and the loss must outlive the executor.
  basic_executor(Model& model, Loss& loss) : loss_(loss), engine_(model, loss) {
    static_assert(!mirrored,
                  "ctpipe::cuda::executor: a bidirectional table (dualpipe) runs each stage twice, on two ranks: "
                  "construct the executor with (model, mirror, loss), where mirror is a second model whose layers "
                  "hold their own memory, on the devices of the second pipeline's ranks");
  }
  /// A bidirectional table (dualpipe): rank r runs stage r of the first pipeline with `model`'s
  /// layers, and stage p - 1 - r of the second with `mirror`'s, whose layers must hold memory of
  /// their own (std::invalid_argument names a layer that overlaps the model's), each on the device
  /// of the rank that runs it. Each step starts by copying the model's parameters into the
  /// mirror's, and leaves in both the sum of the two copies' gradients: train `model`.
  basic_executor(Model& model, Model& mirror, Loss& loss)
      : loss_(loss), mirror_(&mirror), engine_(model, mirror, loss) {
    static_assert(mirrored, "ctpipe::cuda::executor: a mirror model is for bidirectional tables (dualpipe) only");
  }

  // enqueue, step, evaluate and predict (with extents too, each with a launch mode):
  // detail::executor_face. enqueue issues one training step and returns without waiting: zeroes
  // every layer's gradients, runs the table, and copies the losses to the host, all on the
  // executor's streams; wait() returns them, and step is enqueue then wait. `inputs` and `targets`
  // are views of device memory, one per microbatch, valid until wait(). launch::graph captures
  // the step into a CUDA graph the first time (and again when the inputs or targets point
  // elsewhere) and replays it. Extents (1 to Model::token_capacity; std::invalid_argument names
  // the microbatch otherwise, before anything is issued) reach the layers as device data
  // (ctpipe::cuda::context::extent), so one captured graph replays steps of any extents.
  // evaluate and predict run on the executor's streams, after what they hold, and return when
  // they are done; the first call allocates the pass's own buffers (no more than the forward-only
  // table keeps in flight); a step enqueued and not yet waited for is a std::logic_error.
  // predict copies each microbatch's output into outputs[i], a view of device memory on the last
  // stage's device, on its rank's stream.

  /// Waits for the step enqueued last; returns each microbatch's loss. The gradients are in the
  /// layers, summed over microbatches in microbatch order.
  std::span<const double> wait() {
    if (!recording_pending_) return engine_.wait();
    recording_pending_ = false;
    try {
      const std::span<const double> losses = engine_.wait();
      recording_->read();
      return losses;
    } catch (...) {
      recording_->clear();
      throw;
    }
  }

  /// Records the start and end of every task of the training steps that follow, on the GPU's
  /// clock (a timed event before and after each task, on its rank's stream), until
  /// record_steps(false), which keeps the last recording for recorded_step(). Off by default; off,
  /// a step runs exactly the code it runs without this (one test per step). A recorded step is
  /// issued eagerly, even where launch::graph is asked for (an event recorded while a graph is
  /// captured orders the streams but keeps no time), walking the table (dispatch::table_walk).
  /// Makes its events the first time, once (two a task, one a rank); between steps.
  void record_steps(bool on) {
    engine_.check_between_steps();
    if (on && !recording_) {
      auto r = std::make_unique<detail::task_events<Backend>>();
      std::array<int, ctpipe::detail::ix(ranks)> lengths{};
      for (int k = 0; k < ranks; ++k) lengths[ctpipe::detail::ix(k)] = plan.table.length[ctpipe::detail::ix(k)];
      r->make(std::span<const int>(lengths), std::span<const int>(devices), [](int) { return true; });
      recording_ = std::move(r);
    }
    recorded_ = on ? &issue_recorded : nullptr;
  }
  /// The last training step recorded: per rank, per position of `plan.table` (the lowered table
  /// the executor runs), its task's start and end in seconds from the step's start (every task -1
  /// where the step failed); kept after record_steps(false) until the next recorded step, whose
  /// wait() fills it. Empty where no step was recorded. The times are the GPU's: from where the
  /// task's stream reached it (after what the stream ran before, and the events it waits for) to
  /// where its last kernel ended. Ranks on one device share its clock; ranks on different devices
  /// are aligned where their streams start the step. Compare it with the table: compare_measured,
  /// measured_svg, measured_trace.
  const measured_step& recorded_step() const noexcept {
    static const measured_step none{};
    return recording_ ? recording_->step() : none;
  }
  /// The forward-only table evaluate() and predict() run: each rank's F ops of the training table,
  /// in its order, with the same stages on the same ranks and devices (make_forward_table).
  static constexpr auto forward_table = make_forward_table<plan.table>();

  /// Where the steps that follow stand for the layers' context (ctpipe::cuda::context): the next
  /// step's number (counting up by one per step; it reaches the kernels as device data, so a graph
  /// replay reads its own) and the index of microbatch 0 in the global batch (a new one drops the
  /// captured graph). Defaults: step 0, microbatch 0.
  void set_context_origin(step_origin o) noexcept { engine_.set_context_origin(o); }
  step_origin context_origin() const noexcept { return engine_.context_origin(); }

  /// Drops the captured graph: the next graph step captures anew. Needed when something a layer
  /// read on the host while being captured has changed (a pointer, a size, a kernel argument).
  void invalidate_graph() noexcept { engine_.invalidate_graph(); }
  /// How many times a step has been captured into a graph.
  int graph_captures() const noexcept { return engine_.graph_captures(); }
  /// Eager steps: synchronise each task's stream after issuing it, so that an asynchronous error (a
  /// kernel fault) is reported with the task that caused it. Slow; for debugging.
  void sync_after_each_task(bool on) noexcept { engine_.sync_after_each_task(on); }
  /// The stream rank r issues on, and the one a step forks from and joins on (on rank 0's device).
  stream_type stream(int r) const { return engine_.stream(r); }
  /// Rank r's second stream, where the B of an overlapped pair F&B runs (forked from stream(r)
  /// before the pair and joined after it); stream(r) itself for a table without pairs. A layer
  /// that binds a library handle to a stream (cuBLAS) needs one for each.
  stream_type second_stream(int r) const { return engine_.second_stream(r); }
  stream_type origin_stream() const noexcept { return engine_.origin_stream(); }
  Model& model() noexcept { return engine_.model(); }

  /// For ctpipe::optimizer (a device_parameter_place, optim/optimizer.hpp): `ctpipe::optimizer
  /// opt(model, exec, rule, clip)` updates every layer of the model on host copies, each copied on
  /// the stream of the rank that runs it. Between steps only: a step enqueued and not yet waited
  /// for is a std::logic_error.
  bool updates_layer(std::size_t k) const noexcept { return k < Model::size; }
  bool counts_layer(std::size_t k) const noexcept { return k < Model::size; }
  bool leads() const noexcept { return true; }
  void sum_norm_terms(std::span<double>) const noexcept {}
  void copy_to_host(std::size_t k, void* to, const void* from, std::size_t bytes) const {
    engine_.copy_layer(k, to, from, bytes, true);
  }
  void copy_to_device(std::size_t k, void* to, const void* from, std::size_t bytes) const {
    engine_.copy_layer(k, to, from, bytes, false);
  }
  void finish_copies() const { engine_.finish_copies(); }
  void check_between_steps() const { engine_.check_between_steps(); }

  /// For ctpipe::cuda::device_optimizer (cuda/optimizer.hpp): the rank that runs layer k of the
  /// model, and the update that ends every training step (one at a time; std::logic_error where
  /// another is attached). Between steps; a captured graph is dropped.
  static constexpr int rank_of_layer(int k) { return ctpipe::detail::rank_of_layer<stages>(plan.table.stage_rank, k); }
  detail::update_placement<Backend> placement_for_update() const {
    check_between_steps();
    detail::update_placement<Backend> p;
    for (std::size_t k = 0; k < Model::size; ++k) p.rank_of_layer.push_back(rank_of_layer(static_cast<int>(k)));
    for (int r = 0; r < ranks; ++r) {
      p.device_of_rank.push_back(devices[static_cast<std::size_t>(r)]);
      p.streams.push_back(stream(r));
    }
    p.executor = this;
    p.check_between_steps = [](const void* e) { static_cast<const basic_executor*>(e)->check_between_steps(); };
    return p;
  }
  void attach_update(detail::update_hook<Backend>* u) {
    if (engine_.update() != nullptr)
      throw std::logic_error("ctpipe::cuda::executor: a device optimizer is already attached to this executor");
    engine_.set_update(u);
  }
  void detach_update(const detail::update_hook<Backend>* u) noexcept {
    if (engine_.update() == u) engine_.remove_update();
  }

  /// Bytes of device memory the executor allocates on each device (its buffers; the layers'
  /// parameters are the user's).
  static constexpr std::array<std::size_t, ctpipe::detail::ix(device_count)> device_bytes() {
    return layout.memory.bytes;
  }

 private:
  using engine_t = detail::engine<Model, stages, Loss, Backend, layout, detail::all_ranks>;
  // The step's program, run on the runner below.
  using training_step = detail::step_program<plan, issue>;
  // Shared parameters: after which tasks a group's gradients are final on a rank, and where the
  // group is summed (cuda/detail/group_points.hpp).
  static constexpr bool shares = has_shared_parameters_v<Model>;
  static constexpr auto group_points = [] {
    if constexpr (shares)
      return detail::make_group_points<plan, issue, Model, stages>();
    else
      return detail::group_points<0>{};
  }();
  // A bidirectional table: the same for each model stage's two copies.
  static constexpr auto mirror_points = [] {
    if constexpr (mirrored)
      return detail::make_mirror_points<plan, issue>();
    else
      return detail::group_points<0>{};
  }();
  struct runner {
    engine_t& en;
    template <ctpipe::detail::task_code C, class A>
    void run(const A& a, std::size_t i) {
      en.template issue_task<C.rank, C.op, C.stage, C.other>(a, training_step::labels[i].text.data(),
                                                             issue.switch_device[i]);
      if constexpr (shares && (C.op == op_kind::backward || C.op == op_kind::backward_weight))
        if (group_points.record[i] != 0 || group_points.sum[i] != 0)
          en.template after_group_tasks<C.rank>(group_points.record[i], group_points.sum[i]);
      if constexpr (mirrored && (C.op == op_kind::backward || C.op == op_kind::backward_weight))
        if (mirror_points.record[i] != 0 || mirror_points.sum[i] != 0)
          en.template after_mirror_tasks<C.rank>(mirror_points.record[i], mirror_points.sum[i]);
    }
  };
  void issue_tasks() {
    if (recorded_ != nullptr) [[unlikely]] {
      recorded_(*this);
      return;
    }
    runner r{engine_};
    ctpipe::detail::run_program<training_step::program, dispatch_strategy>(r);
  }
  // The same, each task between two timed events (record_steps), over the table walk. Reached
  // through a pointer that record_steps sets, so that only a program that records compiles it.
  struct recording_runner {
    engine_t& en;
    const detail::task_events<Backend>& events;
    template <ctpipe::detail::task_code C, class A>
    void run(const A& a, std::size_t i) {
      const std::size_t k = ctpipe::detail::ix(issue.order[i].index);  // its place in rank C.rank's program
      const stream_type s = en.stream(C.rank);
      if constexpr (layout.multi_device)  // (the event on the device of the stream it is recorded on)
        detail::backend_calls<Backend>::check(Backend::set_device(devices[ctpipe::detail::ix(C.rank)]), "cudaSetDevice",
                                              "record_steps");
      events.start(C.rank, k, s);
      runner{en}.template run<C>(a, i);
      events.end(C.rank, k, s);
    }
  };
  CTPIPE_COLD static void issue_recorded(basic_executor& x) {
    for (int r = 0; r < ranks; ++r) {
      if constexpr (layout.multi_device)
        detail::backend_calls<Backend>::check(Backend::set_device(devices[ctpipe::detail::ix(r)]), "cudaSetDevice",
                                              "record_steps");
      x.recording_->begin(r, x.engine_.stream(r));
    }
    if constexpr (layout.multi_device)  // (where the step's first task expects it)
      detail::backend_calls<Backend>::check(Backend::set_device(devices[0]), "cudaSetDevice", "record_steps");
    recording_runner r{x.engine_, *x.recording_};
    ctpipe::detail::run_program<training_step::program, dispatch::table_walk>(r);
  }

  // The forward-only pass: its plan (each stage's slot kept until the last reader of its output,
  // every message across ranks copied: exec/plan.hpp, cuda/plan.hpp), its own buffers, the
  // training engine's streams. A template (of nothing), so that only an executor whose evaluate()
  // or predict() is called compiles it.
  template <class = void>
  struct forward_pass {
    static constexpr auto plan = make_execution_plan<forward_table, true>();
    static constexpr auto issue = make_issue_plan<plan, devices, detail::graph_path<Model>>();
    static constexpr auto layout = detail::make_layout<Model, stages, plan, issue, ctpipe::detail::ix(device_count)>();
    using engine_t = detail::engine<Model, stages, Loss, Backend, layout, detail::all_ranks>;
    using step = detail::step_program<plan, issue>;
    static constexpr dispatch strategy = resolve_dispatch(Dispatch, step::size, automatic_unroll_limit);
    struct runner {
      engine_t& en;
      template <ctpipe::detail::task_code C, class A>
      void run(const A& a, std::size_t i) {
        en.template issue_task<C.rank, C.op, C.stage, C.other>(a, step::labels[i].text.data(), issue.switch_device[i]);
      }
    };
  };
  void run_enqueue(const char*, std::span<const input_type> inputs, std::span<const target_type> targets,
                   std::span<const int> extents, launch how) {
    if (recorded_ == nullptr) [[likely]] {
      engine_.enqueue(
          inputs, targets, how, [this] { issue_tasks(); }, extents);
      return;
    }
    try {
      engine_.enqueue(
          inputs, targets, launch::eager, [this] { issue_tasks(); }, extents);
    } catch (...) {
      recording_->clear();
      throw;
    }
    recording_pending_ = true;
  }
  token_losses run_step(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                        std::span<const int> extents, launch how) {
    run_enqueue(who, inputs, targets, extents, how);
    const std::span<const double> losses = wait();
    return {losses, engine_.tokens()};
  }
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<const output_type> outputs, std::span<const int> extents, launch how) {
    using pass = forward_pass<>;
    using forward_engine = typename pass::engine_t;
    engine_.check_between_steps();
    if (!forward_) {
      std::array<stream_type, ctpipe::detail::ix(ranks) + 1> streams{};
      for (int r = 0; r < ranks; ++r) streams[ctpipe::detail::ix(r)] = engine_.stream(r);
      streams.back() = engine_.origin_stream();
      forward_ =
          std::make_shared<forward_engine>(engine_.model(), mirror_, loss_, std::span<const stream_type>(streams));
    }
    forward_engine& en = *static_cast<forward_engine*>(forward_.get());
    en.set_context_origin(engine_.context_origin());
    en.enqueue_forward(
        who, inputs, targets, outputs, how,
        [&en] {
          typename pass::runner r{en};
          ctpipe::detail::run_program<pass::step::program, pass::strategy>(r);
        },
        extents);
    const std::span<const double> losses = en.wait();
    return {losses, en.tokens()};
  }

  Loss& loss_;
  Model* mirror_ = nullptr;
  engine_t engine_;
  std::unique_ptr<detail::task_events<Backend>> recording_;  // record_steps: made once, kept
  void (*recorded_)(basic_executor&) = nullptr;              // issue_recorded while steps are recorded
  bool recording_pending_ = false;                           // a recorded step enqueued, not yet waited for
  std::shared_ptr<void> forward_;  // forward_pass<>'s engine, made at the first evaluate() or predict()
};

}  // namespace ctpipe::cuda
