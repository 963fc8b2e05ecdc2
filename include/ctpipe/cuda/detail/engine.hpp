// The CUDA executors' engine, written against a backend: ctpipe::cuda::runtime (ctpipe/cuda/runtime.hpp, the
// CUDA runtime API) in production, a stream simulator in ctpipe's CPU tests. This header includes no CUDA header.
//
// One host thread issues every rank's tasks, in one global order computed at compile time
// (make_issue_plan), each into its rank's stream; cross-rank dependencies are an event recorded on
// one stream and waited on by another, every event created once at construction. Buffers
// (stashes, gradients, same-rank slots, rings) are allocated once per device from the slot plan. A
// step can be captured once into a CUDA graph and replayed.
//
// An overlapped pair F&B runs its F on the rank's stream and its B on a second stream of the rank,
// forked from the first before the pair and joined after it (so the two may overlap on the GPU; in
// a graph capture too). The parts: a chain's tasks and a graph model's (engine_parts.hpp), shared
// parameters' sums (engine_groups.hpp), a bidirectional table's mirrors (engine_mirrors.hpp).
//
// The engine serves the CUDA executor (every rank of a table from one host thread) and, in process
// mode, the NCCL executor and the MPI executor's device path (one rank per process).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>  // CTPIPE_NOINLINE
#include <ctpipe/cuda/detail/engine_errors.hpp>
#include <ctpipe/cuda/detail/engine_groups.hpp>
#include <ctpipe/cuda/detail/engine_mirrors.hpp>
#include <ctpipe/cuda/detail/engine_parts.hpp>
#include <ctpipe/cuda/detail/graph_layout.hpp>
#include <ctpipe/cuda/detail/layout.hpp>
#include <ctpipe/cuda/detail/update_hook.hpp>
#include <ctpipe/cuda/error.hpp>
#include <ctpipe/cuda/launch.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/detail/acquire.hpp>
#include <ctpipe/detail/each.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/op_switch.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>  // rank_of_layer, holds_member
#include <ctpipe/model/compute_copy.hpp>       // has_compute_copy (a mirror copies it)
#include <ctpipe/model/context.hpp>            // step_origin
#include <ctpipe/model/extent.hpp>
#include <ctpipe/model/graph.hpp>  // edge
#include <ctpipe/model/shared_parameters.hpp>
#include <ctpipe/model/tensors.hpp>
#include <ctpipe/schedule/table.hpp>  // stage_chains

namespace ctpipe::cuda::detail {

/// The CUDA executor, for the rules it keeps (executor_requirements) and its messages.
struct executor_tag {
  static constexpr std::string_view name = "ctpipe::cuda::executor";
  static constexpr ctpipe::detail::layer_kind layers = ctpipe::detail::layer_kind::device;
  static constexpr bool frozen_prefix = false, recompute = false, copies_layers = false, sends_bytes = false,
                        graphs = true, shared_parameters = true, bidirectional = true, mirror_copies = false;
};

// A backend's handle for adding gradients (Backend::add), which only graph models and shared
// parameters need: a backend that runs chains without them has none.
template <class Backend, bool Graph>
struct adder_of {
  using type = char;
};
template <class Backend>
struct adder_of<Backend, true> {
  using type = typename Backend::adder_type;
};

// The engine of a single process that issues every rank's tasks (the CUDA executor). In process
// mode, the transport takes its place: its rank, and its executor's tag.
struct all_ranks {
  static constexpr int rank = -1;
  using tag = executor_tag;
};

// Streams, events, buffers and the code of every task, for Model split by Stages with loss Loss,
// laid out by Layout, on Backend. The executor calls issue_task<R, Op, S>() once per task.
//
// Process mode (Transport other than all_ranks; the NCCL executor): the engine belongs to one
// process of a job, which runs rank Transport::rank alone, on the transport's device. It then
// creates that rank's streams and buffers only, and every tensor that crosses to another rank goes
// through the transport (send, receive, a slot consumed, a buffer about to be overwritten), whose
// streams fork from the step's origin stream and join it at the end.
template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
class engine : backend_calls<Backend> {
  using route = ctpipe::detail::route;

 public:
  static constexpr int only = Transport::rank;  // process mode: the one rank this engine runs; -1 otherwise
  // The layout, as a constant of the engine's own: every read below goes through it, none through
  // the template parameter object (clang 14 reads some of that object's members wrongly at run
  // time, and crashes generating code for others).
  static constexpr auto layout_ = Layout;
  static constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(Layout)::ranks);
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(Layout)::stage_count);
  static constexpr int device_count = static_cast<int>(CTPIPE_NTTP_TYPE(Layout)::devices_used);
  static constexpr int microbatches = layout_.stages.microbatches;
  // The tokens a microbatch holds at most (ctpipe/model/extent.hpp); 0 for a model of fixed shapes.
  static constexpr std::size_t token_capacity = Model::token_capacity;
  // A model that is not a chain, or passes several tensors between layers: the graph path.
  static constexpr bool graph = graph_path<Model>;
  // Layers that share parameters (ctpipe::shared_with): their gradients are summed after the
  // group's last backward (cuda/detail/group_points.hpp says where), and Backend::add is needed.
  static constexpr bool shares = has_shared_parameters_v<Model>;
  static constexpr int group_count = static_cast<int>(shared_group_count<Model>);
  // A bidirectional table (dualpipe): two chains of chain_length stages, the second running
  // mirrored copies of the model's stages (stage S runs model stage S % chain_length). One process
  // keeps the copies' layers in a second model (the mirror); a process per rank holds two different
  // model stages, each in its own model. A stage's two copies' gradients are summed once both have
  // run their last B or W (the mirror sums, below).
  static constexpr int chain_length = layout_.stages.chain_length;
  static constexpr bool mirrored = chain_length != stage_count;
  static constexpr stage_chains chains_{chain_length, mirrored ? microbatches / 2 : microbatches};
  // A forward-only table (evaluate, predict): no gradient is zeroed, summed or computed, and the
  // last stage of a chain ends each microbatch's F with its loss or its output (finish_forward).
  static constexpr bool forward_only = layout_.stages.forward_only;
  static constexpr bool model_checked = Model::checked;  // (else the op switch builds no task)
  // Backend::add: for a graph model's gradient sums, shared groups and one process's mirror sums.
  static constexpr bool adds = (graph || shares || (mirrored && only < 0)) && !forward_only;
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;
  using stream_type = typename Backend::stream_type;

  engine(Model& model, Loss& loss, Transport* transport = nullptr) : model_(model), loss_(loss), transport_(transport) {
    ctpipe::detail::acquire_or_release([this] { acquire(); }, [this] { release(); });
  }
  // One process running a bidirectional table: `mirror` holds the layers of the second chain.
  engine(Model& model, Model& mirror, Loss& loss) : model_(model), loss_(loss), mirror_(&mirror) {
    ctpipe::detail::acquire_or_release([this] { acquire(); }, [this] { release(); });
  }
  // A forward-only pass (the executors' evaluate and predict), on the streams of its training
  // engine (`streams`: rank 0's to the last rank's, then the origin stream; in process mode only
  // this process's rank's are used), which it neither makes nor destroys: what a layer bound to a
  // stream (a cuBLAS handle) serves the pass too, and a pass follows the steps before it in stream
  // order. `mirror`: one process's bidirectional table's, else null; `transport`: process mode's.
  engine(Model& model, Model* mirror, Loss& loss, std::span<const stream_type> streams, Transport* transport = nullptr)
      : model_(model), loss_(loss), borrowed_(true), transport_(transport), mirror_(mirror) {
    static_assert(forward_only, "ctpipe: only a forward-only pass borrows its streams");
    std::copy(streams.begin(), streams.begin() + ranks, streams_.begin());
    origin_ = streams[ctpipe::detail::ix(ranks)];
    ctpipe::detail::acquire_or_release([this] { acquire(); }, [this] { release(); });
  }
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  ~engine() { release(); }

  // A step: `issue_tasks` issues every task (through issue_task), in the global order.
  // `extents`: one per microbatch (ctpipe/model/extent.hpp), or none (each microbatch uses the
  // model's whole token capacity); they reach the layers as device data, so a captured graph serves
  // steps of any extents.
  template <class IssueTasks>
  void enqueue(std::span<const input_type> inputs, std::span<const target_type> targets, launch how,
               IssueTasks&& issue_tasks, std::span<const int> extents = {}) {
    ctpipe::detail::check_microbatches("ctpipe::cuda::executor::enqueue", inputs.size(), targets.size(), microbatches);
    ctpipe::detail::check_extents("ctpipe::cuda::executor::enqueue", extents, ctpipe::detail::ix(microbatches),
                                  token_capacity);
    start(inputs, targets, how, issue_tasks, extents);
  }
  // A forward-only pass: evaluation where `targets` is not empty (each microbatch's loss), else
  // prediction (each microbatch's output into `outputs`, device views on the last stage's device,
  // zeroed past the microbatch's extent). `who` names the call in its errors.
  template <class IssueTasks>
  void enqueue_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                       std::span<const output_type> outputs, launch how, IssueTasks&& issue_tasks,
                       std::span<const int> extents);

 private:
  template <class IssueTasks>
  void start(std::span<const input_type> inputs, std::span<const target_type> targets, launch how,
             IssueTasks& issue_tasks, std::span<const int> extents);

 public:
  /// A forward-only pass: the microbatches whose output the last prediction wrote (those whose
  /// chain's last stage this engine runs: in process mode, this process's share).
  std::span<const bool> outputs_written() const noexcept { return {written_.data(), written_.size()}; }

  /// The tokens of each microbatch of the step enqueued last (its extents; the capacity where none
  /// were given). Empty for a model of fixed shapes.
  std::span<const int> tokens() const noexcept { return {extents_.data(), extents_.size()}; }

  std::span<const double> wait();
  /// What device layers and the loss found in their kernels during the step (a bad token id or
  /// target: ctpipe/layers/device/fault.hpp), thrown by their report() once it is done.
  void report_faults();

  /// Process mode: the task of this process that failed in the step enqueued last (its rank, the
  /// task, and a task_failure in `error`), if one did.
  struct failure {
    bool failed = false;
    int rank = -1;
    task t{};
    std::exception_ptr error;
  };
  const failure& failed_task() const noexcept { return failure_; }

  void invalidate_graph() noexcept {
    if (graph_ready_) (void)Backend::graph_destroy(graph_);
    graph_ready_ = false;
  }

  /// Where the steps that follow stand for the layers' context (as the host executors'): the next
  /// step's number, counting up by one per step, and the index of microbatch 0 in the global batch
  /// (process mode: past the replica's own offset, which the transport gives). The microbatch is
  /// part of a captured graph, so a new first microbatch drops the graph; the step is not (it is
  /// device data).
  void set_context_origin(step_origin o) noexcept {
    next_step_ = o.step;
    if (o.first_microbatch != first_microbatch_) invalidate_graph();
    first_microbatch_ = o.first_microbatch;
  }
  step_origin context_origin() const noexcept { return {next_step_, first_microbatch_}; }
  int graph_captures() const noexcept { return captures_; }
  void sync_after_each_task(bool on) noexcept { sync_each_ = on; }
  stream_type stream(int r) const { return streams_.at(ctpipe::detail::ix(r)); }
  stream_type second_stream(int r) const;
  stream_type origin_stream() const noexcept { return origin_; }
  Model& model() noexcept { return model_; }

  // ---- the optimizer's copies (ctpipe::optimizer of a device model) --------------------------
  // `bytes` between host memory and layer k's memory of the model (not a mirror's), on the stream
  // of the rank that runs the layer's stage (process mode: this process's), to be waited for by
  // finish_copies. Between steps only: a step enqueued and not yet waited for is a logic_error.
  void copy_layer(std::size_t k, void* to, const void* from, std::size_t bytes, bool to_host) const;
  void finish_copies() const;
  void check_between_steps() const;
  // The update that ends every training step from now on (cuda/detail/update_hook.hpp; null: none),
  // set between steps (a captured graph is dropped); removed after a step in flight has run.
  void set_update(update_hook<Backend>* u);
  void remove_update() noexcept;
  const update_hook<Backend>* update() const noexcept { return update_; }

  // Task Op of stage S on rank R (Other: a skip message's far stage), with arguments `a`, labelled
  // `label`: one body per (rank, op, stage), not per task.
  template <int R, op_kind Op, int S, int Other = -1, class A>
  void issue_task(const A& a, const char* label, bool switch_device) {
    if constexpr (model_checked) issue_checked<R, Op, S, Other>(a, label, switch_device);
  }

 private:
  // (A model that broke one of its rules builds no task: see the op switch.)
  template <int R, op_kind Op, int S, int Other, class A>
  void issue_checked(const A& a, const char* label, bool switch_device);

 public:
  // The op switch's primitives (exec/detail/op_switch.hpp), on rank R's stream: a compute op
  // (paired F&B: the F forks the pair, its B runs on the second stream and joins); a message.
  template <int R, op_kind Op, int S, class A>
  void run_compute(const A& a);
  template <int R, op_kind Op, int S, class A>
  void compute_on(const A& a, stream_type on);
  template <int R, route M, class A>
  void send(const A& a);
  // A receive: through the transport (process mode), else the sender's event.
  template <int R, route M, class A>
  void receive(const A& a);

 private:
  // ---- types and buffers ---------------------------------------------------------------------
  using types = ctpipe::detail::stage_types<Model, Stages>;
  template <int S>
  static constexpr int first_layer = types::template first_layer<chains_.model_stage(S)>;
  template <int S>
  static constexpr int layer_count = types::template layer_count<chains_.model_stage(S)>;
  // Element K of stage S: the input of its layer K (K = layer_count: its output).
  template <int S, int K>
  using element_t = typename types::template element_t<chains_.model_stage(S), K>;
  template <int B>
  using boundary_tensor = typename types::template boundary_tensor<chains_.model_stage(B)>;
  // The layers stage S computes with: the model's, or one process's mirror for the second chain.
  template <int S>
  Model& layers() noexcept;
  template <int S>
  static constexpr int rank_of = layout_.stages.stage_rank[ctpipe::detail::ix(S)];
  template <int R>
  static constexpr int device_of_rank = layout_.device[ctpipe::detail::ix(R)];
  template <int S>
  static constexpr int device_of = device_of_rank<rank_of<S>>;
  // This engine holds rank r (every rank, but in process mode).
  static constexpr bool mine(int r) { return only < 0 || r == only; }
  // The device a call names for the layout's device d: the process's own in process mode.
  int on(int d) const;
  template <int B>
  static constexpr int capacity = layout_.stages.channel_capacity[ctpipe::detail::ix(B)];
  // Process mode's FIFOs, one per edge (cuda/detail/layout.hpp: edge_from).
  static constexpr int boundary_count = cuda::detail::boundary_count(layout_);
  static constexpr int edge_count = boundary_count + static_cast<int>(layout_.stages.skips.size());
  static constexpr int edge_from(int e) { return cuda::detail::edge_from(layout_, e); }
  static constexpr int edge_to(int e) { return cuda::detail::edge_to(layout_, e); }
  template <int E>
  static constexpr int edge_capacity =
      E < boundary_count ? layout_.stages.channel_capacity[ctpipe::detail::ix(E)]
                         : layout_.stages.skips[ctpipe::detail::ix(E - boundary_count)].capacity;
  template <int B>
  static constexpr int reused = microbatches > capacity<B> ? microbatches - capacity<B> : 0;
  static constexpr auto& mem = layout_.memory;
  // The messages each way of an edge in a step: every microbatch's, or (a bidirectional table)
  // those of its chain, half of them.
  static constexpr int edge_messages = chains_.microbatches;

  template <class T>
  static T view(void* p) {
    return T{static_cast<typename T::value_type*>(p)};
  }
  template <int S>
  char* base() const {
    return static_cast<char*>(memory_[ctpipe::detail::ix(device_of<S>)]);
  }
  typename Backend::event_type event(int i) const { return events_[ctpipe::detail::ix(i)]; }

  // ---- errors --------------------------------------------------------------------------------
  using backend_calls<Backend>::check, backend_calls<Backend>::fail;
  template <int R, op_kind Op, int S, class A>
  static void check_task(typename Backend::status s, const char* call, const A& a) {
    if (!Backend::ok(s)) [[unlikely]]
      fail(s, call, R, task{Op, S, a.microbatch, -1});
  }
  [[noreturn]] static void rethrow_as_task_failure(int rank, task t) {
    cuda::detail::rethrow_as_task_failure(Transport::tag::name, rank, t);
  }
  struct range_end {
    ~range_end() { Backend::range_pop(); }
  };

  // Process mode: a task of this process failed. The other processes cannot know before the step
  // ends, and wait for this one's messages: so the step goes on hollow (compute ops do only their
  // hand-off bookkeeping, sends and receives run as planned, on whatever the buffers hold) and every
  // process learns of the failure at its end (the transport's status, summed with the losses).
  template <int R, op_kind Op, int S, class A>
  CTPIPE_NOINLINE void fail_task(const A& a);
  // The step's first failure, kept (its task_failure) and told to the transport; the step hollow.
  CTPIPE_NOINLINE void record_failure(int rank, task t);
  // A compute op of a hollow step: only what the transport needs of it (each call may repeat).
  template <int R, op_kind Op, int S, class A>
  void hollow_task(const A& a);
  // Ends a capture whose step failed, and drops it.
  void abandon_capture() noexcept;

  // ---- set-up and tear-down ------------------------------------------------------------------
  static constexpr int stage_device(int s) {
    return layout_.device[ctpipe::detail::ix(layout_.stages.stage_rank[ctpipe::detail::ix(s)])];
  }
  // Each event on the device of the stream that records it (cuda/detail/layout.hpp).
  static constexpr auto event_devices = cuda::detail::event_devices<ctpipe::detail::ix(layout_.events)>(layout_);

  void acquire();

  void release() noexcept;

  // Lets every stream of the engine (and of the transport) finish what it was given.
  void synchronize_all() noexcept;

  // ---- shared parameters (cuda/detail/engine_groups.hpp) -------------------------------------
  using groups_type = group_sums<Model, Stages, Backend, Layout, Transport>;
  friend groups_type;
  groups_type groups_;

 public:
  /// One process: after a task of rank R (current device: R's), record the events of the groups
  /// in `record`, and sum the groups in `sum` on R's stream.
  template <int R>
  void after_group_tasks(std::uint32_t record, std::uint32_t sum) {
    groups_.template after_tasks<R>(*this, record, sum);
  }
  /// Process mode: this rank's members of group G are final on its stream (its last B or W of
  /// them has been issued).
  template <std::size_t G>
  void group_final() {
    if constexpr (Transport::tag::shared_parameters) groups_.template final<G>(*this);
  }
  /// Process mode, once every task of the step has been issued: the groups and mirrors not summed yet.
  void finish_groups() {
    if constexpr (shares && only >= 0 && Transport::tag::shared_parameters) groups_.sum_ready(*this);
    if constexpr (mirrored && only >= 0) mirrors_.sum_ready(*this);
  }

 private:
  // ---- a bidirectional table's mirrors (cuda/detail/engine_mirrors.hpp) ------------------------
  using mirrors_type = mirror_sums<Model, Stages, Backend, Layout, Transport>;
  friend mirrors_type;
  mirrors_type mirrors_;

 public:
  /// One process, a bidirectional table: after a task of rank R (current device: R's), record the
  /// events of the model stages in `record` (bit J: model stage J), and sum those in `sum`, on R's
  /// stream.
  template <int R>
  void after_mirror_tasks(std::uint32_t record, std::uint32_t sum) {
    mirrors_.template after_tasks<R>(*this, record, sum);
  }
  /// Process mode, a bidirectional table: this rank's copy of stage S is final on its stream (its
  /// last B or W of S has been issued).
  template <int S>
  void mirror_final() {
    if constexpr (mirrored) mirrors_.template final<S>(*this);
  }

 private:
  // ---- a step --------------------------------------------------------------------------------
  // Forks every rank's stream from the origin stream, zeroes the gradients, issues the tasks,
  // copies the losses to the host and joins the streams back (the shape a capture needs). Process
  // mode: the transport's streams fork and join too, its first receives are posted before the
  // tasks, and it brings the losses to the host (every process gets them).
  template <class IssueTasks>
  void issue_step(IssueTasks& issue_tasks);
  // The attached update's phases, each rank's bracketed by the fork and join events.
  void issue_update();

  // One process: the losses of chain C's microbatches (all of them, but in a bidirectional table),
  // from its last stage's device to the host.
  template <int C>
  void copy_losses();
  // Process mode: the last stage of a chain this rank runs (where it takes losses), or -1.
  static constexpr int last_held = [] {
    for (int s = chain_length - 1; s < stage_count; s += chain_length)
      if (layout_.stages.stage_rank[ctpipe::detail::ix(s)] == only) return s;
    return -1;
  }();

  // Process mode: the receives of the first `capacity` messages of every edge that brings this
  // rank a tensor (the rest are posted as slots free up).
  template <std::size_t... E>
  void post_first_receives(std::index_sequence<E...>) {
    (post_first<static_cast<int>(E)>(), ...);
  }
  template <int E>
  void post_first();
  // Message n of edge E (Dir 0: activations into the consumer's ring; 1: gradients into the
  // producer's ring), posted on the transport's stream once its slot is free.
  template <int E, int Dir>
  void post_receive(int n);
  // Process mode: the consumer of message n of edge E has been issued on stream s: its slot is
  // free once s gets there, and takes message n + capacity.
  template <int E, int Dir>
  void consumed(int n, stream_type s) {
    transport_->template consumed<E, Dir>(n, s);
    if (n + edge_capacity<E> < edge_messages) post_receive<E, Dir>(n + edge_capacity<E>);
  }

  // A task failed while the step was being issued: end a capture in progress, and let the work
  // already issued finish, so that no stream still uses a buffer when the caller regains control.
  void abandon_step() noexcept;

  template <std::size_t... K>
  void zero_gradients(std::index_sequence<K...>) {
    (zero_layer<K>(), ...);
  }
  // Layer K's gradients zeroed in each copy (a bidirectional table's second chain has one too); one
  // process's mirror first takes the model's parameters (the step starts from the model's, as the
  // caller's optimiser left them), on the stream of the rank that runs the copy.
  template <std::size_t K>
  void zero_layer();
  template <std::size_t K, int S>
  void zero_copy();

  // ---- the tasks -----------------------------------------------------------------------------
  // The context of task (R, Op, S) for microbatch a.microbatch, naming the stage's first layer
  // (at_layer names each layer in turn).
  template <int R, int S, op_kind Op, class A>
  cuda::context context_of(const A& a, stream_type s) const;
  // The bytes of T a copy within this process moves for microbatch i: in an eager step, what its
  // extent uses (ctpipe/model/extent.hpp); while capturing, all of T (a graph's copies keep their
  // sizes at every replay, and the layers read only the extent's tokens of what they receive).
  template <class T>
  std::size_t used(int i) const noexcept {
    return used_of(T::bytes, ctpipe::detail::token_bytes_of<T>(), i);
  }
  // The same for a tensor of `whole` bytes whose tokens are `token_bytes` each (0: a fixed size).
  std::size_t used_of(std::size_t whole, std::size_t token_bytes, int i) const noexcept;
  // Microbatch i's extent as the host knows it when it issues a task: 0 while capturing, and in a
  // model of fixed shapes.
  int host_extent(int i) const noexcept;
  // Microbatch i's extent word on stage S's device (null in a model of fixed shapes).
  template <int S>
  const int* extent_word(int i) const noexcept;
  static cuda::context at_layer(cuda::context c, int layer) noexcept {
    c.layer = layer;
    return c;
  }
  // Before a step is issued: its number, and in a model with token-major tensors each microbatch's
  // extent, into each device's step words, from pinned host memory on the origin stream (so every
  // rank's stream, forked from it, sees them; outside a capture, so a replayed graph reads its own
  // step's). The host words are rewritten only once the last step's copy has read them: a wait()
  // since says so, else (steps enqueued back to back) its event.
  void write_step_number();

  // Forward only, process mode, a transport whose sends read their buffer after the call returns,
  // on a stream of their own (NCCL): before stage S's F writes its stash slot, which holds no
  // activation for a backward, every send from the stage's slots issued so far has read its own.
  template <int S>
  void before_slot_reuse(stream_type s);

  // Forward only, the last stage of a chain: evaluation takes the microbatch's loss (its gradient
  // goes to a scratch nothing reads); prediction copies its output y out, zeros past its extent.
  template <int R, int S, class A, class Y, class Dy>
  void finish_forward(const A& a, const cuda::context& c, const Y& y, Dy dy, stream_type s);

  // An overlapped pair F&B: the rank's second stream waits for what its first has issued so far
  // (the pair's receives included), runs the B, and the first waits for it before what follows.
  template <int R, op_kind Op, int S, class A>
  void fork_pair(const A& a, stream_type s);
  template <int R, op_kind Op, int S, class A>
  void join_pair(const A& a, stream_type s);

  // Stage S has a layer that splits its backward (its W has work).
  template <int S, std::size_t... K>
  static constexpr bool any_splits(std::index_sequence<K...>) {
    return (device_splittable_layer<typename Model::template layer_type<ctpipe::detail::ix(first_layer<S>) + K>> ||
            ...);
  }

  // ---- a stage's tasks: a chain's or a graph model's (cuda/detail/engine_parts.hpp) ------------
  // (parts::chain and parts::graph, named only in member functions' bodies: the parts read the
  // engine's facts, which are complete there; a friend's nested classes are friends too.)
  using parts = stage_parts<engine, Model, Stages, Backend>;
  friend parts;
  static constexpr int crossing_count = static_cast<int>(layout_.stages.skips.size());
  static constexpr int crossing_of(int a, int b) { return cuda::detail::crossing_of(layout_, a, b); }
  template <int K>
  static constexpr int skip_capacity = layout_.stages.skips[ctpipe::detail::ix(K)].capacity;

  // Process mode: the bytes message n of FIFO (E, Dir) carries (`whole`: all of it). In an eager
  // step of a model with token-major tensors, a message of one token-major tensor carries its
  // microbatch's used rows (the receiver knows the microbatch of message n, and every process the
  // step's extents); in a graph step, or a message of several tensors or of fixed size, all of it.
  // A graph step that turns hollow and runs eagerly (fail_task) keeps its whole messages.
  template <int E, int Dir>
  std::size_t transport_bytes(int n, std::size_t whole) const noexcept;
  // The bytes of one token of FIFO (E, Dir)'s messages where each is one token-major tensor; else 0.
  template <int E, int Dir>
  static constexpr std::size_t message_token_bytes();

  // The edge of crossing K (process mode).
  template <int K>
  static constexpr int crossing_edge = boundary_count + K;
  template <route M>
  static constexpr route_facts facts_of = route_facts_of(layout_, M);
  // ---- state ---------------------------------------------------------------------------------
  Model& model_;
  Loss& loss_;
  std::array<stream_type, ctpipe::detail::ix(ranks)> streams_{};
  std::array<stream_type, layout_.pairs ? ctpipe::detail::ix(ranks) : 0> aux_{};  // second streams, for pairs F&B
  stream_type origin_{};
  std::array<typename Backend::event_type, ctpipe::detail::ix(layout_.events)> events_{};
  std::array<void*, ctpipe::detail::ix(device_count)> memory_{};
  std::array<void*, layout_.x_bases.back() + 1> inputs_of_{};
  std::array<input_type, ctpipe::detail::ix(microbatches)> inputs_{}, graph_inputs_{};
  std::array<target_type, ctpipe::detail::ix(microbatches)> targets_{}, graph_targets_{};
  // A forward-only pass: where prediction puts each microbatch's output (else evaluation).
  std::array<output_type, forward_only ? ctpipe::detail::ix(microbatches) : 0> outputs_{}, graph_outputs_{};
  bool predicting_ = false, graph_predicting_ = false;
  std::array<bool, forward_only ? ctpipe::detail::ix(microbatches) : 0> written_{};
  bool borrowed_ = false;  // the streams are another engine's (a forward-only pass's)
  double* losses_host_ = nullptr;
  std::size_t losses_count_ = ctpipe::detail::ix(microbatches);
  typename Backend::graph_type graph_{};
  bool graph_ready_ = false, capturing_ = false, sync_each_ = false, origin_made_ = false;
  bool graph_step_ = false;  // the step enqueued last is a graph step (launch::graph)
  Transport* transport_ = nullptr;
  bool failed_ = false, hollow_ = false;  // process mode: a task of this step failed; the rest runs hollow
  failure failure_{};
  std::array<bool, ctpipe::detail::ix(ranks)> stream_made_{};
  // The layers' context: the next step's number, microbatch 0's index (the user's, and in process
  // mode the replica's), and the step's number in pinned host memory with the event of its copy.
  std::uint64_t next_step_ = 0;
  int first_microbatch_ = 0, replica_offset_ = 0;
  std::uint64_t* step_host_ = nullptr;  // the step's number, then (a token model) its extents
  typename Backend::event_type step_copied_{};
  // The extents of the step enqueued last (a model with token-major tensors; else none).
  std::array<int, (token_capacity > 0 ? ctpipe::detail::ix(microbatches) : 0)> extents_{};
  bool step_event_made_ = false, step_copy_pending_ = false;
  bool in_flight_ = false;  // a step enqueued and not yet waited for
  std::array<bool, layout_.pairs ? ctpipe::detail::ix(ranks) : 0> aux_made_{};
  std::size_t events_made_ = 0;
  int captures_ = 0;
  // A graph model's gradient sums and shared groups' sums: one adder per device (Backend::add).
  std::array<typename adder_of<Backend, adds>::type, adds ? ctpipe::detail::ix(device_count) : 0> adders_{};
  std::array<bool, adds ? ctpipe::detail::ix(device_count) : 0> adder_made_{};
  Model* mirror_ = nullptr;  // a bidirectional table, one process: the second chain's layers
  update_hook<Backend>* update_ = nullptr;
};

}  // namespace ctpipe::cuda::detail

#include <ctpipe/cuda/detail/engine_chain.hpp>   // a chain's tasks
#include <ctpipe/cuda/detail/engine_copies.hpp>  // the optimizer's copies, the op switch's primitives
#include <ctpipe/cuda/detail/engine_graph.hpp>   // a graph model's tasks
#include <ctpipe/cuda/detail/engine_step.hpp>    // set-up, a step, its errors
#include <ctpipe/cuda/detail/engine_tasks.hpp>   // what every task reads: its context, extents, step
