// The compute half of every executor of host tensors: each stage's storage (stash, grad stash,
// recompute buffer, gradients), the same-rank hand-off slots, and the code of F, B, I and W. What
// differs between such executors is how a tensor crosses a rank boundary (a ring between threads,
// a message between processes) and what happens when a task fails: the executor's engine derives
// from compute (CRTP) and provides
//
//   const boundary_tensor<S - 1>& remote_input<S>(a);  void input_consumed<S>(a);  // F of stage S
//   const boundary_tensor<S>& remote_gradient<S>(a);   void gradient_consumed<S>(a);  // B, I of stage S
//   void fail(int rank, task t, std::exception_ptr e) noexcept;  // before the task unwinds
//
// all called with the task's arguments `a` (constants when unrolled). No virtual call: every call
// is inlined into the task's code.
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/stages.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::detail::host {

inline constexpr std::size_t cache_line = 64;

struct aborted {};  // unwinds a rank's program when the step has failed (here or elsewhere)

template <class T>
struct alignas(cache_line) padded {
  T value{};
};
// An array that starts a cache line of its own.
template <class T, std::size_t N>
struct alignas(cache_line) line_array : std::array<T, N> {};

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
// The storage of a stage another process runs (see compute's Only).
struct absent_stage {};

/// Stage storage and the compute ops for a model split by Stages, with loss Loss, laid out by Layout
/// (a stage_layout). Only: the rank whose stages this object holds storage for (an executor with a
/// process per rank), or -1 for every rank (an executor with a thread per rank).
template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only = -1>
class compute {
 public:
  using types = detail::stage_types<Model, Stages>;
  static constexpr int stage_count = Stages.stages();
  using input_type = typename Model::input_type;
  using target_type = typename Loss::target_type;
  template <int B>
  using boundary_tensor = typename types::template boundary_tensor<B>;
  template <int S>
  static constexpr int rank_of = Layout.stage_rank[detail::ix(S)];
  /// Layers before the first stage's first layer are frozen: stage 0's rank runs them forward
  /// only, into a scratch that no backward reads (or takes their output from a cache).
  static constexpr int frozen = Stages.first[0];
  /// What the frozen prefix gives the first stage: the tensor at boundary `frozen`.
  using prefix_type = boundary_t<Model, detail::ix(frozen)>;

  compute(Model& model, Loss& loss) : model_(model), loss_(loss) {}
  compute(const compute&) = delete;
  compute& operator=(const compute&) = delete;

  Model& model() noexcept { return model_; }
  std::span<const double> losses() const noexcept { return {losses_.data(), losses_.size()}; }

  template <int S>
  static constexpr std::size_t stage_activation_bytes() {
    using st = storage_t<S>;
    return detail::ix(Layout.stash_slots[detail::ix(S)]) * sizeof(typename st::stash_type) +
           (Layout.split_backward ? sizeof(st::grad_stash) : 0) +
           (Stages.recompute[detail::ix(S)] ? sizeof(full_t<S>) : 0);
  }

 protected:
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
  using storage_t = stage_storage<full_t<S>, input_t<S>, Stages.recompute[detail::ix(S)], Layout.split_backward,
                                  Layout.stash_slots[detail::ix(S)]>;
  template <int S>
  static constexpr bool held = Only < 0 || rank_of<S> == Only;
  // Stage S's neighbours on its own rank: then the hand-off is a local slot, not a channel.
  template <int S>
  static constexpr bool local_prev = S > 0 && rank_of<(S > 0 ? S - 1 : 0)> == rank_of<S>;
  template <int S>
  static constexpr bool local_next = S + 1 < stage_count&& rank_of<(S + 1 < stage_count ? S + 1 : S)> == rank_of<S>;

  static constexpr std::size_t boundaries = stage_count > 1 ? detail::ix(stage_count - 1) : 0;
  // std::tuple<Element<0>, ..., Element<N - 1>> for Seq = std::index_sequence<0, ..., N - 1>.
  // (A member, so that clang checks access to the private element aliases from inside the class.)
  template <template <std::size_t> class Element, class Seq>
  struct tuple_of;
  template <template <std::size_t> class Element, std::size_t... I>
  struct tuple_of<Element, std::index_sequence<I...>> {
    using type = std::tuple<Element<I>...>;
  };
  // A boundary's same-rank slots exist where its stages are held.
  template <std::size_t B>
  using local_forward_t = line_array<boundary_tensor<static_cast<int>(B)>,
                                     held<static_cast<int>(B)> ? detail::ix(Layout.local_forward_slots[B]) : 0>;
  template <std::size_t B>
  using local_backward_t = line_array<boundary_tensor<static_cast<int>(B)>,
                                      held<static_cast<int>(B)> ? detail::ix(Layout.local_backward_slots[B]) : 0>;
  template <std::size_t S>
  using storage_at = std::conditional_t<held<static_cast<int>(S)>, storage_t<static_cast<int>(S)>, absent_stage>;
  using local_forwards_t = typename tuple_of<local_forward_t, std::make_index_sequence<boundaries>>::type;
  using local_backwards_t = typename tuple_of<local_backward_t, std::make_index_sequence<boundaries>>::type;
  using storages_t = typename tuple_of<storage_at, std::make_index_sequence<detail::ix(stage_count)>>::type;

  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  // The layers a task of stage S computes with: the model's, unless the engine keeps weight
  // versions of its own (an asynchronous pipeline: its `weights` hides this one).
  template <int S, class Args>
  Model& weights(const Args&) noexcept {
    return model_;
  }
  // The microbatch a failure names: the task's, or where the engine counts microbatches across
  // steps, that count.
  template <class Args>
  static int reported_microbatch(const Args& a) {
    if constexpr (requires { a.global; })
      return a.global;
    else
      return a.microbatch;
  }

  // The frozen prefix's cache for the steps that follow: per microbatch, the output to use instead
  // of running the prefix (in[i], or null) and where to keep the output it computes (out[i], or null).
  void set_prefix_cache(const prefix_type* const* in, prefix_type* const* out) noexcept {
    prefix_in_ = in;
    prefix_out_ = out;
  }

  void set_batch(const input_type* inputs, const target_type* targets) noexcept {
    inputs_ = inputs;
    targets_ = targets;
  }

  // Zeroes the gradients of the layers of rank R's stages.
  template <int R>
  void zero_rank_gradients() {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((Layout.stage_rank[detail::ix(Stages.stage_of_layer(static_cast<int>(K)))] == R
            ? zero_layer_gradients(model_.template layer<K>())
            : void()),
       ...);
    }
    (std::make_index_sequence<Model::size>{});
  }

  // Runs a task that calls user code; on an exception the executor records who failed (fail), and
  // the rank's program unwinds.
  template <int R, op_kind Op, int S, class Args, class F>
  void guarded(const Args& a, F&& f) {
    try {
      f();
    } catch (const aborted&) {
      throw;
    } catch (...) {
      self().fail(R, task{Op, S, reported_microbatch(a), -1}, std::current_exception());
      throw aborted{};
    }
  }

  // F, B, I or W of stage S on rank R.
  template <int R, op_kind Op, int S, class Args>
  void run_compute(const Args& a) {
    if constexpr (Op == op_kind::forward)
      guarded<R, Op, S>(a, [&] { forward<S>(a); });
    else if constexpr (Op == op_kind::backward)
      guarded<R, Op, S>(a, [&] { backward<S, false>(a); });
    else if constexpr (Op == op_kind::backward_input)
      guarded<R, Op, S>(a, [&] { backward<S, true>(a); });
    else if constexpr (Op == op_kind::backward_weight)
      guarded<R, Op, S>(a, [&] { weight_gradients<S>(a); });
  }

  // What SEND_F of stage S sends (its output for the microbatch of `a`) and what SEND_B sends.
  template <int S, class Args>
  const boundary_tensor<S>& stage_output(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    if constexpr (Stages.recompute[detail::ix(S)])
      return std::get<std::tuple_size_v<full_t<S>> - 1>(st.work);
    else
      return std::get<std::tuple_size_v<full_t<S>> - 1>(st.stash[detail::ix(a.stash)]);
  }
  template <int S>
  const boundary_tensor<S - 1>& input_gradient() {
    return std::get<0>(std::get<detail::ix(S)>(storage_).grads);
  }

 private:
  template <int S, class Args, std::size_t... K>
  void run_forward_layers(const Args& args, full_t<S>& a, std::index_sequence<K...>) {
    auto& w = self().template weights<S>(args);
    (w.template layer<detail::ix(first_layer<S>) + K>().forward(std::get<K>(a), std::get<K + 1>(a)), ...);
  }

  template <int S, class Args>
  void forward(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    constexpr bool recompute = Stages.recompute[detail::ix(S)];
    auto& act = [&]() -> full_t<S>& {
      if constexpr (recompute)
        return st.work;
      else
        return st.stash[detail::ix(a.stash)];
    }();
    auto& x = std::get<0>(act);
    if constexpr (S == 0 && frozen == 0)
      x = inputs_[a.microbatch];
    else if constexpr (S == 0)
      run_prefix(a.microbatch, x);
    else if constexpr (local_prev<S>)
      x = std::get<detail::ix(S - 1)>(local_forward_)[detail::ix(a.local_in)];
    else {
      x = self().template remote_input<S>(a);
      self().template input_consumed<S>(a);
    }
    if constexpr (recompute) st.stash[detail::ix(a.stash)] = x;
    run_forward_layers<S>(a, act, std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
    if constexpr (local_next<S>)
      std::get<detail::ix(S)>(local_forward_)[detail::ix(a.local_out)] =
          std::get<std::tuple_size_v<full_t<S>> - 1>(act);
  }

  // The frozen prefix, forward only, for microbatch mb: its output into x (from the cache where it has it).
  void run_prefix(int mb, prefix_type& x) {
    const auto i = detail::ix(mb);
    if (prefix_in_ != nullptr && prefix_in_[i] != nullptr) {
      x = *prefix_in_[i];
      return;
    }
    auto& t = prefix_.value;
    std::get<0>(t) = inputs_[mb];
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (model_.template layer<K>().forward(std::get<K>(t), std::get<K + 1>(t)), ...);
    }
    (std::make_index_sequence<detail::ix(frozen)>{});
    x = std::get<detail::ix(frozen)>(t);
    if (prefix_out_ != nullptr && prefix_out_[i] != nullptr) *prefix_out_[i] = x;
  }

  // Layers of stage S from the top down: layer first + K gets dy and writes g[K]. A full backward
  // (Input false) calls backward; an I (Input true) calls backward_input where the layer splits its
  // backward, and its whole backward where it does not (then its W does nothing).
  template <int S, bool Input, std::size_t K, class Args, class Dy>
  void run_backward_layers(const Args& args, full_t<S>& a, full_t<S>& g, const Dy& dy) {
    // K past the stage's layers: an empty stage, which only the stand-in for a refused stage plan
    // has (detail::usable_stages); compiling nothing here keeps that plan's message the only one.
    if constexpr (K < detail::ix(end_layer<S> - first_layer<S>)) {
      auto& l = self().template weights<S>(args).template layer<detail::ix(first_layer<S>) + K>();
      if constexpr (Input && splittable_layer<std::remove_cvref_t<decltype(l)>>)
        l.backward_input(std::get<K>(a), std::get<K + 1>(a), dy, std::get<K>(g));
      else
        l.backward(std::get<K>(a), std::get<K + 1>(a), dy, std::get<K>(g));
      if constexpr (K > 0) run_backward_layers<S, Input, K - 1>(args, a, g, std::get<K>(g));
    }
  }

  // The stage's activations for the stash slot of `a`: the stash, or recomputed from its input.
  template <int S, class Args>
  full_t<S>& activations(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    if constexpr (Stages.recompute[detail::ix(S)]) {
      std::get<0>(st.work) = st.stash[detail::ix(a.stash)];
      run_forward_layers<S>(a, st.work, std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
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
      run_backward_layers<S, Input, top - 1>(a, act, g, std::get<top>(g));
    } else if constexpr (local_next<S>) {
      const auto& dy = std::get<detail::ix(S)>(local_backward_)[detail::ix(a.local_in)];
      if constexpr (Input) std::get<top>(g) = dy;
      run_backward_layers<S, Input, top - 1>(a, act, g, dy);
    } else {
      const auto& dy = self().template remote_gradient<S>(a);
      if constexpr (Input) std::get<top>(g) = dy;
      run_backward_layers<S, Input, top - 1>(a, act, g, dy);
      self().template gradient_consumed<S>(a);
    }
    if constexpr (Input && S > 0 && !local_prev<S>) std::get<0>(st.grads) = std::get<0>(g);  // for SEND_B
    if constexpr (local_prev<S>) std::get<detail::ix(S - 1)>(local_backward_)[detail::ix(a.local_out)] = std::get<0>(g);
  }

  // W: every layer that splits its backward adds its weight gradients, from the activations and
  // the output gradients its I kept.
  template <int S, class Args, std::size_t... K>
  void run_weight_layers(const Args& args, full_t<S>& a, const full_t<S>& g, std::index_sequence<K...>) {
    auto& w = self().template weights<S>(args);
    auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      auto& l = w.template layer<detail::ix(first_layer<S>) + J>();
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
      run_weight_layers<S>(a, activations<S>(a), std::get<detail::ix(S)>(storage_).grad_stash[detail::ix(a.stash)],
                           layers{});
  }

  Model& model_;
  Loss& loss_;
  storages_t storage_;
  local_forwards_t local_forward_;
  local_backwards_t local_backward_;
  alignas(cache_line) std::array<double, detail::ix(Layout.microbatches)> losses_{};
  const input_type* inputs_ = nullptr;
  // The frozen prefix's tensors (stage 0's rank only), and its cache.
  struct no_prefix {
    no_work value;
  };
  struct prefix_scratch {
    boundaries_t<Model, 0, detail::ix(frozen) + 1> value{};
  };
  [[no_unique_address]] std::conditional_t<(frozen > 0 && held<0>), prefix_scratch, no_prefix> prefix_{};
  const prefix_type* const* prefix_in_ = nullptr;
  prefix_type* const* prefix_out_ = nullptr;
  const target_type* targets_ = nullptr;
};

}  // namespace ctpipe::detail::host
