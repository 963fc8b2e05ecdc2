// The host executor's engine: the channels between ranks, their wake protocol (spin, then sleep on
// a wake word), the step's start and end, and each task's code (the shared host compute).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>        // CTPIPE_CPU_RELAX, CTPIPE_TSAN, CTPIPE_NTTP_TYPE
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/channel.hpp>
#include <ctpipe/exec/detail/host_compute.hpp>
#include <ctpipe/exec/detail/op_switch.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>
#include <ctpipe/model/partition.hpp>

namespace ctpipe::detail {

// Channels, wake words and the step's start and end, for a model split by Stages with loss Loss;
// the stages' storage and compute ops are the shared host compute (exec/detail/host_compute.hpp).
// The rank threads (in host_executor) call run_task<R, task, slots>() once per task of their program.
// Tag: the executor's (executor_tag: its name starts its messages).
// Versions: void (tasks compute with the model's layers), or a version_store (exec/detail/
// version_store.hpp) whose copies the tasks compute with, chosen by their arguments' `version`
// (async_executor: its messages are numbered across steps, and its channels carry on between them).
template <class Tag, model_type Model, auto Stages, class Loss, auto Layout, class Versions = void>
class engine : public compute<engine<Tag, Model, Stages, Loss, Layout, Versions>, Model, Stages, Loss, Layout, -1> {
  using base = compute<engine, Model, Stages, Loss, Layout, -1>;
  friend base;
  static constexpr bool versioned = !std::is_void_v<Versions>;

 public:
  static constexpr std::size_t Ranks = CTPIPE_NTTP_TYPE(Layout)::ranks;
  using base::set_prefix_cache;
  using base::stage_count;
  using base::tokens;
  using typename base::input_type;
  using typename base::prefix_type;
  using typename base::target_type;

  // All buffers are members: the executor allocates the engine once, on the heap, and the code of
  // every task addresses a buffer as a constant offset from the engine.
  engine(Model& model, Loss& loss) : base(model, loss), mirror_(model) {}

  // A step, on the calling thread: begin_step publishes the inputs and starts ranks 1..p-1; the
  // caller then runs rank 0's program itself, and end_step waits for the other ranks. `fresh`:
  // the channels start empty (always, but for the steps of an asynchronous pipeline after its first);
  // `counts`: a step of its own for the layers' context (not a drain).
  // `extents`: the step's, one per microbatch (null: every microbatch uses all its tokens).
  void begin_step(std::span<const input_type> inputs, std::span<const target_type> targets, bool fresh = true,
                  bool counts = true, const int* extents = nullptr) {
    if (running_.exchange(true, std::memory_order_acquire))
      throw std::logic_error(std::string(Tag::name) + "::step: a step is already running on another thread");
    this->set_batch(inputs.data(), targets.data(), fresh, counts);
    this->set_extents(extents);
    for (auto& n : sent_) n.value = 0;
    for (auto& n : arrivals_) n.value.store(0, std::memory_order_relaxed);
    if constexpr (base::mirrored)
      for (auto& n : mirror_arrivals_) n.value.store(0, std::memory_order_relaxed);
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

  /// The tensor bytes the last step's messages carried between ranks (with extents, each message's
  /// used tokens). Between steps.
  std::size_t sent_bytes() const noexcept {
    std::size_t n = 0;
    for (const auto& r : sent_) n += r.value;
    return n;
  }

  // Rank side (ranks 1..p-1): waits for the next step; false when the executor stops.
  bool wait_for_step(std::uint32_t& seen) {
    seen = await(epoch_, [s = seen](std::uint32_t e) { return e != s; });
    return !stopping_.load(std::memory_order_acquire);
  }
  template <int R>
  void begin_rank() {
    if constexpr (!versioned) this->template zero_rank_gradients<R>();  // versions zero their own, at updates
    if constexpr (base::mirrored) sync_mirror<R>(std::make_index_sequence<Model::size>{});
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

  // The layers stage S's tasks compute with: the copy of the version its arguments name, or its chain's.
  template <int S, class Args>
  auto& weights(const Args& a) noexcept {
    if constexpr (versioned)
      return versions_.template at<S>(a.version);
    else
      return chain_model<base::template chain_of<S>>();
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

  // Rank R's members of shared group G are final for the step: the last of the group's ranks to
  // say so sums the members' gradients (in layer order) into every member, while the others go on.
  template <std::size_t G>
  void arrive() noexcept {
    if constexpr (holders[G] > 1)
      if (arrivals_[G].value.fetch_add(1, std::memory_order_acq_rel) + 1 != holders[G]) return;
    sum_group<Model, G>(this->model());
  }

  // The layers chain C runs: the model's, or for a bidirectional table's second chain (its mirrors,
  // on other ranks than the stages they copy) a copy of them, whose parameters each step starts
  // from the model's.
  template <int C>
  Model& chain_model() noexcept {
    if constexpr (C == 1 && base::mirrored)
      return mirror_.value;
    else
      return this->model();
  }
  // A bidirectional table: the stage of model stage J in one chain has run its last B or W of the
  // step. The second of the two to say so gives both copies of the stage's layers their sum, the
  // first chain's gradient plus the second's.
  template <int J>
  void mirror_arrive() noexcept {
    if (mirror_arrivals_[detail::ix(J)].value.fetch_add(1, std::memory_order_acq_rel) != 1) return;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (sum_mirror_layer<detail::ix(base::template first_layer<J>) + K>(), ...);
    }
    (std::make_index_sequence<detail::ix(base::template end_layer<J> - base::template first_layer<J>)>{});
  }

  // Task `Op` of stage S on rank R; `a` holds its microbatch and slots.
  template <int R, op_kind Op, int S, int Other = -1, class Args>
  void run_task(const Args& a) {
    run_op<R, Op, S, Other>(*this, a);
  }
  // The op switch's primitives (op_switch.hpp): a compute op (the shared compute's run_compute);
  // a message, each crossing and direction through its own channel.
  template <int R, route M, class Args>
  void receive(const Args& a) {
    auto& c = channel_of<M>();
    wait_until<R>([&] { return c.head.load(std::memory_order_acquire) > static_cast<std::uint32_t>(a.message); });
  }
  template <int R, route M, class Args>
  void send(const Args& a) {
    this->template guarded<R, op_of(M), M.here>(a, [&] {
      publish<R, rank_of<M.far>, capacity_of<M>>(channel_of<M>(), a.message, this->template sent_message<M>(a),
                                                 this->template sent_extent<M>(a));
    });
  }

 private:
  template <int B>
  using boundary_tensor = typename base::template boundary_tensor<B>;
  template <int B>
  static constexpr int capacity = Layout.channel_capacity[detail::ix(B)];
  template <int S>
  static constexpr int rank_of = base::template rank_of<S>;
  static constexpr std::size_t channels_count = base::boundaries;
  static constexpr auto holders = group_holders<Model, Stages>(Layout.stage_rank, static_cast<int>(Ranks));
  template <class M>
  using slot_t = typename base::template slot_t<M>;
  template <std::size_t B>
  using forward_channel_t =
      channel<slot_t<typename base::template forward_message<static_cast<int>(B)>>, capacity<static_cast<int>(B)>>;
  template <std::size_t B>
  using backward_channel_t =
      channel<slot_t<typename base::template backward_message<static_cast<int>(B)>>, capacity<static_cast<int>(B)>>;
  using forward_channels_t =
      typename base::template tuple_of<forward_channel_t, std::make_index_sequence<channels_count>>::type;
  using backward_channels_t =
      typename base::template tuple_of<backward_channel_t, std::make_index_sequence<channels_count>>::type;
  // A crossing's channels, each way, where its stages are on two ranks (else none: capacity 0).
  template <std::size_t K>
  static constexpr int skip_capacity = Layout.skips[K].remote ? Layout.skips[K].capacity : 0;
  template <std::size_t K>
  using skip_forward_channel_t = channel<slot_t<typename base::template skip_value_t<K>>, skip_capacity<K>>;
  template <std::size_t K>
  using skip_backward_channel_t = channel<slot_t<typename base::template skip_gradient_t<K>>, skip_capacity<K>>;
  using skip_forward_channels_t =
      typename base::template tuple_of<skip_forward_channel_t, std::make_index_sequence<base::crossing_count>>::type;
  using skip_backward_channels_t =
      typename base::template tuple_of<skip_backward_channel_t, std::make_index_sequence<base::crossing_count>>::type;

  // Route M's channel and its capacity: a boundary's, or a skip crossing's (0 where its stages
  // share a rank).
  template <route M>
  auto& channel_of() noexcept {
    if constexpr (M.skip && M.backward)
      return std::get<base::skip_index(M.lower, M.upper)>(skip_backward_);
    else if constexpr (M.skip)
      return std::get<base::skip_index(M.lower, M.upper)>(skip_forward_);
    else if constexpr (M.backward)
      return std::get<detail::ix(M.lower)>(backward_);
    else
      return std::get<detail::ix(M.lower)>(forward_);
  }
  template <route M>
  static constexpr int capacity_of = [] {
    if constexpr (M.skip)
      return skip_capacity<base::skip_index(M.lower, M.upper)>;
    else
      return capacity<M.lower>;
  }();

  // ---- the hand-off (called by the shared compute ops) ---------------------------------------
  template <std::size_t K>
  const auto& remote_skip_value(int message) {
    return std::get<K>(skip_forward_).ring[detail::ix(message % skip_capacity<K>)];
  }
  template <std::size_t K>
  void skip_value_consumed(int message) {
    consumed<rank_of<base::template skip_from<K>>>(std::get<K>(skip_forward_), message);
  }
  template <std::size_t K>
  const auto& remote_skip_gradient(int message) {
    return std::get<K>(skip_backward_).ring[detail::ix(message % skip_capacity<K>)];
  }
  template <std::size_t K>
  void skip_gradient_consumed(int message) {
    consumed<rank_of<base::template skip_to<K>>>(std::get<K>(skip_backward_), message);
  }
  template <int S, class Args>
  const auto& remote_input(const Args& a) {
    return std::get<detail::ix(S - 1)>(forward_).ring[detail::ix(a.message % capacity<S - 1>)];
  }
  template <int S, class Args>
  void input_consumed(const Args& a) {
    consumed<rank_of<S - 1>>(std::get<detail::ix(S - 1)>(forward_), a.message);
  }
  template <int S, class Args>
  const auto& remote_gradient(const Args& a) {
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
    [this]<std::size_t... K>(std::index_sequence<K...>) {
      ((std::get<K>(skip_forward_).reset(), std::get<K>(skip_backward_).reset()), ...);
    }
    (std::make_index_sequence<base::crossing_count>{});
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

  // Copies `value` (of a microbatch of extent e) into message k of channel c (waiting for room),
  // then tells the consumer.
  template <int R, int Peer, int Cap, class Channel, class T>
  void publish(Channel& c, int k, const T& value, int e) {
    if (k >= Cap)
      wait_until<R>([&] { return c.tail.load(std::memory_order_acquire) > static_cast<std::uint32_t>(k - Cap); });
    base::put(c.ring[detail::ix(k % Cap)], value, e);
    sent_[detail::ix(R)].value += base::extents ? message_used_bytes<T>(e) : sizeof(T);
    c.head.store(static_cast<std::uint32_t>(k + 1), std::memory_order_release);
    wake(Peer);
  }
  // Message k of channel c has been used: frees its slot, and wakes the producer if it sleeps.
  template <int Producer, class Channel>
  void consumed(Channel& c, int k) {
    c.tail.store(static_cast<std::uint32_t>(k + 1), std::memory_order_release);
    wake(Producer);
  }

  // ---- a bidirectional table's mirrors -------------------------------------------------------
  // Rank R's mirrored layers start the step from the model's parameters (each rank copies its own,
  // while the ranks that run the model's copies only read them).
  template <int R, std::size_t... K>
  void sync_mirror(std::index_sequence<K...>) {
    (
        [&] {
          if constexpr (has_parameters<typename Model::template layer_type<K>>) {
            if (!base::template runs_layer<R>(1, static_cast<int>(K))) return;
            const auto from = this->model().template layer<K>().parameters();
            std::copy(from.begin(), from.end(), mirror_.value.template layer<K>().parameters().begin());
          }
        }(),
        ...);
  }
  template <std::size_t K>
  void sum_mirror_layer() noexcept {
    if constexpr (has_parameters<typename Model::template layer_type<K>>) {
      const auto g = this->model().template layer<K>().gradients();
      const auto h = mirror_.value.template layer<K>().gradients();
      using T = std::remove_cvref_t<decltype(g[0])>;
      const std::array<const T*, 2> parts{g.data(), h.data()};
      sum_in_order(std::span<T>(g), std::span<const T* const>(parts));
      std::copy(g.begin(), g.end(), h.begin());
    }
  }
  struct mirror_copy {
    Model value;
    explicit mirror_copy(const Model& m) : value(m) {}
  };
  struct no_mirror {
    explicit no_mirror(const Model&) {}
  };

  // ---- state ---------------------------------------------------------------------------------
  struct failure_record {
    int rank = -1;
    task t{};
    std::exception_ptr cause;
    task_failure make() const { return task_failure(Tag::name, rank, t, cause); }
  };

  forward_channels_t forward_;
  backward_channels_t backward_;
  [[no_unique_address]] skip_forward_channels_t skip_forward_;
  [[no_unique_address]] skip_backward_channels_t skip_backward_;
  std::array<padded<std::atomic<std::uint32_t>>, Ranks> wake_{};
  std::array<padded<std::size_t>, Ranks> sent_{};                               // each rank's bytes published this step
  std::array<padded<std::atomic<int>>, shared_group_count<Model>> arrivals_{};  // per shared group: ranks done
  // A bidirectional table: per model stage, its two copies' stages done; the copy of the layers.
  std::array<padded<std::atomic<int>>, base::mirrored ? detail::ix(base::chain_length) : 0> mirror_arrivals_{};
  [[no_unique_address]] std::conditional_t<base::mirrored, mirror_copy, no_mirror> mirror_;
  alignas(cache_line) std::atomic<std::uint32_t> epoch_{0};
  alignas(cache_line) std::atomic<std::uint32_t> done_{0};
  std::atomic<bool> failed_{false}, aborting_{false}, stopping_{false}, running_{false};
  failure_record failure_;
  struct no_versions {};
  [[no_unique_address]] std::conditional_t<versioned, Versions, no_versions> versions_{};
};

}  // namespace ctpipe::detail
