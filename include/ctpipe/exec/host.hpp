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

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
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

inline constexpr std::size_t cache_line = 64;

struct aborted {};  // unwinds a rank's program when another rank has failed

template <class T>
struct alignas(cache_line) padded {
  T value{};
};
// An array that starts a cache line of its own.
template <class T, std::size_t N>
struct alignas(cache_line) line_array : std::array<T, N> {};

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

// A stage's storage. The stash holds, per live microbatch, every tensor of the stage's forward
// pass (or only its input when the stage recomputes); `work` (recomputing stages only) holds the
// recomputed forward and `grads` the gradients of the backward pass. With split backward (Split),
// `grad_stash` keeps, per live microbatch, the gradients an I computed (each layer's output
// gradient) until its W; it shares the stash's slots (a slot lives from F to W).
struct no_work {};
// Cache-line aligned: stages on different ranks must not share a line (the engine holds them side
// by side, and small tensors would otherwise ping-pong between cores on every write).
template <class Full, class Input, bool Recompute, bool Split, int Slots>
struct alignas(cache_line) stage_storage {
  using stash_type = std::conditional_t<Recompute, Input, Full>;
  std::array<stash_type, detail::ix(Slots)> stash{};
  [[no_unique_address]] std::array<Full, Split ? detail::ix(Slots) : 0> grad_stash{};  // no bytes without split
  [[no_unique_address]] std::conditional_t<Recompute, Full, no_work> work{};
  Full grads{};
};

// Storage, channels and the code of every op, for a model split by Plan with loss Loss. The rank
// threads (in host_executor) call run_task<R, task, slots>() once per task of their program.
template <model_type Model, auto Plan, class Loss, auto Layout>
class engine {
 public:
  static constexpr std::size_t Ranks = CTPIPE_NTTP_TYPE(Layout)::ranks;
  using types = detail::stage_types<Model, Plan>;
  static constexpr int stage_count = Plan.stages();
  using input_type = typename Model::input_type;
  using target_type = typename Loss::target_type;

  // All buffers are members: the executor allocates the engine once, on the heap, and the code of
  // every task addresses a buffer as a constant offset from the engine.
  engine(Model& model, Loss& loss) : model_(model), loss_(loss) {}
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // A step, on the calling thread: begin_step publishes the inputs and starts ranks 1..p-1; the
  // caller then runs rank 0's program itself, and end_step waits for the other ranks.
  void begin_step(std::span<const input_type> inputs, std::span<const target_type> targets) {
    if (running_.exchange(true, std::memory_order_acquire))
      throw std::logic_error("ctpipe::host_executor::step: a step is already running on another thread");
    inputs_ = inputs.data();
    targets_ = targets.data();
    reset_channels(std::make_index_sequence<channels_count>{});
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
    return {losses_.data(), losses_.size()};
  }

  // Rank side (ranks 1..p-1): waits for the next step; false when the executor stops.
  bool wait_for_step(std::uint32_t& seen) {
    seen = await(epoch_, [s = seen](std::uint32_t e) { return e != s; });
    return !stopping_.load(std::memory_order_acquire);
  }
  template <int R>
  void begin_rank() {
    zero_rank_gradients<R>(std::make_index_sequence<Model::size>{});
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

  Model& model() noexcept { return model_; }

  template <int S>
  static constexpr std::size_t stage_activation_bytes() {
    using st = storage_t<S>;
    return detail::ix(Layout.stash_slots[detail::ix(S)]) * sizeof(typename st::stash_type) +
           (Layout.split_backward ? sizeof(st::grad_stash) : 0) +
           (Plan.recompute[detail::ix(S)] ? sizeof(full_t<S>) : 0);
  }

  // Task `Op` of stage S on rank R; `a` holds its microbatch and slots (constants when unrolled).
  template <int R, op_kind Op, int S, class Args>
  void run_task(const Args& a) {
    if constexpr (Op == op_kind::forward)
      guarded<R, Op, S>(a, [&] { forward<S>(a); });
    else if constexpr (Op == op_kind::backward)
      guarded<R, Op, S>(a, [&] { backward<S, false>(a); });
    else if constexpr (Op == op_kind::backward_input)
      guarded<R, Op, S>(a, [&] { backward<S, true>(a); });
    else if constexpr (Op == op_kind::backward_weight)
      guarded<R, Op, S>(a, [&] { weight_gradients<S>(a); });
    else if constexpr (Op == op_kind::recv_forward) {
      auto& c = std::get<detail::ix(S - 1)>(forward_);
      wait_until<R>([&] { return c.head.load(std::memory_order_acquire) > static_cast<std::uint32_t>(a.message); });
    } else if constexpr (Op == op_kind::recv_backward) {
      auto& c = std::get<detail::ix(S)>(backward_);
      wait_until<R>([&] { return c.head.load(std::memory_order_acquire) > static_cast<std::uint32_t>(a.message); });
    } else if constexpr (Op == op_kind::send_forward) {
      auto& st = std::get<detail::ix(S)>(storage_);
      const auto& y = [&]() -> const auto& {
        if constexpr (Plan.recompute[detail::ix(S)])
          return std::get<std::tuple_size_v<full_t<S>> - 1>(st.work);
        else
          return std::get<std::tuple_size_v<full_t<S>> - 1>(st.stash[detail::ix(a.stash)]);
      }
      ();
      guarded<R, Op, S>(
          a, [&] { publish<R, rank_of<S + 1>, capacity<S>>(std::get<detail::ix(S)>(forward_), a.message, y); });
    } else if constexpr (Op == op_kind::send_backward) {
      auto& st = std::get<detail::ix(S)>(storage_);
      guarded<R, Op, S>(a, [&] {
        publish<R, rank_of<S - 1>, capacity<S - 1>>(std::get<detail::ix(S - 1)>(backward_), a.message,
                                                    std::get<0>(st.grads));
      });
    }
  }

 private:
  // ---- types of each stage and boundary ------------------------------------------------------
  template <int S>
  static constexpr int first_layer = types::template first_layer<S>;
  template <int S>
  static constexpr int end_layer = types::template end_layer<S>;
  template <int S>
  using full_t = typename types::template full_t<S>;
  template <int S>
  using input_t = typename types::template input_t<S>;
  template <int S>
  using storage_t = stage_storage<full_t<S>, input_t<S>, Plan.recompute[detail::ix(S)], Layout.split_backward,
                                  Layout.stash_slots[detail::ix(S)]>;
  template <int B>
  using boundary_tensor = typename types::template boundary_tensor<B>;
  template <int B>
  static constexpr int capacity = Layout.channel_capacity[detail::ix(B)];
  template <int S>
  static constexpr int rank_of = Layout.stage_rank[detail::ix(S)];
  // Stage S's neighbours on its own rank: then the hand-off is a local slot, not a channel.
  template <int S>
  static constexpr bool local_prev = S > 0 && rank_of<(S > 0 ? S - 1 : 0)> == rank_of<S>;
  template <int S>
  static constexpr bool local_next = S + 1 < stage_count&& rank_of<(S + 1 < stage_count ? S + 1 : S)> == rank_of<S>;

  static constexpr std::size_t channels_count = stage_count > 1 ? detail::ix(stage_count - 1) : 0;
  // std::tuple<Element<0>, ..., Element<N - 1>> for Seq = std::index_sequence<0, ..., N - 1>.
  // (A member, so that clang checks access to the private element aliases from inside the class.)
  template <template <std::size_t> class Element, class Seq>
  struct tuple_of;
  template <template <std::size_t> class Element, std::size_t... I>
  struct tuple_of<Element, std::index_sequence<I...>> {
    using type = std::tuple<Element<I>...>;
  };
  template <std::size_t B>
  using channel_t = channel<boundary_tensor<static_cast<int>(B)>, capacity<static_cast<int>(B)>>;
  template <std::size_t B>
  using local_forward_t = line_array<boundary_tensor<static_cast<int>(B)>, detail::ix(Layout.local_forward_slots[B])>;
  template <std::size_t B>
  using local_backward_t = line_array<boundary_tensor<static_cast<int>(B)>, detail::ix(Layout.local_backward_slots[B])>;
  template <std::size_t S>
  using storage_at = storage_t<static_cast<int>(S)>;
  using channels_t = typename tuple_of<channel_t, std::make_index_sequence<channels_count>>::type;
  using local_forwards_t = typename tuple_of<local_forward_t, std::make_index_sequence<channels_count>>::type;
  using local_backwards_t = typename tuple_of<local_backward_t, std::make_index_sequence<channels_count>>::type;
  using storages_t = typename tuple_of<storage_at, std::make_index_sequence<detail::ix(stage_count)>>::type;

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

  template <int R, std::size_t... K>
  void zero_rank_gradients(std::index_sequence<K...>) {
    ((Layout.stage_rank[detail::ix(Plan.stage_of_layer(static_cast<int>(K)))] == R
          ? zero_layer_gradients(model_.template layer<K>())
          : void()),
     ...);
  }

  // Runs a task that calls user code; on an exception records who failed and stops every rank.
  template <int R, op_kind Op, int S, class Args, class F>
  void guarded(const Args& a, F&& f) {
    try {
      f();
    } catch (const aborted&) {
      throw;
    } catch (...) {
      fail(R, task{Op, S, a.microbatch, -1}, std::current_exception());
      throw aborted{};
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

  // ---- compute ops ---------------------------------------------------------------------------
  template <int S, std::size_t... K>
  void run_forward_layers(full_t<S>& a, std::index_sequence<K...>) {
    (model_.template layer<detail::ix(first_layer<S>) + K>().forward(std::get<K>(a), std::get<K + 1>(a)), ...);
  }

  template <int S, class Args>
  void forward(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    constexpr bool recompute = Plan.recompute[detail::ix(S)];
    auto& act = [&]() -> full_t<S>& {
      if constexpr (recompute)
        return st.work;
      else
        return st.stash[detail::ix(a.stash)];
    }();
    auto& x = std::get<0>(act);
    if constexpr (S == 0)
      x = inputs_[a.microbatch];
    else if constexpr (local_prev<S>)
      x = std::get<detail::ix(S - 1)>(local_forward_)[detail::ix(a.local_in)];
    else {
      auto& c = std::get<detail::ix(S - 1)>(forward_);
      x = c.ring[detail::ix(a.message % capacity<S - 1>)];
      consumed<rank_of<S - 1>>(c, a.message);
    }
    if constexpr (recompute) st.stash[detail::ix(a.stash)] = x;
    run_forward_layers<S>(act, std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
    if constexpr (local_next<S>)
      std::get<detail::ix(S)>(local_forward_)[detail::ix(a.local_out)] =
          std::get<std::tuple_size_v<full_t<S>> - 1>(act);
  }

  // Layers of stage S from the top down: layer first + K gets dy and writes g[K]. A full backward
  // (Input false) calls backward; an I (Input true) calls backward_input where the layer splits its
  // backward, and its whole backward where it does not (then its W does nothing).
  template <int S, bool Input, std::size_t K, class Dy>
  void run_backward_layers(full_t<S>& a, full_t<S>& g, const Dy& dy) {
    auto& l = model_.template layer<detail::ix(first_layer<S>) + K>();
    if constexpr (Input && splittable_layer<std::remove_cvref_t<decltype(l)>>)
      l.backward_input(std::get<K>(a), std::get<K + 1>(a), dy, std::get<K>(g));
    else
      l.backward(std::get<K>(a), std::get<K + 1>(a), dy, std::get<K>(g));
    if constexpr (K > 0) run_backward_layers<S, Input, K - 1>(a, g, std::get<K>(g));
  }

  // The stage's activations for the stash slot of `a`: the stash, or recomputed from its input.
  template <int S, class Args>
  full_t<S>& activations(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    if constexpr (Plan.recompute[detail::ix(S)]) {
      std::get<0>(st.work) = st.stash[detail::ix(a.stash)];
      run_forward_layers<S>(st.work, std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
      return st.work;
    } else {
      return st.stash[detail::ix(a.stash)];
    }
  }

  // B (Input false) or I (Input true). An I keeps the gradients it computed, the incoming one
  // included, in the stage's grad stash for its W; the stage's input gradient goes on from grads[0]
  // either way (to SEND_B or the local hand-off).
  template <int S, bool Input, class Args>
  void backward(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    constexpr std::size_t top = detail::ix(end_layer<S> - first_layer<S>);  // index of the output in full_t
    auto& act = activations<S>(a);
    auto& g = [&]() -> full_t<S>& {
      if constexpr (Input)
        return st.grad_stash[detail::ix(a.stash)];
      else
        return st.grads;
    }();
    if constexpr (S == stage_count - 1) {
      losses_[detail::ix(a.microbatch)] =
          static_cast<double>(loss_(std::get<top>(act), targets_[a.microbatch], std::get<top>(g)));
      run_backward_layers<S, Input, top - 1>(act, g, std::get<top>(g));
    } else if constexpr (local_next<S>) {
      const auto& dy = std::get<detail::ix(S)>(local_backward_)[detail::ix(a.local_in)];
      if constexpr (Input) std::get<top>(g) = dy;
      run_backward_layers<S, Input, top - 1>(act, g, dy);
    } else {
      auto& c = std::get<detail::ix(S)>(backward_);
      const auto& dy = c.ring[detail::ix(a.message % capacity<S>)];
      if constexpr (Input) std::get<top>(g) = dy;
      run_backward_layers<S, Input, top - 1>(act, g, dy);
      consumed<rank_of<S + 1>>(c, a.message);
    }
    if constexpr (Input && S > 0 && !local_prev<S>) std::get<0>(st.grads) = std::get<0>(g);  // for SEND_B
    if constexpr (local_prev<S>) std::get<detail::ix(S - 1)>(local_backward_)[detail::ix(a.local_out)] = std::get<0>(g);
  }

  // W: every layer that splits its backward adds its weight gradients, from the activations and
  // the output gradients its I kept.
  template <int S, std::size_t... K>
  void run_weight_layers(full_t<S>& a, const full_t<S>& g, std::index_sequence<K...>) {
    auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      auto& l = model_.template layer<detail::ix(first_layer<S>) + J>();
      if constexpr (splittable_layer<std::remove_cvref_t<decltype(l)>>)
        l.backward_weight(std::get<J>(a), std::get<J + 1>(a), std::get<J + 1>(g));
    };
    (one(std::integral_constant<std::size_t, K>{}), ...);
  }
  template <int S, std::size_t... K>
  static constexpr bool any_splits(std::index_sequence<K...>) {
    return (splittable_layer<typename Model::template layer_type<detail::ix(first_layer<S>) + K>> || ...);
  }
  template <int S, class Args>
  void weight_gradients(const Args& a) {
    using layers = std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>;
    if constexpr (any_splits<S>(layers{}))  // else its I ran the whole backward: nothing to recompute either
      run_weight_layers<S>(activations<S>(a), std::get<detail::ix(S)>(storage_).grad_stash[detail::ix(a.stash)],
                           layers{});
  }

  // ---- state ---------------------------------------------------------------------------------
  struct failure_record {
    int rank = -1;
    task t{};
    std::exception_ptr cause;
    task_failure make() const { return task_failure(executor_name(executor_kind::host), rank, t, cause); }
  };

  Model& model_;
  Loss& loss_;
  storages_t storage_;
  channels_t forward_, backward_;
  local_forwards_t local_forward_;
  local_backwards_t local_backward_;
  alignas(cache_line) std::array<double, detail::ix(Layout.microbatches)> losses_{};
  const input_type* inputs_ = nullptr;
  const target_type* targets_ = nullptr;
  std::array<padded<std::atomic<std::uint32_t>>, Ranks> wake_{};
  alignas(cache_line) std::atomic<std::uint32_t> epoch_{0};
  alignas(cache_line) std::atomic<std::uint32_t> done_{0};
  std::atomic<bool> failed_{false}, aborting_{false}, stopping_{false}, running_{false};
  failure_record failure_;
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
  static constexpr auto stages = Plan;
  static constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_ranks);
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_stages);
  static constexpr int microbatches = Table.params.microbatches;
  /// The strategy in use: dispatch::automatic unrolls where every rank's program has at most
  /// ctpipe::automatic_unroll_limit tasks.
  static constexpr dispatch dispatch_strategy =
      resolve_dispatch(Dispatch, detail::ix(*std::ranges::max_element(plan.table.length)), automatic_unroll_limit);
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;

  static_assert(detail::executor_requirements<detail::executor_kind::host, Table, plan, Model, Plan>::value);
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
    try {
      start_threads(std::make_integer_sequence<int, ranks>{});
    } catch (...) {
      stop();
      throw;
    }
  }
  host_executor(const host_executor&) = delete;
  host_executor& operator=(const host_executor&) = delete;

  /// Stops and joins the rank threads. Never blocks on a rank: a step in progress (only possible
  /// from another thread, which is a misuse) is aborted first.
  ~host_executor() { stop(); }

  /// One training step over `microbatches` inputs: zeroes the gradients of every layer, then runs
  /// the table, rank 0 on the calling thread. Returns each microbatch's loss; the gradients are in the model's layers,
  /// summed over microbatches in microbatch order. A task that throws ends the step with task_failure (after every rank
  /// has stopped); the executor stays usable and the next step starts afresh.
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets) {
    detail::check_microbatches("ctpipe::host_executor::step", inputs.size(), targets.size(), microbatches);
    engine_->begin_step(inputs, targets);
    run_rank<0>();
    return engine_->end_step();
  }

  Model& model() noexcept { return engine_->model(); }

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
  static constexpr auto layout = detail::stage_layout_of(plan);
  using engine_t = detail::host::engine<Model, Plan, Loss, layout>;

  template <int... R>
  void start_threads(std::integer_sequence<int, R...>) {
    ((R > 0 ? void(threads_[detail::ix(R - 1)] = std::thread([this] { rank_main<R>(); })) : void()), ...);
  }
  void stop() noexcept {
    engine_->stop();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  // Ranks 1..p-1: a step at a time until the executor stops.
  template <int R>
  void rank_main() noexcept {
    std::uint32_t seen = 0;
    while (engine_->wait_for_step(seen)) {
      run_rank<R>();
      engine_->end_rank();
    }
  }

  template <int R>
  void run_rank() noexcept {
    try {
      engine_->template begin_rank<R>();
      // The engine's address, once, in a local: every task then reaches its buffers at a constant
      // offset from it, with nothing to reload after a task's user code has run.
      runner<R> run{*engine_};
      detail::run_program<program<R>, dispatch_strategy>(run);
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

  std::unique_ptr<engine_t> engine_;  // on the heap: its buffers may be large
  std::array<std::thread, detail::ix(ranks - 1)> threads_{};
};

/// Deduces Model and Loss: make_host_executor<table, stages>(model, loss).
template <auto Table, auto Plan, model_type Model, class Loss>
auto make_host_executor(Model& model, Loss& loss) {
  return std::make_unique<host_executor<Table, Model, Plan, Loss>>(model, loss);
}

}  // namespace ctpipe
