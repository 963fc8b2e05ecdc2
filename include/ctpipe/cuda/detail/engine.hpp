// The CUDA executors' engine, written against a backend: ctpipe::cuda::runtime (ctpipe/cuda/runtime.hpp, the
// CUDA runtime API) in production, a stream simulator in ctpipe's CPU tests. This header includes no CUDA header.
//
// One host thread issues every rank's tasks, in one global order computed at compile time
// (make_issue_plan), each into its rank's stream; cross-rank dependencies are an event recorded on
// one stream and waited on by another, every event created once at construction. Buffers
// (stashes, gradients, same-rank slots, rings) are allocated once per device from the slot plan. A
// step can be captured once into a CUDA graph and replayed.
//
// Split backward: an I runs each layer's backward_input (its whole backward where the layer does
// not split) and keeps the gradients it computed, the incoming one included, in the stage's grad
// stash (one set per stash slot, device memory) until its W, which runs each splitting layer's
// backward_weight from the stash. An overlapped pair F&B runs its F on the rank's stream and its B
// on a second stream of the rank, forked from the first before the pair and joined after it (so
// the two may overlap on the GPU; in a graph capture too).
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
#include <ctpipe/cuda/detail/graph_layout.hpp>
#include <ctpipe/cuda/detail/layout.hpp>
#include <ctpipe/cuda/error.hpp>
#include <ctpipe/cuda/launch.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/detail/acquire.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/op_switch.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>  // rank_of_layer, holds_member
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
class engine {
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

  // Task Op of stage S on rank R (Other: a skip message's far stage), with arguments `a`, labelled
  // `label`: one body per (rank, op, stage), not per task.
  template <int R, op_kind Op, int S, int Other = -1, class A>
  void issue_task(const A& a, const char* label, bool switch_device) {
    if constexpr (model_checked) issue_checked<R, Op, S, Other>(a, label, switch_device);
  }

 private:
  // (A model that broke one of its rules builds no task: see the op switch.)
  template <int R, op_kind Op, int S, int Other, class A>
  void issue_checked(const A& a, const char* label, bool switch_device) {
    if constexpr (only >= 0 && is_compute(Op))
      if (hollow_) [[unlikely]] {
        hollow_task<R, Op, S>(a);
        return;
      }
    Backend::range_push(label);
    const range_end pop;
    try {
      if constexpr (layout_.multi_device)
        if (switch_device) check_task<R, Op, S>(Backend::set_device(on(device_of_rank<R>)), "cudaSetDevice", a);
      ctpipe::detail::run_op<R, Op, S, Other>(*this, a);
      const auto s = streams_[ctpipe::detail::ix(R)];
      if (sync_each_ && !capturing_) [[unlikely]] {
        check_task<R, Op, S>(Backend::synchronize(s), "cudaStreamSynchronize (sync_after_each_task)", a);
        if constexpr (layout_.pairs)
          check_task<R, Op, S>(Backend::synchronize(aux_[ctpipe::detail::ix(R)]),
                               "cudaStreamSynchronize (sync_after_each_task)", a);
      }
    } catch (...) {
      if constexpr (only >= 0)
        fail_task<R, Op, S>(a);
      else
        rethrow_as_task_failure(R, task{Op, S, a.microbatch, -1});
    }
  }

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
  // Process mode keys its FIFOs by edge (cuda/detail/process_mode.hpp: fifo_layout): boundary b is
  // edge b, crossing k (a graph model's skip messages) edge boundary_count + k.
  static constexpr int boundary_count = stage_count > 1 ? stage_count - 1 : 0;
  static constexpr int edge_count = boundary_count + static_cast<int>(layout_.stages.skips.size());
  static constexpr int edge_from(int e) {
    return e < boundary_count ? e : layout_.stages.skips[ctpipe::detail::ix(e - boundary_count)].from;
  }
  static constexpr int edge_to(int e) {
    return e < boundary_count ? e + 1 : layout_.stages.skips[ctpipe::detail::ix(e - boundary_count)].to;
  }
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
  template <int S, int K>
  element_t<S, K> stash_view(int slot) const {
    constexpr auto u = ctpipe::detail::ix(S);
    return view<element_t<S, K>>(base<S>() + mem.stash_base[u] + ctpipe::detail::ix(slot) * mem.stash_stride[u] +
                                 mem.stash_at[u][ctpipe::detail::ix(K)]);
  }
  template <int S, int K>
  element_t<S, K> grads_view() const {
    constexpr auto u = ctpipe::detail::ix(S);
    return view<element_t<S, K>>(base<S>() + mem.grads_base[u] + mem.grads_at[u][ctpipe::detail::ix(K)]);
  }
  // Split backward: the gradients an I keeps for its W, in stash slot `slot`'s set.
  template <int S, int K>
  element_t<S, K> grad_stash_view(int slot) const;
  // The gradient of element K written by a B (scratch) or an I (kept for the W).
  template <int S, int K, bool Input>
  element_t<S, K> gradient_view(int slot) const;
  // Boundary B: same-rank backward slots and the backward ring on stage B's device, the forward ring on stage B + 1's.
  template <int B>
  static constexpr std::size_t boundary_stride = round_up(boundary_tensor<B>::bytes);
  template <int B>
  boundary_tensor<B> local_backward_view(int slot) const {
    return view<boundary_tensor<B>>(base<B>() + mem.local_backward_base[ctpipe::detail::ix(B)] +
                                    ctpipe::detail::ix(slot) * boundary_stride<B>);
  }
  template <int B>
  boundary_tensor<B> ring_backward_view(int message) const {
    return view<boundary_tensor<B>>(base<B>() + mem.ring_backward_base[ctpipe::detail::ix(B)] +
                                    ctpipe::detail::ix(message % capacity<B>) * boundary_stride<B>);
  }
  template <int B>
  boundary_tensor<B> ring_forward_view(int message) const {
    return view<boundary_tensor<B>>(base<B + 1>() + mem.ring_forward_base[ctpipe::detail::ix(B)] +
                                    ctpipe::detail::ix(message % capacity<B>) * boundary_stride<B>);
  }
  template <int S>
  void*& input_pointer(int slot) {
    return inputs_of_[layout_.x_bases[ctpipe::detail::ix(S)] + ctpipe::detail::ix(slot)];
  }
  typename Backend::event_type event(int i) const { return events_[ctpipe::detail::ix(i)]; }

  // ---- errors --------------------------------------------------------------------------------
  static void check(typename Backend::status s, const char* call, const char* context) {
    if (!Backend::ok(s)) [[unlikely]]
      throw error(call, Backend::code(s), Backend::describe(s), context);
  }
  template <int R, op_kind Op, int S, class A>
  static void check_task(typename Backend::status s, const char* call, const A& a) {
    if (!Backend::ok(s)) [[unlikely]]
      fail(s, call, R, task{Op, S, a.microbatch, -1});
  }
  // Out of line and shared by every task: the code of a task holds only the test and a call.
  [[noreturn]] CTPIPE_NOINLINE static void fail(typename Backend::status s, const char* call, int rank, task t) {
    throw error(call, Backend::code(s), Backend::describe(s), "", rank, t);
  }
  // In a handler: errors of the executor pass through; anything user code threw becomes a
  // task_failure naming the task.
  [[noreturn]] CTPIPE_NOINLINE static void rethrow_as_task_failure(int rank, task t) {
    try {
      throw;
    } catch (const error&) {
      throw;
    } catch (const task_failure&) {
      throw;
    } catch (...) {
      const auto cause = std::current_exception();
      throw task_failure(Transport::tag::name, rank, t, cause);
    }
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

  // ---- shared parameters (one process: the CUDA executor) -------------------------------------
  // Makes each group's events and scratch, and starts every member's copy equal to its group's
  // first layer's (a copy on the origin stream, waited for).
  static constexpr int rank_of_layer(int k) {
    return ctpipe::detail::rank_of_layer<Stages>(layout_.stages.stage_rank, k);
  }
  static constexpr int device_of_layer(int k) { return layout_.device[ctpipe::detail::ix(rank_of_layer(k))]; }
  template <std::size_t G>
  static constexpr bool holds(int r) {
    return ctpipe::detail::holds_member<Model, G, Stages>(layout_.stages.stage_rank, r);
  }
  // Whether a sum of group G on device d needs a scratch of the group's length there: to hold the
  // sum (its first member is elsewhere) and to bring another device's member in.
  template <std::size_t G>
  static constexpr int scratch_parts(int d) {
    int away = 0;
    for (const int k : ctpipe::detail::group_members<Model, G>) away += device_of_layer(k) != d ? 1 : 0;
    const bool first_away = device_of_layer(ctpipe::detail::group_members<Model, G>[0]) != d;
    return (first_away ? 1 : 0) + (away > (first_away ? 1 : 0) ? 1 : 0);
  }
  void set_up_groups();

 public:
  // After a task of rank R (current device: R's): record the events of the groups in `record`,
  // and sum the groups in `sum` on R's stream.
  template <int R>
  void after_group_tasks(std::uint32_t record, std::uint32_t sum);

 private:
  // Group G's sum on rank R's stream, once every other holder's event is: the first member's
  // gradient (or a copy of it on R's device) plus each other member's in layer order (a copy of it
  // first where it is on another device), each an IEEE addition (Backend::add); then the sum into
  // every member. sum_shared_gradients's order, so sequential_step's bits.
  template <int R, std::size_t G>
  void sum_group();

  // ---- shared parameters (process mode: the NCCL executor) -----------------------------------
  // A group whose members are all on one rank is summed there, on its stream, as above. One whose
  // members are on several ranks: once this rank's members are final, the sums' stream gathers
  // every holder's members from this replica's holders (Transport::gather: each holder sends its
  // members in layer order, as many slots as the holder with most), adds them in layer order
  // (Backend::add) and copies the sum into this rank's members: every holder adds the same parts
  // in the same order, so all get the same bits, those of sum_shared_gradients. Groups that cross
  // ranks are gathered in group order on every process (a collective that one process issued
  // before another that a second process issued first could deadlock). With replicas, each
  // member's layer is then summed across them (members first, then replicas).
  static constexpr auto holders = ctpipe::detail::group_holders<Model, Stages>(layout_.stages.stage_rank, ranks);
  template <std::size_t G>
  static constexpr int holder_count() {
    return holders[G];
  }
  template <std::size_t G>
  static constexpr int members_on(int r) {
    int c = 0;
    for (const int k : ctpipe::detail::group_members<Model, G>) c += rank_of_layer(k) == r ? 1 : 0;
    return c;
  }
  template <std::size_t G>
  static constexpr int most_members() {
    int m = 0;
    for (int r = 0; r < ranks; ++r) m = members_on<G>(r) > m ? members_on<G>(r) : m;
    return m;
  }
  // Member k's slot among the gathered ones: its rank's place among the holders, then its place
  // among that rank's members.
  template <std::size_t G>
  static constexpr int slot_of(int k) {
    const int r = rank_of_layer(k);
    int h = 0, j = 0;
    for (int q = 0; q < r; ++q) h += holds<G>(q) ? 1 : 0;
    for (const int m : ctpipe::detail::group_members<Model, G>) {
      if (m == k) break;
      j += rank_of_layer(m) == r ? 1 : 0;
    }
    return h * most_members<G>() + j;
  }
  // Set-up: starts this rank's members equal to their group's first layer: copies on one rank, a
  // gather of the parameters across ranks. Enqueued, not waited for (the other processes may not
  // have reached theirs): the first step waits for it (write_step_number).
  void set_up_process_groups();
  // On the sums' stream: this rank's members of G (spans `x`, parameters or gradients) packed in
  // layer order, then every holder's gathered.
  template <std::size_t G, class Spans>
  void gather_group(const Spans& x, bool construction);
  template <std::size_t G>
  void sum_across_ranks();
  // With replicas: each of this rank's members of G, its whole layer summed across them.
  template <std::size_t G>
  void sum_members_across_replicas();
  template <std::size_t G>
  void sum_process_group();

 public:
  /// Process mode: this rank's members of group G are final on its stream (its last B or W of
  /// them has been issued). Sums each group that can go now, in group order (a transport whose
  /// groups_at_end holds: none, until finish_groups).
  template <std::size_t G>
  void group_final();
  /// Process mode, once every task of the step has been issued: the groups not summed yet.
  void finish_groups() {
    if constexpr (shares && only >= 0 && Transport::tag::shared_parameters) sum_ready_groups();
    if constexpr (mirrored && only >= 0) sum_ready_mirrors();
  }

 private:
  void sum_ready_groups();

  // ---- a bidirectional table's mirrors (dualpipe) --------------------------------------------
  // Model stage J runs twice: as stage J of the first chain and stage chain_length + J of the
  // second. Once both copies have run their last B or W of the step, each of the stage's layers gets
  // the sum of the two copies' gradients (first plus second: one IEEE addition per element, the
  // same bits whichever is added to which), in both copies.
  //
  // One process: the rank whose such task comes last in the issue order sums (the executor says
  // where: make_mirror_points), after waiting for the other's event; a copy on another device is
  // brought next to its own first (a scratch of the stage's largest layer on each device).
  // A function of each layer K of model stage J that holds parameters, and of its index L.
  template <int J, class F>
  static void each_mirrored_layer(F&& f);
  void set_up_mirrors() {
    ctpipe::detail::check_mirror(model_, *mirror_, Transport::tag::name);
    [&]<std::size_t... J>(std::index_sequence<J...>) { (set_up_mirror<static_cast<int>(J)>(), ...); }
    (std::make_index_sequence<ctpipe::detail::ix(chain_length)>{});
  }
  template <int J>
  void set_up_mirror();

 public:
  /// One process, a bidirectional table: after a task of rank R (current device: R's), record the
  /// events of the model stages in `record` (bit J: model stage J), and sum those in `sum`, on R's
  /// stream.
  template <int R>
  void after_mirror_tasks(std::uint32_t record, std::uint32_t sum);

 private:
  template <int R, int J>
  void sum_mirror();

  // A process per rank: this process holds model stages only and chain_length - 1 - only, each in
  // its own model (the first chain's stage `only`, the second's copy of the other), and so does
  // the process of rank chain_length - 1 - only. The two sum both stages' layers over their pair's
  // communicator (Transport::sum_pair: an all-reduce of two, the same bits on both), the lower
  // model stage first on both, each once this process's copy is final (a transport whose
  // groups_at_end holds: once every task has been issued); then, with replicas, each layer across
  // them (the copies first, then the replicas).
  static constexpr std::array<int, 2> held_stages = ctpipe::detail::mirrored_stages(chain_length, only < 0 ? 0 : only);

 public:
  /// Process mode, a bidirectional table: this rank's copy of stage S is final on its stream (its
  /// last B or W of S has been issued). Sums what can go now, in model stage order.
  template <int S>
  void mirror_final();

 private:
  void sum_ready_mirrors() {
    ctpipe::detail::start_in_order<held_stages>(mirrors_ready_, mirrors_done_,
                                                [&]<int J>() { sum_process_mirror<J>(); });
  }
  template <int J>
  void sum_process_mirror();

  // ---- a step --------------------------------------------------------------------------------
  // Forks every rank's stream from the origin stream, zeroes the gradients, issues the tasks,
  // copies the losses to the host and joins the streams back (the shape a capture needs). Process
  // mode: the transport's streams fork and join too, its first receives are posted before the
  // tasks, and it brings the losses to the host (every process gets them).
  template <class IssueTasks>
  void issue_step(IssueTasks& issue_tasks);

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
  // Layer first + K of stage S's saved state for the microbatch in stash slot `slot` (a view into
  // the slot; nothing for a layer without one).
  template <int S, int K>
  auto saved_view(int slot) const;
  // Before a step is issued: its number, and in a model with token-major tensors each microbatch's
  // extent, into each device's step words, from pinned host memory on the origin stream (so every
  // rank's stream, forked from it, sees them; outside a capture, so a replayed graph reads its own
  // step's). The host words are rewritten only once the last step's copy has read them: a wait()
  // since says so, else (steps enqueued back to back) its event.
  void write_step_number();

  template <int S, int K>
  void run_forward(const cuda::context& c, const element_t<S, K>& x, int slot);

  // Forward only, process mode, a transport whose sends read their buffer after the call returns,
  // on a stream of their own (NCCL): before stage S's F writes its stash slot, which holds no
  // activation for a backward, every send from the stage's slots issued so far has read its own.
  template <int S>
  void before_slot_reuse(stream_type s);

  template <int R, int S, class A>
  void forward(const A& a, stream_type s);

  // Forward only, the last stage of a chain: evaluation takes the microbatch's loss (its gradient
  // goes to a scratch nothing reads); prediction copies its output y out, zeros past its extent.
  template <int R, int S, class A, class Y, class Dy>
  void finish_forward(const A& a, const cuda::context& c, const Y& y, Dy dy, stream_type s);

  // An overlapped pair F&B: the rank's second stream waits for what its first has issued so far
  // (the pair's receives included), runs the B, and the first waits for it before what follows.
  template <int R, op_kind Op, int S, class A>
  void fork_pair(const A& a, stream_type s) {
    const auto e = event(layout_.pair_fork_event + R);
    check_task<R, Op, S>(Backend::record(e, s), "cudaEventRecord", a);
    check_task<R, Op, S>(Backend::wait(aux_[ctpipe::detail::ix(R)], e), "cudaStreamWaitEvent", a);
  }
  template <int R, op_kind Op, int S, class A>
  void join_pair(const A& a, stream_type s) {
    const auto e = event(layout_.pair_join_event + R);
    check_task<R, Op, S>(Backend::record(e, aux_[ctpipe::detail::ix(R)]), "cudaEventRecord", a);
    check_task<R, Op, S>(Backend::wait(s, e), "cudaStreamWaitEvent", a);
  }

  // Layer first + K of stage S: a full backward, or (Input) an I: backward_input where the layer
  // splits its backward, its whole backward where it does not.
  template <int S, int K, bool Input, class X, class Y, class Dy, class Dx>
  void layer_backward(const cuda::context& c, const X& x, const Y& y, int slot, const Dy& dy, Dx& dx);

  template <int S, int K, bool Input, class Dy>
  void run_backward(const cuda::context& c, const element_t<S, 0>& x0, int slot, const Dy& dy, element_t<S, 0>& dx0);

  // B (Input false) or I (Input true). An I keeps its incoming gradient and the ones it computes
  // in the stage's grad stash for the W; the stage's input gradient goes where a B's goes.
  template <int R, int S, bool Input, class A>
  void backward(const A& a, stream_type s);

  // W: every layer of stage S that splits its backward adds its weight gradients, from the stash
  // and the gradients its I kept. A stage none of whose layers splits has nothing to do.
  template <int S, std::size_t... K>
  static constexpr bool any_splits(std::index_sequence<K...>) {
    return (device_splittable_layer<typename Model::template layer_type<ctpipe::detail::ix(first_layer<S>) + K>> ||
            ...);
  }
  template <int S, int K>
  void layer_weight(const cuda::context& c, const element_t<S, 0>& x0, int slot);
  template <int R, int S, class A>
  void weight(const A& a, stream_type s);

  template <int R, int S, class A>
  void send_forward(const A& a, stream_type s);

  template <int R, int S, class A>
  void send_backward(const A& a, stream_type s);

  // ---- a graph model's tasks (defined in cuda/detail/engine_graph.hpp) ------------------------
  // Every message is a copy: a stage's F copies what it takes in into its stash slot (from the
  // producer's slot on one device, from a ring across devices), gathers each layer's input parts
  // from there and from its own layers' outputs, and packs a message for each later stage that
  // reads something it made. A B or I takes the gradient terms later stages sent (the farthest
  // first), then runs the layers from the top down; each input part's gradient starts its sum in
  // place or is added to it (Backend::add), in sequential_step's order.
  using wiring = ctpipe::detail::graph_wiring<Model, Stages>;
  using places = graph_places<Model, Stages>;
  static constexpr auto& go = places::offsets;
  template <int I>
  using edge_tensor_t = typename ctpipe::detail::graph_stage_types<Model, Stages>::template edge_tensor_t<I>;
  static constexpr int crossing_count = static_cast<int>(layout_.stages.skips.size());
  // The crossing from stage A to stage B (crossing_count where there is none).
  static constexpr int crossing_of(int a, int b) {
    for (int k = 0; k < crossing_count; ++k)
      if (layout_.stages.skips[ctpipe::detail::ix(k)].from == a && layout_.stages.skips[ctpipe::detail::ix(k)].to == b)
        return k;
    return crossing_count;
  }
  // Stage A sends stage B a message (its neighbour's, or a crossing's).
  static constexpr bool sends(int a, int b) { return b == a + 1 || crossing_of(a, b) < crossing_count; }
  template <int K>
  static constexpr int skip_capacity = layout_.stages.skips[ctpipe::detail::ix(K)].capacity;
  template <int K>
  static constexpr int skip_reused = microbatches > skip_capacity<K> ? microbatches - skip_capacity<K> : 0;
  static constexpr int skip_key(int k, int mb) { return k * microbatches + mb; }

  template <int S>
  char* slot_base(int slot) const {
    return base<S>() + mem.stash_base[ctpipe::detail::ix(S)] +
           ctpipe::detail::ix(slot) * mem.stash_stride[ctpipe::detail::ix(S)];
  }
  template <int S, bool Input>
  char* grads_base(int slot) const;
  template <int S>
  char* scratch_base() const {
    return base<S>() + mem.scratch_base[ctpipe::detail::ix(S)];
  }
  // Message (A -> B)'s ring slot for message n, and gradient message (B -> A)'s, of crossing K.
  template <int K>
  char* skip_ring_forward(int n) const;
  template <int K>
  char* skip_ring_backward(int n) const;
  template <int K>
  char* skip_local_backward(int slot) const {
    constexpr skip_route r = layout_.stages.skips[ctpipe::detail::ix(K)];
    return base<r.from>() + mem.skip_local_backward_base[ctpipe::detail::ix(K)] +
           ctpipe::detail::ix(slot) * go.gradient_bytes[ctpipe::detail::ix(r.from)][ctpipe::detail::ix(r.to)];
  }
  // Boundary B's rings and same-rank slots, sized by its messages.
  template <int B>
  char* graph_ring_forward(int n) const {
    return base<B + 1>() + mem.ring_forward_base[ctpipe::detail::ix(B)] +
           ctpipe::detail::ix(n % capacity<B>) * go.value_bytes[ctpipe::detail::ix(B)][ctpipe::detail::ix(B + 1)];
  }
  template <int B>
  char* graph_ring_backward(int n) const {
    return base<B>() + mem.ring_backward_base[ctpipe::detail::ix(B)] +
           ctpipe::detail::ix(n % capacity<B>) * go.gradient_bytes[ctpipe::detail::ix(B)][ctpipe::detail::ix(B + 1)];
  }
  template <int B>
  char* graph_local_backward(int slot) const {
    return base<B>() + mem.local_backward_base[ctpipe::detail::ix(B)] +
           ctpipe::detail::ix(slot) * go.gradient_bytes[ctpipe::detail::ix(B)][ctpipe::detail::ix(B + 1)];
  }

  // A view of tensor type T whose part I is at where(std::integral_constant<int, I>) (a constant,
  // so that every offset below is one).
  template <class T, class Where>
  static T parts_view(Where&& where);
  template <int Layer>
  using layer_t = typename Model::template layer_type<ctpipe::detail::ix(Layer)>;

  // Layer `Layer` (of stage S) for the microbatch in stash slot `slot`: its input parts, its output
  // parts, its saved state.
  template <int S, int Layer>
  typename layer_t<Layer>::input_type graph_x(int slot, int mb) const;
  template <int S, int Layer>
  typename layer_t<Layer>::output_type graph_y(int slot) const {
    return parts_view<typename layer_t<Layer>::output_type>(
        [&](auto o) { return slot_base<S>(slot) + go.out_at[ctpipe::detail::ix(Layer)][ctpipe::detail::ix(o.value)]; });
  }
  template <int S, int Layer, bool Input>
  typename layer_t<Layer>::output_type graph_dy(int slot) const {
    return parts_view<typename layer_t<Layer>::output_type>([&](auto o) {
      return grads_base<S, Input>(slot) + go.grad_at[ctpipe::detail::ix(Layer)][ctpipe::detail::ix(o.value)];
    });
  }
  template <int S, int Layer>
  auto graph_saved(int slot) const;
  // Part o of microbatch mb's model input.
  char* model_input_part(int mb, int o) const;

  // A message between stages A < B (Gradient: the gradient message from B to A), copied for
  // microbatch mb through one(to, from, bytes): in one copy where none of its tensors is
  // token-major or while capturing, else each tensor's used bytes.
  template <bool Gradient, int A, int B, class One>
  void copy_message(int mb, char* to, const char* from, One&& one);

  template <int R, op_kind Op, int S, class A>
  void copy(const A& a, void* to, const void* from, std::size_t bytes, stream_type s) {
    if (bytes > 0)
      check_task<R, Op, S>(Backend::memcpy_async(to, on(device_of<S>), from, on(device_of<S>), bytes, s),
                           "cudaMemcpyAsync", a);
  }
  // to += from, as tensor type T's elements.
  template <int R, op_kind Op, int S, class T, class A>
  void add(const A& a, void* to, const void* from, stream_type s);
  template <std::size_t... K, class F>
  static constexpr void each_index(std::index_sequence<K...>, F&& f) {
    (f(std::integral_constant<int, static_cast<int>(K)>{}), ...);
  }
  template <int N, class F>
  static constexpr void each(F&& f) {
    each_index(std::make_index_sequence<ctpipe::detail::ix(N)>{}, f);
  }

  // Process mode: the bytes message n of FIFO (E, Dir) carries (`whole`: all of it). In an eager
  // step of a model with token-major tensors, a message of one token-major tensor carries its
  // microbatch's used rows (the receiver knows the microbatch of message n, and every process the
  // step's extents); in a graph step, or a message of several tensors or of fixed size, all of it.
  // A graph step that turns hollow and runs eagerly (fail_task) keeps its whole messages.
  template <int E, int Dir>
  std::size_t transport_bytes(int n, std::size_t whole) const noexcept;
  // The bytes of one token of FIFO (E, Dir)'s messages where each is one token-major tensor; else 0.
  template <int E, int Dir>
  static constexpr std::size_t message_token_bytes() {
    if constexpr (token_capacity == 0) {
      return 0;
    } else if constexpr (graph) {
      constexpr int a = edge_from(E), b = edge_to(E);
      constexpr int count = Dir == 0 ? wiring::wire_count(a, b) : wiring::term_count(b, a);
      if constexpr (count != 1)
        return 0;
      else
        return wiring::at(Dir == 0 ? wiring::wire_edge(a, b, 0) : wiring::term_edge(b, a, 0)).token_bytes;
    } else {
      return ctpipe::detail::token_bytes_of<boundary_tensor<E>>();
    }
  }

  // The edge of crossing K (process mode).
  template <int K>
  static constexpr int crossing_edge = boundary_count + K;
  // Route M's place in the step's layout: its crossing (a boundary's index, or a skip
  // crossing's), its edge (process mode's FIFO), hand-off and ring capacity, and the events of its
  // first message (sent, and consumed where the hand-off is a ring copy).
  struct route_facts {
    int crossing, edge;
    handoff how;
    int capacity, sent, consumed;
  };
  template <route M>
  static constexpr route_facts facts_of = [] {
    constexpr bool b = M.backward;
    if constexpr (M.skip) {
      constexpr int k = crossing_of(M.lower, M.upper);
      constexpr auto u = ctpipe::detail::ix(k);
      return route_facts{k,
                         crossing_edge<k>,
                         b ? layout_.skip_backward[u] : layout_.skip_forward[u],
                         skip_capacity<k>,
                         b ? layout_.skip_sent_backward[u] : layout_.skip_sent_forward[u],
                         b ? layout_.skip_consumed_backward[u] : layout_.skip_consumed_forward[u]};
    } else {
      constexpr auto u = ctpipe::detail::ix(M.lower);
      return route_facts{M.lower,
                         M.lower,
                         b ? layout_.backward[u] : layout_.forward[u],
                         capacity<M.lower>,
                         b ? layout_.sent_backward[u] : layout_.sent_forward[u],
                         b ? layout_.consumed_backward[u] : layout_.consumed_forward[u]};
    }
  }();
  // A graph model's message of route M: a value from the producer's stash slot, a gradient from
  // the stage's scratch; through the transport (process mode), or copied into the receiver's ring
  // where the hand-off is a copy (once its slot is free), then its sent event recorded.
  template <int R, route M, class A>
  void graph_send(const A& a, stream_type s);
  // Process mode, a hollow step (fail_task): what the transport needs of a graph stage's compute op.
  template <int R, op_kind Op, int S, class A>
  void graph_hollow(const A& a, stream_type s);
  // A copy from stage S's device to stage T's (a peer copy where they differ).
  template <int R, op_kind Op, int S, int T, class A>
  void peer_copy(const A& a, void* to, const void* from, std::size_t bytes, stream_type s) {
    if (bytes > 0)
      check_task<R, Op, S>(Backend::memcpy_async(to, device_of<T>, from, device_of<S>, bytes, s), "cudaMemcpyPeerAsync",
                           a);
  }

  template <int R, int S, class A>
  void graph_forward(const A& a, stream_type s);

  // Where stage S's B or I writes its gradient message for stage A: a same-rank slot, the
  // receiver's ring slot written in place (once the receiver has read what it held), or the
  // stage's scratch, which the send copies out.
  template <int R, op_kind Op, int S, int A, class Args>
  char* gradient_message(const Args& a, stream_type s);

  // B (Input false) or I (Input true) of a graph stage. An I's gradients stay in its stash slot's
  // set for the W.
  template <int R, int S, bool Input, class A>
  void graph_backward(const A& a, stream_type s);

  // W of a graph stage: every layer that splits its backward adds its weight gradients.
  template <int R, int S, class A>
  void graph_weight(const A& a, stream_type s);

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
  // Shared groups (one process): group G's event of rank r at G x ranks + r, and its scratch on
  // device d at G x devices + d (where a sum there needs one).
  static constexpr std::size_t group_slots = shares ? ctpipe::detail::ix(group_count) : 0;
  std::array<typename Backend::event_type, group_slots * ctpipe::detail::ix(ranks)> group_events_{};
  std::array<bool, group_slots * ctpipe::detail::ix(ranks)> group_event_made_{};
  std::array<void*, group_slots * ctpipe::detail::ix(device_count)> group_scratch_{};
  // Process mode: each group's gather buffers (what this rank sends, what every holder sent), and
  // the groups whose members are final this step / already summed.
  std::array<void*, only >= 0 ? group_slots : 0> group_buffers_{};
  std::uint32_t groups_ready_ = 0, groups_done_ = 0;
  typename Backend::event_type tied_{};  // the members' start, enqueued at construction
  bool tied_made_ = false, tie_pending_ = false;
  // A bidirectional table: one process's mirror (the second chain's layers); model stage J's event
  // of rank r at J x ranks + r, and its scratch on the device of its copy c at 2J + c (where the
  // two copies are on different devices); a process per rank: the stages whose copy is final this
  // step / already summed.
  static constexpr std::size_t mirror_slots = mirrored && only < 0 ? ctpipe::detail::ix(chain_length) : 0;
  Model* mirror_ = nullptr;
  std::array<typename Backend::event_type, mirror_slots * ctpipe::detail::ix(ranks)> mirror_events_{};
  std::array<bool, mirror_slots * ctpipe::detail::ix(ranks)> mirror_event_made_{};
  std::array<void*, 2 * mirror_slots> mirror_scratch_{};
  std::uint32_t mirrors_ready_ = 0, mirrors_done_ = 0;
};

}  // namespace ctpipe::cuda::detail

#include <ctpipe/cuda/detail/engine_copies.hpp>  // the optimizer's copies, the op switch's primitives
#include <ctpipe/cuda/detail/engine_graph.hpp>   // a graph model's tasks
#include <ctpipe/cuda/detail/engine_step.hpp>    // set-up, a step, its errors
#include <ctpipe/cuda/detail/engine_sums.hpp>    // shared groups' and mirrors' sums
#include <ctpipe/cuda/detail/engine_tasks.hpp>   // a chain's tasks
