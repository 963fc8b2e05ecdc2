// The MPI executor: one process per pipeline rank, times D data-parallel replicas, launched by
// mpirun (or srun, or any MPI launcher) as ranks x D processes of one program. Each process learns
// its place from the communicator (ctpipe/mpi/grid.hpp), picks its rank's program once, at
// construction, and runs it as the host executor runs a rank: expanded at compile time, with the
// shared host compute (exec/detail/host_compute.hpp), buffers allocated once. A tensor crosses a
// rank boundary as one MPI message, sent and received in the table's proven order:
//  - a receive is posted by its RECV task, just before its consumer, into a ring of as many slots
//    as the table's analysis proves messages in flight on that boundary;
//  - a send copies the tensor into a slot of such a ring and starts MPI_Isend (MPI_Issend with
//    options::synchronous_sends); it waits for the send that used the slot before, never for MPI to
//    buffer anything;
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
#include <ctpipe/exec/detail/host_compute.hpp>
#include <ctpipe/model/partition.hpp>
#include <ctpipe/mpi/detail/session.hpp>
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi {

namespace detail {

template <class T>
MPI_Datatype datatype_of() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else
    static_assert(std::is_same_v<T, float>,
                  "ctpipe::mpi::executor: data parallelism sums gradients of float or double (a layer's gradients() "
                  "holds another type)");
}

// N tensors in flight on one boundary, one direction, and the request of each.
template <class T, int N>
struct ring {
  std::array<T, ctpipe::detail::ix(N)> slot{};
  std::array<MPI_Request, ctpipe::detail::ix(N)> request{};
  ring() { request.fill(MPI_REQUEST_NULL); }
};

// One step of rank R's program in this process: the hand-off over MPI. Buffers of rank R's stages
// only (compute's Only = R).
template <model_type Model, auto Plan, class Loss, auto Layout, int R>
class engine
    : public ctpipe::detail::host::compute<engine<Model, Plan, Loss, Layout, R>, Model, Plan, Loss, Layout, R> {
  using base = ctpipe::detail::host::compute<engine, Model, Plan, Loss, Layout, R>;
  friend base;

 public:
  using base::stage_count;
  using typename base::input_type;
  using typename base::target_type;
  static constexpr int microbatches = Layout.microbatches;

  engine(Model& model, Loss& loss, session& s) : base(model, loss), s_(s) {
    sums_.assign(static_cast<std::size_t>(s.where().replicas * microbatches + s.where().processes), 0.0);
    reductions_.fill(MPI_REQUEST_NULL);
    if (s.ordered_sums() && s.where().replica == 0 && s.where().replicas > 1)  // the replicas' gradients, gathered
      for_each_reduced([&]<std::size_t L, std::size_t K>() {
        const auto g = this->model().template layer<L>().gradients();
        gathered_[K].resize(g.size_bytes() * static_cast<std::size_t>(s.where().replicas));
      });
  }

  // A step: runs the program (run(), which calls run_task and reduce for each task), then agrees
  // with every other process on how the step ended.
  template <class Run>
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets, Run&& run) {
    s_.begin_step();
    this->set_batch(inputs.data(), targets.data());
    int status = 0;
    try {
      this->template zero_rank_gradients<R>();
      run();
    } catch (const ctpipe::detail::host::aborted&) {
      status = s_.own_failed() ? 1 : 2;
    }
    std::fill(sums_.begin(), sums_.end(), 0.0);
    if constexpr (base::template rank_of<stage_count - 1> == R)
      std::copy_n(this->losses().data(), microbatches, sums_.begin() + s_.where().replica * microbatches);
    if (s_.agree(sums_, status)) [[likely]] {
      finish_sums();
      wait_sends(std::make_index_sequence<base::boundaries>{});
      return {sums_.data(), static_cast<std::size_t>(s_.where().replicas * microbatches)};
    }
    drop_requests(std::make_index_sequence<base::boundaries>{});
    s_.recover_and_throw();
  }

  // Task `Op` of stage S; `a` holds its microbatch, slots and message number.
  template <op_kind Op, int S, class Args>
  void run_task(const Args& a) {
    if constexpr (!ctpipe::detail::comm_op[static_cast<int>(Op)]) {
      this->template run_compute<R, Op, S>(a);
    } else if constexpr (Op == op_kind::recv_forward) {
      receive<S - 1, 0, base::template rank_of<S - 1>>(std::get<ctpipe::detail::ix(S - 1)>(in_forward_), a);
    } else if constexpr (Op == op_kind::recv_backward) {
      receive<S, 1, base::template rank_of<S + 1>>(std::get<ctpipe::detail::ix(S)>(in_backward_), a);
    } else if constexpr (Op == op_kind::send_forward) {
      send<S, 0, base::template rank_of<S + 1>>(std::get<ctpipe::detail::ix(S)>(out_forward_), a,
                                                this->template stage_output<S>(a));
    } else if constexpr (Op == op_kind::send_backward) {
      send<S - 1, 1, base::template rank_of<S - 1>>(std::get<ctpipe::detail::ix(S - 1)>(out_backward_), a,
                                                    this->template input_gradient<S>());
    }
  }

  // Stage S's last weight-gradient op of the step has run: with replicas, start summing the
  // gradients of its layers across them.
  template <int S>
  void reduce() {
    if (s_.where().replicas == 1) return;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (reduce_layer<ctpipe::detail::ix(base::template first_layer<S>) + K>(), ...);
    }
    (std::make_index_sequence<ctpipe::detail::ix(base::template end_layer<S> - base::template first_layer<S>)>{});
  }

 private:
  template <int B>
  using tensor = typename base::template boundary_tensor<B>;
  template <int B>
  static constexpr int capacity = Layout.channel_capacity[ctpipe::detail::ix(B)];
  // Boundary B crosses from rank From to rank To (B's lower stage on From, upper on To).
  template <std::size_t B, bool Lower>
  static constexpr bool crosses_here() {
    constexpr int lo = Layout.stage_rank[B], hi = Layout.stage_rank[B + 1];
    return lo != hi && (Lower ? lo : hi) == R;
  }
  template <std::size_t B, bool Lower>
  using ring_at = ring<tensor<static_cast<int>(B)>, crosses_here<B, Lower>() ? capacity<static_cast<int>(B)> : 0>;
  template <std::size_t B>
  using in_forward_t = ring_at<B, false>;  // rank R holds B's upper stage: activations come in
  template <std::size_t B>
  using in_backward_t = ring_at<B, true>;  // rank R holds B's lower stage: gradients come in
  template <std::size_t B>
  using out_forward_t = ring_at<B, true>;
  template <std::size_t B>
  using out_backward_t = ring_at<B, false>;
  template <template <std::size_t> class E>
  using rings = typename base::template tuple_of<E, std::make_index_sequence<base::boundaries>>::type;

  // ---- the hand-off (called by the shared compute ops) ---------------------------------------
  template <int S, class Args>
  const tensor<S - 1>& remote_input(const Args& a) {
    return std::get<ctpipe::detail::ix(S - 1)>(in_forward_).slot[ctpipe::detail::ix(a.message % capacity<S - 1>)];
  }
  template <int S, class Args>
  void input_consumed(const Args&) {}
  template <int S, class Args>
  const tensor<S>& remote_gradient(const Args& a) {
    return std::get<ctpipe::detail::ix(S)>(in_backward_).slot[ctpipe::detail::ix(a.message % capacity<S>)];
  }
  template <int S, class Args>
  void gradient_consumed(const Args&) {}
  void fail(int rank, task t, std::exception_ptr e) noexcept { s_.fail_here(rank, t, std::move(e)); }

  static std::string what_boundary(int b, int dir, int mb, int peer) {
    return std::string(dir == 0 ? "the activations" : "the gradients") + " of microbatch " + std::to_string(mb) +
           " across stages " + std::to_string(b) + " and " + std::to_string(b + 1) + " (rank " + std::to_string(peer) +
           ")";
  }

  // Message a.message of boundary B, direction Dir (0 activations, 1 gradients), from rank From.
  template <int B, int Dir, int From, class Ring, class Args>
  void receive(Ring& r, const Args& a) {
    const auto k = ctpipe::detail::ix(a.message % capacity<B>);
    const place& w = s_.where();
    check(MPI_Irecv(&r.slot[k], static_cast<int>(sizeof(tensor<B>)), MPI_BYTE, process_of(From, w.replica, w.replicas),
                    2 * B + Dir, s_.data(), &r.request[k]),
          "MPI_Irecv");
    s_.wait<true>(r.request[k], [&] { return "waiting for " + what_boundary(B, Dir, a.microbatch, From); });
  }
  template <int B, int Dir, int To, class Ring, class Args>
  void send(Ring& r, const Args& a, const tensor<B>& value) {
    const auto k = ctpipe::detail::ix(a.message % capacity<B>);
    const place& w = s_.where();
    if (r.request[k] != MPI_REQUEST_NULL)
      s_.wait<true>(r.request[k], [&] { return "sending " + what_boundary(B, Dir, a.microbatch, To); });
    r.slot[k] = value;
    const int to = process_of(To, w.replica, w.replicas);
    if (s_.synchronous_sends())
      check(MPI_Issend(&r.slot[k], static_cast<int>(sizeof(tensor<B>)), MPI_BYTE, to, 2 * B + Dir, s_.data(),
                       &r.request[k]),
            "MPI_Issend");
    else
      check(MPI_Isend(&r.slot[k], static_cast<int>(sizeof(tensor<B>)), MPI_BYTE, to, 2 * B + Dir, s_.data(),
                      &r.request[k]),
            "MPI_Isend");
  }
  template <std::size_t... B>
  void wait_sends(std::index_sequence<B...>) {
    [[maybe_unused]] auto one = [&](auto& r) {
      for (MPI_Request& q : r.request) s_.wait<false>(q, [] { return std::string("waiting for a send to complete"); });
    };
    (one(std::get<B>(out_forward_)), ...);
    (one(std::get<B>(out_backward_)), ...);
  }
  // After a failed step: receives are cancelled, sends left to complete on their own (or never: the
  // step's communicators are replaced), reductions left behind with them.
  template <std::size_t... B>
  void drop_requests(std::index_sequence<B...>) {
    [[maybe_unused]] auto cancel = [](auto& r) {
      for (MPI_Request& q : r.request)
        if (q != MPI_REQUEST_NULL) {
          MPI_Cancel(&q);
          MPI_Wait(&q, MPI_STATUS_IGNORE);
        }
    };
    [[maybe_unused]] auto release = [](auto& r) {
      for (MPI_Request& q : r.request)
        if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
    };
    (cancel(std::get<B>(in_forward_)), ...);
    (cancel(std::get<B>(in_backward_)), ...);
    (release(std::get<B>(out_forward_)), ...);
    (release(std::get<B>(out_backward_)), ...);
    reductions_.fill(MPI_REQUEST_NULL);
  }

  // The layers of rank R's stages that have parameters, numbered: layer L's reduction request.
  template <std::size_t L>
  static constexpr bool reduced = has_parameters<typename Model::template layer_type<L>>&& Layout
                                      .stage_rank[ctpipe::detail::ix(Plan.stage_of_layer(static_cast<int>(L)))] == R;
  template <std::size_t... L>
  static constexpr std::size_t count_reduced(std::index_sequence<L...>) {
    return (std::size_t{0} + ... + (reduced<L> ? 1 : 0));
  }
  static constexpr std::size_t reduced_layers = count_reduced(std::make_index_sequence<Model::size>{});

  // f.template operator()<L, K>() for each layer L of rank R with parameters, K its number.
  template <class F>
  void for_each_reduced(F&& f) {
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      // if constexpr, not a conditional: a layer without parameters has no gradients() to name.
      (
          [&] {
            if constexpr (reduced<L>) f.template operator()<L, count_reduced(std::make_index_sequence<L>{})>();
          }(),
          ...);
    }
    (std::make_index_sequence<Model::size>{});
  }

  // Starts the sum of layer L's gradients across the replicas: an all-reduce, or with
  // options::ordered_sums a gather to replica 0 (added up in finish_sums).
  template <std::size_t L>
  void reduce_layer() {
    if constexpr (reduced<L>) {
      constexpr std::size_t k = count_reduced(std::make_index_sequence<L>{});
      auto g = this->model().template layer<L>().gradients();
      using element = std::remove_cvref_t<decltype(g[0])>;
      const int n = static_cast<int>(g.size());
      if (s_.ordered_sums())
        check(MPI_Igather(g.data(), n, datatype_of<element>(), gathered_[k].data(), n, datatype_of<element>(), 0,
                          s_.replicas(), &reductions_[k]),
              "MPI_Igather");
      else
        check(
            MPI_Iallreduce(MPI_IN_PLACE, g.data(), n, datatype_of<element>(), MPI_SUM, s_.replicas(), &reductions_[k]),
            "MPI_Iallreduce");
    }
  }

  // At the step's end: waits for the sums. Ordered: replica 0 adds each layer's gathered gradients
  // in replica order, ((g0 + g1) + g2) + ..., and broadcasts the result.
  void finish_sums() {
    const auto what = [] { return std::string("summing gradients across replicas"); };
    if (s_.ordered_sums() && s_.where().replicas > 1)
      for_each_reduced([&]<std::size_t L, std::size_t K>() {
        s_.wait<false>(reductions_[K], what);
        auto g = this->model().template layer<L>().gradients();
        using element = std::remove_cvref_t<decltype(g[0])>;
        if (s_.where().replica == 0) {
          const auto* all = reinterpret_cast<const element*>(gathered_[K].data());
          const std::size_t n = g.size();
          for (std::size_t i = 0; i < n; ++i) {
            element sum = all[i];
            for (std::size_t r = 1; r < static_cast<std::size_t>(s_.where().replicas); ++r) sum += all[r * n + i];
            g[i] = sum;
          }
        }
        check(
            MPI_Ibcast(g.data(), static_cast<int>(g.size()), datatype_of<element>(), 0, s_.replicas(), &reductions_[K]),
            "MPI_Ibcast");
      });
    for (MPI_Request& r : reductions_) s_.wait<false>(r, what);
  }

  session& s_;
  rings<in_forward_t> in_forward_;
  rings<in_backward_t> in_backward_;
  rings<out_forward_t> out_forward_;
  rings<out_backward_t> out_backward_;
  std::array<MPI_Request, reduced_layers> reductions_{};
  std::array<std::vector<std::byte>, reduced_layers> gathered_{};  // ordered sums, on replica 0
  std::vector<double> sums_;  // the global batch's losses, then a status per process (agree())
};

// What the executor holds for its rank: the one virtual call is step's.
template <class Input, class Target>
struct rank_base {
  virtual ~rank_base() = default;
  virtual std::span<const double> step(std::span<const Input> inputs, std::span<const Target> targets) = 0;
};

// FNV-1a over what every process must agree on.
struct fingerprint {
  std::uint64_t h = 14695981039346656037ull;
  constexpr void add(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
};

// The fingerprint of execution plan Plan with stage plan Stages: the table's programs, the stages'
// layers and recomputation, and `bytes(b)` of each boundary tensor b.
template <auto Plan, auto Stages, class Bytes>
constexpr std::uint64_t fingerprint_of(Bytes bytes) {
  constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(Plan.table)::static_ranks);
  constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(Plan.table)::static_stages);
  fingerprint f;
  f.add(static_cast<std::uint64_t>(ranks));
  f.add(static_cast<std::uint64_t>(stage_count));
  f.add(static_cast<std::uint64_t>(Plan.table.microbatches()));
  for (int r = 0; r < ranks; ++r)
    for (const task& t : Plan.table.program(r)) {
      f.add(static_cast<std::uint64_t>(t.op));
      f.add(static_cast<std::uint64_t>(t.stage));
      f.add(static_cast<std::uint64_t>(t.microbatch));
    }
  for (int s = 0; s <= stage_count; ++s) f.add(static_cast<std::uint64_t>(Stages.first[ctpipe::detail::ix(s)]));
  for (int s = 0; s < stage_count; ++s) f.add(Stages.recompute[ctpipe::detail::ix(s)] ? 1 : 0);
  for (int b = 0; b + 1 < stage_count; ++b) f.add(bytes(b));
  return f.h;
}

}  // namespace detail

/// Runs Table (a compute or lowered task table, verified at compile time) over Model's layers split
/// into stages by Plan, with loss Loss, as one process per rank per replica of the communicator
/// (ranks x D processes; see ctpipe/mpi/grid.hpp for who runs what). Host layers and tensors;
/// tensors that cross a rank boundary are sent as bytes, so they must be trivially copyable.
template <auto Table, model_type Model, auto Plan, class Loss, dispatch Dispatch = dispatch::automatic>
class executor {
 public:
  static constexpr auto plan = make_execution_plan<Table>();
  static constexpr auto& table = plan.table;
  static constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_ranks);
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_stages);
  /// Plan (a stand-in where Plan breaks a rule: its static_assert has said which).
  static constexpr auto stages = ctpipe::detail::usable_stages<Model, stage_count, Plan>();
  static constexpr int microbatches = Table.params.microbatches;
  static constexpr dispatch dispatch_strategy = resolve_dispatch(
      Dispatch, ctpipe::detail::ix(*std::ranges::max_element(plan.table.length)), automatic_unroll_limit);
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;

  static_assert(ctpipe::detail::executor_requirements<ctpipe::detail::executor_kind::mpi, Table, Model, Plan,
                                                      stage_count, ctpipe::detail::backward_in_order(plan)>::value);
  static_assert(
      []<std::size_t... K>(std::index_sequence<K...>) {
        return (layer<typename Model::template layer_type<K>> && ...);
      }(std::make_index_sequence<Model::size>{}),
      "ctpipe::mpi::executor: every layer must be a host layer (forward(x, y), backward(x, y, dy, dx))");
  static_assert(loss_function<Loss, output_type>,
                "ctpipe::mpi::executor: Loss must have a target_type and double operator()(const output_type& y, "
                "const target_type& t, output_type& dy)");
  static_assert(
      []<std::size_t... B>(std::index_sequence<B...>) {
        return (
            std::is_trivially_copyable_v<
                typename ctpipe::detail::stage_types<Model, stages>::template boundary_tensor<static_cast<int>(B)>> &&
            ...);
      }(std::make_index_sequence<ctpipe::detail::ix(stage_count > 1 ? stage_count - 1 : 0)>{}),
      "ctpipe::mpi::executor: a tensor that crosses a stage boundary must be trivially copyable (it is sent as bytes)");
  static_assert(stage_count < 16384, "ctpipe::mpi::executor: at most 16,383 stages (two MPI tags per boundary)");

  /// Collective over `comm` (every process constructs its executor): checks the launch (throws
  /// launch_error on every process), then sets up this process's rank: its buffers, allocated once.
  /// The model and the loss must outlive the executor; MPI must be initialised, and stay so.
  executor(Model& model, Loss& loss, MPI_Comm comm = MPI_COMM_WORLD, options o = {})
      : session_(std::make_unique<mpi::detail::session>(comm, ranks, o, fingerprint())) {
    ctpipe::detail::with_index<ctpipe::detail::ix(ranks)>(ctpipe::detail::ix(session_->where().rank), [&](auto r) {
      program_ = std::make_unique<rank_program<static_cast<int>(decltype(r)::value)>>(model, loss, *session_);
    });
  }

  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  /// After a timeout_error, MPI may still complete a receive into this executor's buffers (a late
  /// peer's message) or read a send from them: they are then left allocated, not freed.
  ~executor() {
    if (session_ && session_->broken()) {
      (void)program_.release();
      (void)session_.release();
    }
  }

  /// One training step of this replica's `microbatches` inputs and targets (each process passes
  /// its replica's; only the ranks holding the first and last stage read them). Zeroes the
  /// gradients of this process's layers, runs its rank's program, and with D > 1 sums each stage's
  /// gradients across the replicas. Returns the losses of the global batch on every process:
  /// D x microbatches, replica d's microbatch i at d x microbatches + i. A task that throws ends
  /// the step on every process: with task_failure where it failed, peer_failure elsewhere (both
  /// name the rank, replica, stage, microbatch and op); the executor stays usable. A peer that
  /// does not answer within options::timeout ends it with timeout_error, after which the program
  /// should end.
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets) {
    ctpipe::detail::check_microbatches("ctpipe::mpi::executor::step", inputs.size(), targets.size(), microbatches);
    return program_->step(inputs, targets);
  }

  /// This process's place: its pipeline rank, replica, and the grid's size.
  const place& where() const noexcept { return session_->where(); }
  int rank() const noexcept { return where().rank; }
  int replica() const noexcept { return where().replica; }
  int replicas() const noexcept { return where().replicas; }

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
    constexpr auto bytes = []<std::size_t... B>(std::index_sequence<B...>) {
      return std::array<std::uint64_t, sizeof...(B) + 1>{
          sizeof(typename ctpipe::detail::stage_types<Model, stages>::template boundary_tensor<static_cast<int>(B)>)...,
          0};
    }
    (std::make_index_sequence<ctpipe::detail::ix(stage_count > 1 ? stage_count - 1 : 0)>{});
    return mpi::detail::fingerprint_of<plan, stages>([&](int b) { return bytes[ctpipe::detail::ix(b)]; });
  }

 private:
  static constexpr auto layout = ctpipe::detail::stage_layout_of(plan);
  template <int R>
  using engine_t = mpi::detail::engine<Model, stages, Loss, layout, R>;
  template <int R>
  static constexpr auto program = ctpipe::detail::make_rank_program<plan, R>();

  template <int R>
  struct runner {
    engine_t<R>& en;
    template <ctpipe::detail::task_code C, class A>
    void run(const A& a, std::size_t index) {
      en.template run_task<C.op, C.stage>(a);
      if constexpr (C.op == op_kind::backward || C.op == op_kind::backward_weight)
        if (static_cast<std::ptrdiff_t>(index) == ctpipe::detail::last_weight_op<plan, R>[ctpipe::detail::ix(C.stage)])
          en.template reduce<C.stage>();
    }
  };

  template <int R>
  struct rank_program final : mpi::detail::rank_base<input_type, target_type> {
    std::unique_ptr<engine_t<R>> en;
    rank_program(Model& model, Loss& loss, mpi::detail::session& s)
        : en(std::make_unique<engine_t<R>>(model, loss, s)) {}
    std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets) override {
      return en->step(inputs, targets,
                      [this] { ctpipe::detail::run_program<program<R>, dispatch_strategy>(runner<R>{*en}); });
    }
  };

  std::unique_ptr<mpi::detail::session> session_;
  std::unique_ptr<mpi::detail::rank_base<input_type, target_type>> program_;
};

}  // namespace ctpipe::mpi
