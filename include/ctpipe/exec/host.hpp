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
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/host_compute.hpp>
#include <ctpipe/model/partition.hpp>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>  // _mm_pause
#define CTPIPE_CPU_RELAX() _mm_pause()
#else
#define CTPIPE_CPU_RELAX() ((void)0)
#endif

// ThreadSanitizer does not model standalone fences (g++ refuses them under -fsanitize=thread), so a
// TSan build wakes through read-modify-writes alone: a sender always bumps the receiver's wake word.
#if defined(__SANITIZE_THREAD__)
#define CTPIPE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CTPIPE_TSAN 1
#endif
#endif
#ifndef CTPIPE_TSAN
#define CTPIPE_TSAN 0
#endif

namespace ctpipe {

namespace detail::host {

// One direction of one stage boundary between two ranks: a ring of Capacity tensors. Message k
// lives in slot k % Capacity; `head` counts messages published, `tail` messages consumed. Both
// start at 0 every step.
template <class T, int Capacity>
struct channel {
  alignas(cache_line) std::atomic<std::uint32_t> head{0};
  alignas(cache_line) std::atomic<std::uint32_t> tail{0};
  alignas(cache_line) std::array<T, detail::ix(Capacity)> ring{};
  void reset() {
    head.store(0, std::memory_order_relaxed);
    tail.store(0, std::memory_order_relaxed);
  }
};
template <class T>
struct channel<T, 0> {
  void reset() {}
};

// Channels, wake words and the step's start and end, for a model split by Plan with loss Loss;
// the stages' storage and compute ops are the shared host compute (exec/detail/host_compute.hpp).
// The rank threads (in host_executor) call run_task<R, task, slots>() once per task of their program.
// Versions: void (tasks compute with the model's layers), or a version_store (exec/detail/
// version_store.hpp) whose copies the tasks compute with, chosen by their arguments' `version`
// (async_executor: its messages are numbered across steps, and its channels carry on between them).
template <model_type Model, auto Plan, class Loss, auto Layout, class Versions = void>
class engine : public compute<engine<Model, Plan, Loss, Layout, Versions>, Model, Plan, Loss, Layout> {
  using base = compute<engine, Model, Plan, Loss, Layout>;
  friend base;
  static constexpr bool versioned = !std::is_void_v<Versions>;
  static constexpr executor_kind kind = versioned ? executor_kind::async : executor_kind::host;

 public:
  static constexpr std::size_t Ranks = CTPIPE_NTTP_TYPE(Layout)::ranks;
  using base::set_prefix_cache;
  using base::stage_count;
  using typename base::input_type;
  using typename base::prefix_type;
  using typename base::target_type;

  // All buffers are members: the executor allocates the engine once, on the heap, and the code of
  // every task addresses a buffer as a constant offset from the engine.
  engine(Model& model, Loss& loss) : base(model, loss) {}

  // A step, on the calling thread: begin_step publishes the inputs and starts ranks 1..p-1; the
  // caller then runs rank 0's program itself, and end_step waits for the other ranks. `fresh`:
  // the channels start empty (always, but for the steps of an asynchronous pipeline after its first).
  void begin_step(std::span<const input_type> inputs, std::span<const target_type> targets, bool fresh = true) {
    if (running_.exchange(true, std::memory_order_acquire))
      throw std::logic_error(std::string(executor_name(kind)) + "::step: a step is already running on another thread");
    this->set_batch(inputs.data(), targets.data());
    if (fresh) reset_channels(std::make_index_sequence<channels_count>{});
    failed_.store(false, std::memory_order_relaxed);
    aborting_.store(false, std::memory_order_relaxed);
    if constexpr (Ranks > 1) {
      done_.store(0, std::memory_order_relaxed);
      epoch_.fetch_add(1, std::memory_order_release);
      epoch_.notify_all();
    }
  }
  std::span<const double> end_step() {
    if constexpr (Ranks > 1) await(done_, [](std::uint32_t d) { return d == static_cast<std::uint32_t>(Ranks - 1); });
    running_.store(false, std::memory_order_release);
    if (failed_.load(std::memory_order_acquire)) [[unlikely]] {
      const task_failure e = failure_.make();
      failure_ = {};
      throw e;
    }
    return this->losses();
  }

  // Rank side (ranks 1..p-1): waits for the next step; false when the executor stops.
  bool wait_for_step(std::uint32_t& seen) {
    seen = await(epoch_, [s = seen](std::uint32_t e) { return e != s; });
    return !stopping_.load(std::memory_order_acquire);
  }
  template <int R>
  void begin_rank() {
    if constexpr (!versioned) this->template zero_rank_gradients<R>();  // versions zero their own, at updates
  }
  void end_rank() noexcept {
    done_.fetch_add(1, std::memory_order_acq_rel);
    done_.notify_one();
  }
  void stop() noexcept {
    stopping_.store(true, std::memory_order_release);
    abort_all();
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
  }

  // The layers stage S's tasks compute with: the copy of the version its arguments name.
  template <int S, class Args>
  auto& weights(const Args& a) noexcept {
    if constexpr (versioned)
      return versions_.template at<S>(a.version);
    else
      return this->model();
  }
  template <class V = Versions>
  V& versions() noexcept {
    return versions_;
  }
  // Stage S's update after the backward of `a` (on rank R; a failure of the optimizer is that B's).
  template <int R, int S, class Args, class Opt>
  void update(const Args& a, int target, int source, Opt& opt) {
    this->template guarded<R, op_kind::backward, S>(a, [&] { versions_.template update<S>(target, source, opt); });
  }

  // Task `Op` of stage S on rank R; `a` holds its microbatch and slots (constants when unrolled).
  template <int R, op_kind Op, int S, class Args>
  void run_task(const Args& a) {
    if constexpr (!comm_op[static_cast<int>(Op)])
      this->template run_compute<R, Op, S>(a);
    else if constexpr (Op == op_kind::recv_forward) {
      auto& c = std::get<detail::ix(S - 1)>(forward_);
      wait_until<R>([&] { return c.head.load(std::memory_order_acquire) > static_cast<std::uint32_t>(a.message); });
    } else if constexpr (Op == op_kind::recv_backward) {
      auto& c = std::get<detail::ix(S)>(backward_);
      wait_until<R>([&] { return c.head.load(std::memory_order_acquire) > static_cast<std::uint32_t>(a.message); });
    } else if constexpr (Op == op_kind::send_forward) {
      this->template guarded<R, Op, S>(a, [&] {
        publish<R, rank_of<S + 1>, capacity<S>>(std::get<detail::ix(S)>(forward_), a.message,
                                                this->template stage_output<S>(a));
      });
    } else if constexpr (Op == op_kind::send_backward) {
      this->template guarded<R, Op, S>(a, [&] {
        publish<R, rank_of<S - 1>, capacity<S - 1>>(std::get<detail::ix(S - 1)>(backward_), a.message,
                                                    this->template input_gradient<S>());
      });
    }
  }

 private:
  template <int B>
  using boundary_tensor = typename base::template boundary_tensor<B>;
  template <int B>
  static constexpr int capacity = Layout.channel_capacity[detail::ix(B)];
  template <int S>
  static constexpr int rank_of = base::template rank_of<S>;
  static constexpr std::size_t channels_count = base::boundaries;
  template <std::size_t B>
  using channel_t = channel<boundary_tensor<static_cast<int>(B)>, capacity<static_cast<int>(B)>>;
  using channels_t = typename base::template tuple_of<channel_t, std::make_index_sequence<channels_count>>::type;

  // ---- the hand-off (called by the shared compute ops) ---------------------------------------
  template <int S, class Args>
  const boundary_tensor<S - 1>& remote_input(const Args& a) {
    return std::get<detail::ix(S - 1)>(forward_).ring[detail::ix(a.message % capacity<S - 1>)];
  }
  template <int S, class Args>
  void input_consumed(const Args& a) {
    consumed<rank_of<S - 1>>(std::get<detail::ix(S - 1)>(forward_), a.message);
  }
  template <int S, class Args>
  const boundary_tensor<S>& remote_gradient(const Args& a) {
    return std::get<detail::ix(S)>(backward_).ring[detail::ix(a.message % capacity<S>)];
  }
  template <int S, class Args>
  void gradient_consumed(const Args& a) {
    consumed<rank_of<S + 1>>(std::get<detail::ix(S)>(backward_), a.message);
  }

  // ---- set-up and tear-down ------------------------------------------------------------------
  template <std::size_t... B>
  void reset_channels(std::index_sequence<B...>) {
    ((std::get<B>(forward_).reset(), std::get<B>(backward_).reset()), ...);
  }
  void abort_all() noexcept {
    aborting_.store(true, std::memory_order_release);
    for (auto& w : wake_) {
      w.value.fetch_add(wake_step, std::memory_order_seq_cst);
      w.value.notify_one();
    }
  }

  void fail(int rank, task t, std::exception_ptr e) noexcept {
    if (!failed_.exchange(true, std::memory_order_acq_rel)) failure_ = {rank, t, std::move(e)};
    abort_all();
  }

  // Rank R waits until `ready` holds: it spins first; then it sets the sleeping bit of its wake
  // word and sleeps on it (futex). A producer reads that bit after publishing and touches the word
  // (read-modify-write, futex wake) only when it is set: a hand-off to a spinning rank costs no
  // read-modify-write beyond the message itself. Throws `aborted` when a rank has failed.
  template <int R, class Ready>
  void wait_until(Ready&& ready) {
    for (int i = 0; i < spin_limit_; ++i) {
      if (ready()) return;
      CTPIPE_CPU_RELAX();
    }
    auto& w = wake_[detail::ix(R)].value;
    for (;;) {
      const std::uint32_t key = w.fetch_or(sleeping_bit, std::memory_order_seq_cst) | sleeping_bit;
#if !CTPIPE_TSAN
      std::atomic_thread_fence(std::memory_order_seq_cst);  // the bit is visible before `ready` is read
#endif
      if (ready()) {
        w.fetch_and(~sleeping_bit, std::memory_order_relaxed);
        return;
      }
      if (aborting_.load(std::memory_order_acquire)) {
        w.fetch_and(~sleeping_bit, std::memory_order_relaxed);
        throw aborted{};
      }
      w.wait(key, std::memory_order_acquire);
    }
  }
  // How long a waiting rank spins before it sleeps, in pause instructions. Where every rank has a
  // core (ranks <= hardware threads) a rank spins for up to about a millisecond: a futex wake costs
  // tens of microseconds, and the core has nothing else of ours to run. Where ranks outnumber the
  // cores, spinning would take the core from a rank with work, so it sleeps after a few microseconds.
  static constexpr int long_spin = 1 << 15, short_spin = 1 << 11;
  const int spin_limit_ = Ranks <= std::thread::hardware_concurrency() ? long_spin : short_spin;
  static constexpr std::uint32_t sleeping_bit = 1, wake_step = 2;

  // After publishing (a release store that the waiter's `ready` reads): wakes rank `to` if it sleeps.
  void wake(int to) noexcept {
    auto& w = wake_[detail::ix(to)].value;
#if CTPIPE_TSAN
    w.fetch_add(wake_step, std::memory_order_seq_cst);
    w.notify_one();
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the store is visible before the bit is read
    if (w.load(std::memory_order_relaxed) & sleeping_bit) {
      w.fetch_add(wake_step, std::memory_order_seq_cst);
      w.notify_one();
    }
#endif
  }

  // Spins, then sleeps on `a` until pred(value) holds; returns that value.
  template <class Pred>
  std::uint32_t await(const std::atomic<std::uint32_t>& a, Pred pred) const {
    for (int i = 0; i < spin_limit_; ++i) {
      const std::uint32_t v = a.load(std::memory_order_acquire);
      if (pred(v)) return v;
      CTPIPE_CPU_RELAX();
    }
    for (;;) {
      const std::uint32_t v = a.load(std::memory_order_acquire);
      if (pred(v)) return v;
      a.wait(v, std::memory_order_acquire);
    }
  }

  // Copies `value` into message k of channel c (waiting for room), then tells the consumer.
  template <int R, int Peer, int Cap, class Channel, class T>
  void publish(Channel& c, int k, const T& value) {
    if (k >= Cap)
      wait_until<R>([&] { return c.tail.load(std::memory_order_acquire) > static_cast<std::uint32_t>(k - Cap); });
    c.ring[detail::ix(k % Cap)] = value;
    c.head.store(static_cast<std::uint32_t>(k + 1), std::memory_order_release);
    wake(Peer);
  }
  // Message k of channel c has been used: frees its slot, and wakes the producer if it sleeps.
  template <int Producer, class Channel>
  void consumed(Channel& c, int k) {
    c.tail.store(static_cast<std::uint32_t>(k + 1), std::memory_order_release);
    wake(Producer);
  }

  // ---- state ---------------------------------------------------------------------------------
  struct failure_record {
    int rank = -1;
    task t{};
    std::exception_ptr cause;
    task_failure make() const { return task_failure(executor_name(kind), rank, t, cause); }
  };

  channels_t forward_, backward_;
  std::array<padded<std::atomic<std::uint32_t>>, Ranks> wake_{};
  alignas(cache_line) std::atomic<std::uint32_t> epoch_{0};
  alignas(cache_line) std::atomic<std::uint32_t> done_{0};
  std::atomic<bool> failed_{false}, aborting_{false}, stopping_{false}, running_{false};
  failure_record failure_;
  struct no_versions {};
  [[no_unique_address]] std::conditional_t<versioned, Versions, no_versions> versions_{};
};

// The threads of ranks 1..Ranks-1 of an engine: each waits for a step, runs its rank's part
// (run.template operator()<R>(), the executor's), tells the engine it is done, until the engine
// stops. Rank 0 runs on the thread that calls the executor's step.
template <int Ranks>
class rank_threads {
 public:
  template <class Engine, class Run>
  void start(Engine& en, Run run) {
    try {
      start_each(en, run, std::make_integer_sequence<int, Ranks>{});
    } catch (...) {
      stop(en);
      throw;
    }
  }
  template <class Engine>
  void stop(Engine& en) noexcept {
    en.stop();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  template <class Engine, class Run, int... R>
  void start_each(Engine& en, Run run, std::integer_sequence<int, R...>) {
    ((R > 0 ? void(threads_[detail::ix(R - 1)] = std::thread([&en, run] {
                     std::uint32_t seen = 0;
                     while (en.wait_for_step(seen)) {
                       run.template operator()<R>();
                       en.end_rank();
                     }
                   }))
            : void()),
     ...);
  }
  std::array<std::thread, detail::ix(Ranks - 1)> threads_{};
};

}  // namespace detail::host

/// Runs Table (a compute or lowered task table, verified at compile time) over Model's layers split
/// into stages by Plan (a stage_plan with Table.stages() stages), with loss Loss after the last layer.
/// Rank 0 runs on the thread that calls step(); ranks 1..p-1 on threads of their own. Dispatch picks
/// how each rank's program becomes code (see ctpipe::dispatch); both give the same results.
template <auto Table, model_type Model, auto Plan, class Loss, dispatch Dispatch = dispatch::automatic>
class host_executor {
 public:
  static constexpr auto plan = make_execution_plan<Table>();
  static constexpr auto& table = plan.table;
  static constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_ranks);
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_stages);
  /// Plan (a stand-in where Plan breaks a rule: its static_assert has said which).
  static constexpr auto stages = detail::usable_stages<Model, stage_count, Plan>();
  static constexpr int microbatches = Table.params.microbatches;
  /// The strategy in use: dispatch::automatic unrolls where every rank's program has at most
  /// ctpipe::automatic_unroll_limit tasks.
  static constexpr dispatch dispatch_strategy =
      resolve_dispatch(Dispatch, detail::ix(*std::ranges::max_element(plan.table.length)), automatic_unroll_limit);
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;

 private:
  static constexpr auto layout = detail::stage_layout_of(plan);
  using engine_t = detail::host::engine<Model, stages, Loss, layout>;

 public:
  static_assert(detail::executor_requirements<detail::executor_kind::host, Table, Model, Plan, stage_count,
                                              detail::backward_in_order(plan)>::value);
  static_assert(
      []<std::size_t... K>(std::index_sequence<K...>) {
        return (layer<typename Model::template layer_type<K>> && ...);
      }(std::make_index_sequence<Model::size>{}),
      "ctpipe::host_executor: every layer must be a host layer (forward(x, y), backward(x, y, dy, dx)); "
      "device layers run on ctpipe::cuda::executor");
  static_assert(loss_function<Loss, output_type>,
                "ctpipe::host_executor: Loss must have a target_type and double operator()(const output_type& y, "
                "const target_type& t, output_type& dy)");

  /// Starts one thread for each rank but rank 0. The model and the loss must outlive the executor.
  explicit host_executor(Model& model, Loss& loss) : engine_(std::make_unique<engine_t>(model, loss)) {
    threads_.start(*engine_, [this]<int R>() { this->template run_rank<R>(); });
  }
  host_executor(const host_executor&) = delete;
  host_executor& operator=(const host_executor&) = delete;

  /// Stops and joins the rank threads. Never blocks on a rank: a step in progress (only possible
  /// from another thread, which is a misuse) is aborted first.
  ~host_executor() { threads_.stop(*engine_); }

  /// One training step over `microbatches` inputs: zeroes the gradients of every layer, then runs
  /// the table, rank 0 on the calling thread. Returns each microbatch's loss; the gradients are in the model's layers,
  /// summed over microbatches in microbatch order. A task that throws ends the step with task_failure (after every rank
  /// has stopped); the executor stays usable and the next step starts afresh.
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets) {
    detail::check_microbatches("ctpipe::host_executor::step", inputs.size(), targets.size(), microbatches);
    if (recorder_) [[unlikely]] {
      for (auto& row : recorder_->step.ranks) std::fill(row.begin(), row.end(), measured_task{});
      recorder_->t0 = clock::now();
    }
    engine_->begin_step(inputs, targets);
    run_rank<0>();
    return engine_->end_step();
  }

  Model& model() noexcept { return engine_->model(); }

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

  /// Records the start and end of every task of the steps that follow, until record_steps(false).
  /// Off by default; off, a step runs exactly the code it runs without this (one test per rank and
  /// step). Recording walks the table (dispatch::table_walk) and reads the clock around each task.
  /// Allocates here, once; call it between steps.
  void record_steps(bool on) {
    if (!on) {
      recorder_.reset();
      return;
    }
    if (recorder_) return;
    auto r = std::make_unique<recorder>();
    r->step.ranks.resize(detail::ix(ranks));
    for (int k = 0; k < ranks; ++k) r->step.ranks[detail::ix(k)].resize(detail::ix(plan.table.length[detail::ix(k)]));
    recorder_ = std::move(r);
  }
  /// The last step recorded: per rank, per position of `table` (the lowered table the executor runs),
  /// its task's start and end in seconds from the step's start (-1 for a task that did not end: a
  /// step that failed). Empty when not recording. Compare it with the table: compare_measured,
  /// measured_svg, measured_trace.
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
  template <int R>
  void run_rank() noexcept {
    try {
      engine_->template begin_rank<R>();
      // The engine's address, once, in a local: every task then reaches its buffers at a constant
      // offset from it, with nothing to reload after a task's user code has run.
      if (recorder_) [[unlikely]] {
        detail::run_program<program<R>, dispatch::table_walk>(
            recording_runner<R>{*engine_, recorder_->step.ranks[detail::ix(R)].data(), recorder_->t0});
      } else {
        runner<R> run{*engine_};
        detail::run_program<program<R>, dispatch_strategy>(run);
      }
    } catch (const detail::host::aborted&) {
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
    void run(const A& a, std::size_t) {
      en.template run_task<R, C.op, C.stage>(a);
    }
  };

  // The same, with each task's start and end written to `out` (record_steps).
  using clock = std::chrono::steady_clock;
  template <int R>
  struct recording_runner {
    engine_t& en;
    measured_task* out;
    clock::time_point t0;
    template <detail::task_code C, class A>
    void run(const A& a, std::size_t i) {
      out[i].start = std::chrono::duration<double>(clock::now() - t0).count();
      en.template run_task<R, C.op, C.stage>(a);
      out[i].end = std::chrono::duration<double>(clock::now() - t0).count();
    }
  };
  struct recorder {
    measured_step step;
    clock::time_point t0{};
  };

  std::unique_ptr<engine_t> engine_;  // on the heap: its buffers may be large
  std::unique_ptr<recorder> recorder_;
  detail::host::rank_threads<ranks> threads_;  // last: its threads end before the rest goes
};

/// Deduces Model and Loss: make_host_executor<table, stages>(model, loss).
template <auto Table, auto Plan, model_type Model, class Loss>
auto make_host_executor(Model& model, Loss& loss) {
  return std::make_unique<host_executor<Table, Model, Plan, Loss>>(model, loss);
}

}  // namespace ctpipe
