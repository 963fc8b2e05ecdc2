// The core of the executors of one process per rank on the CUDA engine (the NCCL executor, the MPI
// executor's device path): what both derive from their template arguments (the plan, the issue plan
// with each rank on a device of its own, the engine's layout, the transport's FIFO layout and the
// dispatch), and the one interface through which each holds its process's rank. What differs
// between them is their transport: NCCL's communicators, or MPI through pinned host memory.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/cuda/detail/engine.hpp>
#include <ctpipe/cuda/detail/graph_layout.hpp>
#include <ctpipe/cuda/detail/layout.hpp>
#include <ctpipe/cuda/detail/process_program.hpp>
#include <ctpipe/cuda/detail/task_events.hpp>
#include <ctpipe/cuda/launch.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/layer_holders.hpp>
#include <ctpipe/exec/detail/shape.hpp>

namespace ctpipe::cuda::detail {

/// What a transport knows of the table: where each stage runs, and the edges between stages that
/// carry tensors, each from a producer stage to a consumer stage, with the capacity of its rings
/// (both directions: activations forward, gradients back). The transports key everything by edge:
/// edge e < S - 1 joins stage e to stage e + 1; a graph model's crossing k (its skip messages) is
/// edge S - 1 + k.
template <std::size_t S, std::size_t K = 0, std::size_t M = 1>
struct fifo_layout {
  static constexpr std::size_t edge_count = (S > 0 ? S - 1 : 0) + K;
  std::array<int, S> stage_rank{};
  // Edge e < edge_count: {producer stage, consumer stage}, and its ring slots. (One entry more, the
  // last unused: no array is empty, so that the code of a table of one stage indexes none.)
  std::array<std::array<int, 2>, S + K> edge{};
  std::array<int, S + K> capacity{};
  int microbatches = 0;
  // FIFO 2e + d's message n: the microbatch it belongs to (every microbatch crosses each FIFO once),
  // so that a receiver knows its extent, and the bytes it brings, before it posts the receive.
  std::array<std::array<int, M>, 2 * (S + K)> message_microbatch{};
  static constexpr int edges() { return static_cast<int>(edge_count); }
  constexpr int producer(int e) const { return edge[ctpipe::detail::ix(e)][0]; }
  constexpr int consumer(int e) const { return edge[ctpipe::detail::ix(e)][1]; }
  // FIFO 2e + d (d = 0 activations, 1 gradients) joins the ranks of the edge's two stages.
  constexpr bool crosses(int e) const {
    return stage_rank[ctpipe::detail::ix(producer(e))] != stage_rank[ctpipe::detail::ix(consumer(e))];
  }
  constexpr int sender(int e, int d) const {
    return stage_rank[ctpipe::detail::ix(d == 0 ? producer(e) : consumer(e))];
  }
  constexpr int receiver(int e, int d) const {
    return stage_rank[ctpipe::detail::ix(d == 0 ? consumer(e) : producer(e))];
  }
};

/// The FIFO layout of an execution plan: its stages in a chain, then its crossings.
template <auto ExecPlan>
consteval auto make_fifo_layout() {
  constexpr std::size_t S = CTPIPE_NTTP_TYPE(ExecPlan.table)::static_stages, K = ExecPlan.skips.size();
  constexpr std::size_t M = ctpipe::detail::ix(ExecPlan.table.microbatches());
  fifo_layout<S, K, M> f{};
  f.stage_rank = ExecPlan.table.stage_rank;
  const std::size_t boundaries = f.edge_count - K;
  for (std::size_t e = 0; e < boundaries; ++e) {
    f.edge[e] = {static_cast<int>(e), static_cast<int>(e + 1)};
    f.capacity[e] = ExecPlan.channel_capacity[e];
  }
  for (std::size_t k = 0; static_cast<int>(k) < static_cast<int>(K); ++k) {  // (int: nvcc warns of k < 0)
    f.edge[boundaries + k] = {ExecPlan.skips[k].from, ExecPlan.skips[k].to};
    f.capacity[boundaries + k] = ExecPlan.skips[k].capacity;
  }
  f.microbatches = ExecPlan.table.microbatches();
  // Each send's message ordinal (the execution plan's, which the engine's tasks carry) and microbatch.
  const auto& t = ExecPlan.table;
  const auto crossing = [&](int from, int to) {
    for (int k = 0; k < static_cast<int>(K); ++k)  // (int: nvcc warns of k < 0 where K is 0)
      if (ExecPlan.skips[ctpipe::detail::ix(k)].from == from && ExecPlan.skips[ctpipe::detail::ix(k)].to == to)
        return static_cast<int>(boundaries) + k;
    return -1;
  };
  for (std::size_t r = 0; r < t.programs.size(); ++r)
    for (int i = 0; i < t.length[r]; ++i) {
      const task& x = t.programs[r][ctpipe::detail::ix(i)];
      const int n = ExecPlan.slots[r][ctpipe::detail::ix(i)].message;
      int fifo = -1;
      if (x.op == op_kind::send_forward)
        fifo = 2 * x.stage;
      else if (x.op == op_kind::send_backward)
        fifo = 2 * (x.stage - 1) + 1;
      else if (x.op == op_kind::send_skip_forward)
        fifo = 2 * crossing(x.stage, x.other);
      else if (x.op == op_kind::send_skip_backward)
        fifo = 2 * crossing(x.other, x.stage) + 1;
      if (fifo >= 0 && n >= 0) f.message_microbatch[ctpipe::detail::ix(fifo)][ctpipe::detail::ix(n)] = x.microbatch;
    }
  return f;
}

/// What an executor of one process per rank derives from its template arguments (Tag: the
/// executor's, executor_requirements; Cuda: the CUDA backend): each rank is a process of its own,
/// and in the engine's layout a device of its own. Forward: the same for the forward-only table of
/// Table (evaluate, predict), its plan keeping a stage's slot until its last reader (exec/plan.hpp).
template <class Tag, auto Table, class Model, auto Stages, class Loss, class Cuda, dispatch Dispatch,
          bool Forward = false>
struct process_mode : ctpipe::detail::executor_shape<Tag, Table, Model, Stages, Loss> {
  using shape = ctpipe::detail::executor_shape<Tag, Table, Model, Stages, Loss>;
  using shape::ranks, shape::stage_count, shape::stages;
  static constexpr auto plan = [] {
    if constexpr (Forward)
      return make_execution_plan<make_forward_table<shape::plan.table>(), true>();
    else
      return shape::plan;
  }();
  using model_type = Model;
  using loss_type = Loss;
  using cuda_type = Cuda;
  using stream_type = typename Cuda::stream_type;
  static constexpr bool graph = graph_path<Model>;
  static constexpr auto issue = make_issue_plan<plan, device_per_rank<ctpipe::detail::ix(ranks)>().device, graph>();
  static constexpr auto layout = make_layout<Model, stages, plan, issue, ctpipe::detail::ix(ranks)>();
  static constexpr auto fifos = make_fifo_layout<plan>();
  /// Unrolled where the longest rank program has at most cuda::automatic_unroll_limit tasks.
  static constexpr dispatch dispatch_strategy = resolve_dispatch(
      Dispatch, ctpipe::detail::ix(*std::ranges::max_element(plan.table.length)), automatic_unroll_limit);
  /// A bidirectional table's stage s runs model stage s % chain_length.
  static constexpr int chain_length = layout.stages.chain_length;
  /// The bytes of each message on FIFO 2e + d (edge e; d = 0 its activations, 1 its gradients):
  /// a chain's boundary tensor both ways, a graph's messages (cuda/detail/graph_layout.hpp). One
  /// entry more, unused.
  static constexpr auto fifo_bytes = [] {
    constexpr std::size_t edges = CTPIPE_NTTP_TYPE(fifos)::edge_count;
    std::array<std::size_t, 2 * edges + 1> b{};
    if constexpr (graph) {
      constexpr auto& g = graph_places<Model, stages>::offsets;
      for (std::size_t e = 0; e < edges; ++e) {
        const auto from = ctpipe::detail::ix(fifos.producer(static_cast<int>(e)));
        const auto to = ctpipe::detail::ix(fifos.consumer(static_cast<int>(e)));
        b[2 * e] = g.value_bytes[from][to];
        b[2 * e + 1] = g.gradient_bytes[from][to];
      }
    } else {
      [&]<std::size_t... E>(std::index_sequence<E...>) {
        ((b[2 * E] = b[2 * E + 1] = tensor_bytes_at<
              Model, ctpipe::detail::ix(stages.first[ctpipe::detail::ix(fifos.consumer(E) % chain_length)])>()),
         ...);
      }
      (std::make_index_sequence<edges>{});
    }
    return b;
  }();
};

/// What an executor holds for its process's rank (one of the ranks' programs, picked at
/// construction, on the CUDA backend Cuda): the one virtual call per step.
template <class Input, class Target, class Cuda>
struct rank_base {
  using Stream = typename Cuda::stream_type;
  virtual ~rank_base() = default;
  virtual Stream stream() const = 0;
  virtual Stream second_stream() const = 0;
  virtual Stream origin_stream() const = 0;
  virtual void enqueue(std::span<const Input> inputs, std::span<const Target> targets, std::span<const int> extents,
                       launch how) = 0;
  virtual std::span<const double> wait() = 0;
  // The global batch's tokens of the last step (a model with token-major tensors; else none).
  virtual std::span<const int> tokens() const noexcept = 0;
  virtual int graph_captures() const noexcept = 0;
  virtual void set_context_origin(step_origin o) noexcept = 0;
  virtual step_origin context_origin() const noexcept = 0;
  // The optimizer's place (process_place, below): copies of a layer between host and device on
  // the rank's stream, waited for by finish_copies; the norm's terms summed over every process.
  virtual void copy_layer(std::size_t k, void* to, const void* from, std::size_t bytes, bool to_host) = 0;
  virtual void finish_copies() = 0;
  virtual void sum_norm_terms(std::span<double> terms) = 0;
  // std::logic_error where a step has been enqueued and not waited for.
  virtual void check_between_steps() const = 0;
  // The device optimizer's update that ends every training step (null: none; process_place).
  virtual void set_update(update_hook<Cuda>* u) = 0;
  virtual const update_hook<Cuda>* update() const noexcept = 0;
  virtual void remove_update() noexcept = 0;
  // record_steps (collective), where the transport gathers the processes' times (the MPI device
  // path's: process_recording, below); the last recording, replica d's, on process 0.
  virtual void record(bool on) = 0;
  virtual const measured_step& recorded_step(int replica) const = 0;
  virtual double recorded_alignment_error() const = 0;
};

/// The processes of a replica gave different extents (check_process_extents): std::invalid_argument
/// naming this process's rank, its replica and the first microbatch they differ in.
[[noreturn]] inline void throw_extents_differ(std::string_view who, int rank, int replica, int microbatch, int extent) {
  throw std::invalid_argument(std::string(who) + ": rank " + std::to_string(rank) + ", replica " +
                              std::to_string(replica) + ", microbatch " + std::to_string(microbatch) +
                              ": this process gave extent " + std::to_string(extent) +
                              ", and not every process of its replica gave the same; every process must give step() "
                              "the same extents");
}

/// After a step or a pass of a model with token-major tensors (`mine`: the extents this process
/// gave): std::invalid_argument where the processes of this replica did not all give the same
/// (each sized its receives by its own).
template <class Mode, class Transport>
void check_process_extents(Transport& tr, std::span<const int> mine) {
  if constexpr (Mode::model_type::token_capacity > 0) {
    if (const int i = tr.check_extents(mine); i >= 0)
      throw_extents_differ(Transport::tag::name, Transport::rank, tr.first_microbatch() / Mode::microbatches, i,
                           mine[ctpipe::detail::ix(i)]);
  }
}

/// A rank's program in its process, for the process mode Mode and the transport Transport (of rank
/// Transport::rank): the transport, the engine on it, and whether the stages' gradients are summed
/// across replicas. A step issues the rank's tasks in program order (process_program); an executor
/// may add to enqueue and wait (NCCL: the first exchange before a capture, the peers' statuses).
template <class Mode, class Transport>
struct process_rank : rank_base<typename Mode::input_type, typename Mode::target_type, typename Mode::cuda_type> {
  static constexpr int rank = Transport::rank;
  using model_type = typename Mode::model_type;
  using input_type = typename Mode::input_type;
  using target_type = typename Mode::target_type;
  using stream_type = typename Mode::stream_type;
  using engine_type =
      engine<model_type, Mode::stages, typename Mode::loss_type, typename Mode::cuda_type, Mode::layout, Transport>;
  Transport tr;
  engine_type en;
  model_type& model;
  bool sums;
  // record_steps: each task between two timed events; the transport aligns the clocks and gathers
  // (a transport that records: recording_begin, recording_times, recording_gather).
  static constexpr bool records = requires(Transport & t, std::span<const int> n, stream_type s) {
    t.recording_begin(n, s);
  };
  std::unique_ptr<task_events<typename Mode::cuda_type>> events;
  bool recording = false, recorded_pending = false;

  /// `transport`: the transport's constructor arguments.
  template <class... TransportArgs>
  process_rank(model_type& m, typename Mode::loss_type& loss, bool replica_sums, TransportArgs&&... transport)
      : tr(std::forward<TransportArgs>(transport)...), en(m, loss, &tr), model(m), sums(replica_sums) {}
  void enqueue(std::span<const input_type> inputs, std::span<const target_type> targets, std::span<const int> extents,
               launch how) override {
    if constexpr (records)
      if (recording) [[unlikely]] {
        enqueue_recorded(inputs, targets, extents);
        return;
      }
    en.enqueue(
        inputs, targets, how,
        [this] {
          process_program<Mode::plan, Mode::issue, rank>::template run<Mode::dispatch_strategy, Mode::stages>(
              en, tr, model, sums);
          en.finish_groups();
        },
        extents);
  }
  std::span<const double> wait() override {
    const bool recorded = recorded_pending;
    recorded_pending = false;
    const std::span<const double> losses = en.wait();
    check_process_extents<Mode>(tr, en.tokens());
    if constexpr (records)
      if (recorded) [[unlikely]] {
        events->read_host(rank, tr.recording_times());
        tr.recording_gather(events->anchor_error(), en.origin_stream());
      }
    return losses;
  }
  void record(bool on) override {
    if constexpr (records) {
      en.check_between_steps();
      if (on && !events) {
        auto e = std::make_unique<task_events<typename Mode::cuda_type>>();
        const std::vector<int> lengths(Mode::plan.table.length.begin(), Mode::plan.table.length.end());
        const std::vector<int> devices(lengths.size(), tr.device());
        e->make(std::span<const int>(lengths), std::span<const int>(devices), [](int r) { return r == rank; });
        events = std::move(e);
      }
      recording = on;
    } else {
      static_cast<void>(on);
      throw std::logic_error("ctpipe: this executor does not record its steps");
    }
  }
  const measured_step& recorded_step(int replica) const override {
    if constexpr (records)
      return tr.recording_step(replica);
    else
      return none_recorded(replica);
  }
  double recorded_alignment_error() const override {
    if constexpr (records)
      return tr.recording_error();
    else
      return 0.0;
  }
  std::span<const int> tokens() const noexcept override {
    if constexpr (model_type::token_capacity > 0)
      return tr.tokens();
    else
      return {};
  }
  int graph_captures() const noexcept override { return en.graph_captures(); }
  void set_context_origin(step_origin o) noexcept override { en.set_context_origin(o); }
  step_origin context_origin() const noexcept override { return en.context_origin(); }
  stream_type stream() const override { return en.stream(rank); }
  stream_type second_stream() const override { return en.second_stream(rank); }
  stream_type origin_stream() const override { return en.origin_stream(); }
  void copy_layer(std::size_t k, void* to, const void* from, std::size_t bytes, bool to_host) override {
    en.copy_layer(k, to, from, bytes, to_host);
  }
  void finish_copies() override { en.finish_copies(); }
  void sum_norm_terms(std::span<double> terms) override {
    en.check_between_steps();
    tr.sum_terms(terms, en.origin_stream());
  }
  void check_between_steps() const override { en.check_between_steps(); }
  void set_update(update_hook<typename Mode::cuda_type>* u) override { en.set_update(u); }
  const update_hook<typename Mode::cuda_type>* update() const noexcept override { return en.update(); }
  void remove_update() noexcept override { en.remove_update(); }

 private:
  static const measured_step& none_recorded(int) noexcept {
    static const measured_step none{};
    return none;
  }
  // A recorded step (collective): the clocks measured (the transport's), the GPU's clock anchored
  // on the host's, then the rank's tasks issued eagerly, each between two timed events.
  CTPIPE_COLD void enqueue_recorded(std::span<const input_type> inputs, std::span<const target_type> targets,
                                    std::span<const int> extents) {
    en.check_between_steps();
    tr.recording_begin(std::span<const int>(Mode::plan.table.length.data(), Mode::plan.table.length.size()),
                       en.origin_stream());
    events->anchor(en.stream(rank));
    en.enqueue(
        inputs, targets, launch::eager,
        [this] {
          process_program<Mode::plan, Mode::issue, rank>::template run_recorded<Mode::stages>(en, tr, model, sums,
                                                                                              *events);
          en.finish_groups();
        },
        extents);
    recorded_pending = true;
  }
};

/// What an executor holds for its process's forward-only pass (process_forward, below).
template <class Input, class Target, class Output>
struct forward_base {
  virtual ~forward_base() = default;
  // One pass (evaluation where `targets` is not empty, else prediction into `outputs`), its layers'
  // context at `origin`; `who` names the call in its errors.
  virtual token_losses run(const char* who, std::span<const Input> inputs, std::span<const Target> targets,
                           std::span<const Output> outputs, std::span<const int> extents, step_origin origin) = 0;
  // The microbatches whose output the last prediction wrote in this process.
  virtual std::span<const bool> outputs_written() const noexcept = 0;
};

/// A rank's forward-only pass in its process (Mode: a forward process_mode; Transport: its own, for
/// the forward-only table's rings), on the streams of the rank's training engine (`streams`, as the
/// engine takes them); made at the first evaluate() or predict(). A pass is eager.
template <class Mode, class Transport>
struct process_forward final
    : forward_base<typename Mode::input_type, typename Mode::target_type, typename Mode::model_type::output_type> {
  static constexpr int rank = Transport::rank;
  using model_type = typename Mode::model_type;
  using input_type = typename Mode::input_type;
  using target_type = typename Mode::target_type;
  using output_type = typename model_type::output_type;
  using engine_type =
      engine<model_type, Mode::stages, typename Mode::loss_type, typename Mode::cuda_type, Mode::layout, Transport>;
  Transport tr;
  engine_type en;
  model_type& model;

  template <class... TransportArgs>
  process_forward(model_type& m, typename Mode::loss_type& loss, std::span<const typename Mode::stream_type> streams,
                  TransportArgs&&... transport)
      : tr(std::forward<TransportArgs>(transport)...), en(m, nullptr, loss, streams, &tr), model(m) {}
  token_losses run(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                   std::span<const output_type> outputs, std::span<const int> extents, step_origin origin) override {
    en.set_context_origin(origin);
    en.enqueue_forward(
        who, inputs, targets, outputs, launch::eager,
        [this] {
          process_program<Mode::plan, Mode::issue, rank>::template run<Mode::dispatch_strategy, Mode::stages>(
              en, tr, model, false);
        },
        extents);
    const std::span<const double> losses = en.wait();
    check_process_extents<Mode>(tr, en.tokens());
    if constexpr (model_type::token_capacity > 0)
      return {losses, tr.tokens()};
    else
      return {losses, {}};
  }
  std::span<const bool> outputs_written() const noexcept override { return en.outputs_written(); }
};

/// ctpipe::optimizer's place (a device_parameter_place, optim/optimizer.hpp) for an executor of one
/// process per rank on the engine (Derived: it gives where() and, to this class, own_rank(),
/// its rank_base, and model_). A process updates the layers its rank runs, on host copies; one
/// process counts each layer (exec/detail/layer_holders.hpp); the norm's terms meet in one sum over
/// every process (the transport's); process 0 leads. It is ctpipe::cuda::device_optimizer's
/// executor too (cuda/optimizer.hpp): the update of this process's layers ends its every training
/// step, its terms summed with the step's losses.
template <class Derived, class Mode>
class process_place {
 public:
  using backend_type = typename Mode::cuda_type;
  bool updates_layer(std::size_t k) const {
    return ctpipe::detail::rank_runs_layer<Mode::plan, Mode::stages>(self().where().rank, k, Mode::model_type::size);
  }
  bool counts_layer(std::size_t k) const {
    return ctpipe::detail::rank_counts_layer<Mode::plan, Mode::stages>(self().where().rank, self().where().replica, k,
                                                                       Mode::model_type::size);
  }
  bool leads() const { return self().where().process == 0; }
  /// Each element summed over every process (collective: every process calls it at once).
  void sum_norm_terms(std::span<double> terms) const { self().own_rank().sum_norm_terms(terms); }
  void copy_to_host(std::size_t k, void* to, const void* from, std::size_t bytes) const {
    self().own_rank().copy_layer(k, to, from, bytes, true);
  }
  void copy_to_device(std::size_t k, void* to, const void* from, std::size_t bytes) const {
    self().own_rank().copy_layer(k, to, from, bytes, false);
  }
  void finish_copies() const { self().own_rank().finish_copies(); }

  /// For ctpipe::cuda::device_optimizer: the model, where this process runs its layers (as rank 0
  /// of the update, on the rank's origin stream), and the update that ends every training step (one
  /// at a time; std::logic_error where another is attached). Between steps; a captured graph is
  /// dropped. Every process attaches one, or none (else every process's wait() throws
  /// std::logic_error, the update skipped).
  typename Mode::model_type& model() const noexcept { return self().model_; }
  void check_between_steps() const { self().own_rank().check_between_steps(); }
  update_placement<backend_type> placement_for_update() const {
    check_between_steps();
    update_placement<backend_type> p;
    p.processes = true;
    for (std::size_t k = 0; k < Mode::model_type::size; ++k) {
      p.rank_of_layer.push_back(updates_layer(k) ? 0 : -1);
      p.counted.push_back(counts_layer(k) ? 1 : 0);
    }
    p.device_of_rank.push_back(self().device());
    p.streams.push_back(self().own_rank().origin_stream());
    p.executor = this;
    p.check_between_steps = [](const void* e) { static_cast<const process_place*>(e)->check_between_steps(); };
    return p;
  }
  void attach_update(update_hook<backend_type>* u) const {
    if (self().own_rank().update() != nullptr)
      throw std::logic_error(std::string(Derived::executor_name) +
                             ": a device optimizer is already attached to this executor");
    self().own_rank().set_update(u);
  }
  void detach_update(const update_hook<backend_type>* u) const noexcept {
    if (self().own_rank().update() == u) self().own_rank().remove_update();
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace ctpipe::cuda::detail
