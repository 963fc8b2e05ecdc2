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
#include <cstdint>
#include <exception>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/stages.hpp>
#include <ctpipe/model/context.hpp>
#include <ctpipe/model/detail/call.hpp>
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
// Where the stage's layers keep state for their backward (Keeps: some layer has a saved_type),
// `saved` holds it per live microbatch in the stash's slots, from the F that writes it to the last
// backward op that reads it. A recomputing stage keeps none from its F: each B, I or W recomputes
// it into `work_saved`; with split backward, the I's recomputed state (and what its backward_input
// added) stays in `saved` for its W, whose own recomputation writes only `work_saved`.
struct no_work {};
// Cache-line aligned: stages on different ranks must not share a line (the engine holds them side
// by side, and small tensors would otherwise ping-pong between cores on every write).
template <class Full, class Input, class Saved, bool Keeps, bool Recompute, bool Split, int Slots>
struct alignas(cache_line) stage_storage {
  using stash_type = std::conditional_t<Recompute, Input, Full>;
  static constexpr bool per_slot = Keeps && (!Recompute || Split);
  std::array<stash_type, detail::ix(Slots)> stash{};
  [[no_unique_address]] std::array<Saved, per_slot ? detail::ix(Slots) : 0> saved{};   // no bytes without state
  [[no_unique_address]] std::array<Full, Split ? detail::ix(Slots) : 0> grad_stash{};  // no bytes without split
  [[no_unique_address]] std::conditional_t<Recompute, Full, no_work> work{};
  [[no_unique_address]] std::conditional_t<Recompute && Keeps, Saved, no_work> work_saved{};
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
           (Layout.split_backward ? sizeof(st::grad_stash) : 0) + (st::per_slot ? sizeof(st::saved) : 0) +
           (Stages.recompute[detail::ix(S)] ? sizeof(full_t<S>) + (keeps<S> ? sizeof(saved_states<S>) : 0) : 0);
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
  // What stage S's layers keep for their backward, one microbatch's worth, and whether any keeps some.
  template <int S>
  using saved_states = saved_states_t<Model, detail::ix(first_layer<S>), detail::ix(end_layer<S> - first_layer<S>)>;
  template <int S>
  static constexpr bool keeps = []<std::size_t... K>(std::index_sequence<K...>) {
    return (has_saved_state<typename Model::template layer_type<detail::ix(first_layer<S>) + K>> || ...);
  }
  (std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
  template <int S>
  using storage_t = stage_storage<full_t<S>, input_t<S>, saved_states<S>, keeps<S>, Stages.recompute[detail::ix(S)],
                                  Layout.split_backward, Layout.stash_slots[detail::ix(S)]>;
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

  // A step starts: its batch, and its number for the layers' context (steps counted from 0; a
  // pipeline's drain, `counts` false, is no step of its own). `fresh`: a pipeline starts (an
  // asynchronous one numbers its microbatches from there).
  void set_batch(const input_type* inputs, const target_type* targets, bool fresh = true, bool counts = true) noexcept {
    inputs_ = inputs;
    targets_ = targets;
    if (counts) step_ = next_step_++;
    if (fresh) pipeline_step_ = step_;
  }

 public:
  /// Where the steps that follow stand for the layers' context (ctpipe::context): the next step's
  /// number, counting up by one per step, and the index of this executor's microbatch 0 in the global
  /// batch. Defaults: step 0, microbatch 0.
  void set_context_origin(step_origin o) noexcept {
    next_step_ = o.step;
    first_microbatch_ = o.first_microbatch;
  }
  step_origin context_origin() const noexcept { return {next_step_, first_microbatch_}; }

 protected:
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
  // The context a layer of stage S gets in a task Op (built only for a layer that takes one).
  // An asynchronous pipeline's task may run a microbatch fed by an earlier step: its context names
  // the step that fed it (a.global counts microbatches from the pipeline's start), so that its F and
  // B see the same step and microbatch.
  template <int S, op_kind Op, std::size_t Layer, class Args>
  auto context_for(const Args& a) const noexcept {
    return [this, &a] {
      constexpr int m = Layout.microbatches;
      if constexpr (requires { a.global; })
        return context{rank_of<S>,
                       S,
                       static_cast<int>(Layer),
                       first_microbatch_ + a.global % m,
                       Op,
                       pipeline_step_ + static_cast<std::uint64_t>(a.global / m)};
      else
        return context{rank_of<S>, S, static_cast<int>(Layer), first_microbatch_ + a.microbatch, Op, step_};
    };
  }

  // Where stage S's layers keep their state for the microbatch of `a`: its stash slot's, or (a
  // recomputing stage) the work copy; Slot: the slot's where there is one.
  template <int S, bool Slot, class Args>
  saved_states<S>& saved_for(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    if constexpr (!keeps<S>)
      return no_saved_<S>;
    else if constexpr (Slot && storage_t<S>::per_slot)
      return st.saved[detail::ix(a.stash)];
    else
      return st.work_saved;
  }

  template <int S, op_kind Op, class Args, std::size_t... K>
  void run_forward_layers(const Args& args, full_t<S>& a, saved_states<S>& s, std::index_sequence<K...>) {
    auto& w = self().template weights<S>(args);
    (detail::call_forward(w.template layer<detail::ix(first_layer<S>) + K>(),
                          context_for<S, Op, detail::ix(first_layer<S>) + K>(args), std::get<K>(a), std::get<K + 1>(a),
                          std::get<K>(s)),
     ...);
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
      run_prefix(a, x);
    else if constexpr (local_prev<S>)
      x = std::get<detail::ix(S - 1)>(local_forward_)[detail::ix(a.local_in)];
    else {
      x = self().template remote_input<S>(a);
      self().template input_consumed<S>(a);
    }
    if constexpr (recompute) st.stash[detail::ix(a.stash)] = x;
    run_forward_layers<S, op_kind::forward>(a, act, saved_for<S, !recompute>(a),
                                            std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
    if constexpr (local_next<S>)
      std::get<detail::ix(S)>(local_forward_)[detail::ix(a.local_out)] =
          std::get<std::tuple_size_v<full_t<S>> - 1>(act);
  }

  // The frozen prefix, forward only, for the microbatch of `a`: its output into x (from the cache
  // where it has it). Its layers' context: stage 0's.
  template <class Args>
  void run_prefix(const Args& a, prefix_type& x) {
    const auto i = detail::ix(a.microbatch);
    if (prefix_in_ != nullptr && prefix_in_[i] != nullptr) {
      x = *prefix_in_[i];
      return;
    }
    auto& t = prefix_.value;
    std::get<0>(t) = inputs_[a.microbatch];
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (detail::call_forward(model_.template layer<K>(), context_for<0, op_kind::forward, K>(a), std::get<K>(t),
                            std::get<K + 1>(t), std::get<K>(prefix_.saved)),
       ...);
    }
    (std::make_index_sequence<detail::ix(frozen)>{});
    x = std::get<detail::ix(frozen)>(t);
    if (prefix_out_ != nullptr && prefix_out_[i] != nullptr) *prefix_out_[i] = x;
  }

  // Layers of stage S from the top down: layer first + K gets dy and writes g[K]. A full backward
  // (Input false) calls backward; an I (Input true) calls backward_input where the layer splits its
  // backward, and its whole backward where it does not (then its W does nothing).
  template <int S, bool Input, std::size_t K, class Args, class Dy>
  void run_backward_layers(const Args& args, full_t<S>& a, saved_states<S>& s, full_t<S>& g, const Dy& dy) {
    // K past the stage's layers: an empty stage, which only the stand-in for a refused stage plan
    // has (detail::usable_stages); compiling nothing here keeps that plan's message the only one.
    if constexpr (K < detail::ix(end_layer<S> - first_layer<S>)) {
      constexpr std::size_t layer = detail::ix(first_layer<S>) + K;
      auto& l = self().template weights<S>(args).template layer<layer>();
      constexpr bool split = Input && splittable_layer<std::remove_cvref_t<decltype(l)>>;
      constexpr op_kind op = Input ? op_kind::backward_input : op_kind::backward;
      detail::call_backward<split>(l, context_for<S, op, layer>(args), std::get<K>(a), std::get<K + 1>(a),
                                   std::get<K>(s), dy, std::get<K>(g));
      if constexpr (K > 0) run_backward_layers<S, Input, K - 1>(args, a, s, g, std::get<K>(g));
    }
  }

  // The stage's activations for the stash slot of `a`: the stash, or recomputed from its input
  // (with the layers' state, into saved_for<S, Slot>: the slot's for a B or an I, the work copy
  // for a W, which reads what its I kept).
  template <int S, op_kind Op, class Args>
  full_t<S>& activations(const Args& a) {
    auto& st = std::get<detail::ix(S)>(storage_);
    if constexpr (Stages.recompute[detail::ix(S)]) {
      std::get<0>(st.work) = st.stash[detail::ix(a.stash)];
      run_forward_layers<S, Op>(a, st.work, saved_for<S, Op != op_kind::backward_weight>(a),
                                std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
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
    constexpr op_kind op = Input ? op_kind::backward_input : op_kind::backward;
    auto& act = activations<S, op>(a);
    auto& saved = saved_for<S, true>(a);
    auto& g = [&]() -> full_t<S>& {
      if constexpr (Input)
        return st.grad_stash[detail::ix(a.stash)];
      else
        return st.grads;
    }();
    if constexpr (S == stage_count - 1) {
      losses_[detail::ix(a.microbatch)] =
          static_cast<double>(loss_(std::get<top>(act), targets_[a.microbatch], std::get<top>(g)));
      run_backward_layers<S, Input, top - 1>(a, act, saved, g, std::get<top>(g));
    } else if constexpr (local_next<S>) {
      const auto& dy = std::get<detail::ix(S)>(local_backward_)[detail::ix(a.local_in)];
      if constexpr (Input) std::get<top>(g) = dy;
      run_backward_layers<S, Input, top - 1>(a, act, saved, g, dy);
    } else {
      const auto& dy = self().template remote_gradient<S>(a);
      if constexpr (Input) std::get<top>(g) = dy;
      run_backward_layers<S, Input, top - 1>(a, act, saved, g, dy);
      self().template gradient_consumed<S>(a);
    }
    if constexpr (Input && S > 0 && !local_prev<S>) std::get<0>(st.grads) = std::get<0>(g);  // for SEND_B
    if constexpr (local_prev<S>) std::get<detail::ix(S - 1)>(local_backward_)[detail::ix(a.local_out)] = std::get<0>(g);
  }

  // W: every layer that splits its backward adds its weight gradients, from the activations, the
  // state its F saved (and its I added to), and the output gradients its I kept.
  template <int S, class Args, std::size_t... K>
  void run_weight_layers(const Args& args, full_t<S>& a, const saved_states<S>& s, const full_t<S>& g,
                         std::index_sequence<K...>) {
    auto& w = self().template weights<S>(args);
    auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      constexpr std::size_t layer = detail::ix(first_layer<S>) + J;
      auto& l = w.template layer<layer>();
      if constexpr (splittable_layer<std::remove_cvref_t<decltype(l)>>)
        detail::call_backward_weight(l, context_for<S, op_kind::backward_weight, layer>(args), std::get<J>(a),
                                     std::get<J + 1>(a), std::get<J>(s), std::get<J + 1>(g));
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
    if constexpr (any_splits<S>(layers{})) {  // else its I ran the whole backward: nothing to recompute either
      auto& act = activations<S, op_kind::backward_weight>(a);
      run_weight_layers<S>(a, act, saved_for<S, true>(a),
                           std::get<detail::ix(S)>(storage_).grad_stash[detail::ix(a.stash)], layers{});
    }
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
    saved_states_t<Model, 0, detail::ix(frozen)> saved{};
  };
  [[no_unique_address]] std::conditional_t<(frozen > 0 && held<0>), prefix_scratch, no_prefix> prefix_{};
  const prefix_type* const* prefix_in_ = nullptr;
  prefix_type* const* prefix_out_ = nullptr;
  const target_type* targets_ = nullptr;
  // The layers' context: this step's number, the next one's, and where this executor's microbatches
  // start in the global batch.
  std::uint64_t step_ = 0, next_step_ = 0, pipeline_step_ = 0;
  int first_microbatch_ = 0;
  // What saved_for gives a stage that keeps no state (its layers take none).
  template <int S>
  static inline saved_states<S> no_saved_{};
};

}  // namespace ctpipe::detail::host
