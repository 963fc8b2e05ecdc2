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
#include <cstring>
#include <exception>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/extents.hpp>
#include <ctpipe/exec/detail/graph_walk.hpp>
#include <ctpipe/exec/detail/host_storage.hpp>
#include <ctpipe/exec/detail/op_switch.hpp>  // route
#include <ctpipe/exec/detail/stages.hpp>
#include <ctpipe/model/context.hpp>
#include <ctpipe/model/detail/call.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::detail {

/// Stage storage and the compute ops for a model split by Stages, with loss Loss, laid out by Layout
/// (a stage_layout). Only: the rank whose stages this object holds storage for (an executor with a
/// process per rank), or -1 for every rank (an executor with a thread per rank).
template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
class compute {
 public:
  using types = detail::stage_types<Model, Stages>;
  /// The table's stages: Stages's, or for a bidirectional table (dualpipe) two chains of them, the
  /// second running mirrored copies of the first's layers (stage_chains).
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(Layout)::stages);
  static constexpr int chain_length = Layout.chain_length;
  static constexpr bool mirrored = chain_length != stage_count;
  static constexpr bool model_checked = Model::checked;  // (else the op switch builds no task)
  /// The model stage (of Stages) stage S runs, and its chain (1: the mirrors).
  template <int S>
  static constexpr int model_stage = S % chain_length;
  template <int S>
  static constexpr int chain_of = S / chain_length;
  template <int S>
  static constexpr bool first_of_chain = S % chain_length == 0;
  template <int S>
  static constexpr bool last_of_chain = (S + 1) % chain_length == 0;
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;
  /// A forward-only table (evaluation, inference): no gradient is zeroed or computed, and each
  /// microbatch's F on its chain's last stage ends it (finish_forward).
  static constexpr bool forward_only = Layout.forward_only;
  template <int B>
  using boundary_tensor = typename types::template boundary_tensor<model_stage<B>>;
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
  /// The tokens each microbatch's loss covered (its extent), where the model has extents (else none).
  std::span<const int> tokens() const noexcept { return {tokens_.data(), tokens_.size()}; }

  template <int S>
  static constexpr std::size_t stage_activation_bytes() {
    using st = storage_t<S>;
    return detail::ix(Layout.stash_slots[detail::ix(S)]) * sizeof(typename st::stash_type) +
           (Layout.split_backward ? sizeof(st::grad_stash) : 0) + (st::per_slot ? sizeof(st::saved) : 0) +
           (Stages.recompute[detail::ix(model_stage<S>)] ? sizeof(st::work) + (keeps<S> ? sizeof(saved_states<S>) : 0)
                                                         : 0);
  }

 protected:
  // ---- types of each stage and boundary ------------------------------------------------------
  template <int S>
  static constexpr int first_layer = types::template first_layer<model_stage<S>>;
  template <int S>
  static constexpr int end_layer = types::template end_layer<model_stage<S>>;
  template <int S>
  using full_t = typename types::template full_t<model_stage<S>>;
  template <int S>
  using input_t = typename types::template input_t<model_stage<S>>;
  // What stage S's layers keep for their backward, one microbatch's worth, and whether any keeps some.
  template <int S>
  using saved_states = saved_states_t<Model, detail::ix(first_layer<S>), detail::ix(end_layer<S> - first_layer<S>)>;
  template <int S>
  static constexpr bool keeps = []<std::size_t... K>(std::index_sequence<K...>) {
    return (has_saved_state<typename Model::template layer_type<detail::ix(first_layer<S>) + K>> || ...);
  }
  (std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
  // ---- a model that is not a chain: each stage gathers its layers' inputs from its own layers'
  // outputs and the messages of earlier stages (exec/detail/graph_stages.hpp) ---------------------
  static constexpr bool graph = !Model::is_chain;
  using gtypes = graph_stage_types<Model, Stages>;
  using wiring = graph_wiring<Model, Stages>;
  using walk = graph_walk<Model, Stages, Layout.skips>;
  template <int S>
  struct graph_storage {
    using inputs = typename gtypes::template inputs_t<S>;
    using outputs = typename gtypes::template outputs_t<S>;
    using type =
        graph_stage_storage<graph_activations<inputs, outputs>, typename gtypes::template inbox_t<S>,
                            typename gtypes::template sendbox_t<S>, typename gtypes::template outbox_t<S>, outputs,
                            inputs, saved_states<S>, keeps<S>, Stages.recompute[detail::ix(model_stage<S>)],
                            Layout.split_backward, Layout.stash_slots[detail::ix(S)]>;
  };
  template <int S>
  struct chain_storage {
    using type =
        stage_storage<full_t<S>, input_t<S>, saved_states<S>, keeps<S>, Stages.recompute[detail::ix(model_stage<S>)],
                      Layout.split_backward, Layout.stash_slots[detail::ix(S)]>;
  };
  template <int S>
  using storage_t = typename std::conditional_t<graph, graph_storage<S>, chain_storage<S>>::type;
  /// What boundary B carries forwards (stage B's output, or its message to B + 1) and backwards.
  /// (Between a bidirectional table's two chains nothing crosses: a stand-in type, never sent.)
  template <int B>
  using forward_message =
      std::conditional_t<last_of_chain<B>, input_type,
                         typename detail::stage_kinds<Model, Stages>::template forward_message<model_stage<B>>>;
  template <int B>
  using backward_message =
      std::conditional_t<last_of_chain<B>, input_type,
                         typename detail::stage_kinds<Model, Stages>::template backward_message<model_stage<B>>>;
  /// The crossings (skip messages): crossing K joins stage skip_from<K> to skip_to<K>.
  static constexpr std::size_t crossing_count = Layout.skips.size();
  template <std::size_t K>
  static constexpr int skip_from = Layout.skips[K].from;
  template <std::size_t K>
  static constexpr int skip_to = Layout.skips[K].to;
  template <std::size_t K>
  using skip_value_t = typename gtypes::template message_t<skip_from<K>, skip_to<K>>;
  template <std::size_t K>
  using skip_gradient_t = typename gtypes::template gradient_t<skip_to<K>, skip_from<K>>;
  /// The crossing from stage A to stage B.
  static constexpr std::size_t skip_index(int a, int b) {
    std::size_t k = 0;
    while (k < crossing_count && !(Layout.skips[k].from == a && Layout.skips[k].to == b)) ++k;
    return k;
  }
  template <std::size_t K>
  static constexpr bool skip_local = !Layout.skips[K].remote;
  // Where crossing K's message for the microbatch of `a` is: its ordinal on the channel, or its slot.
  // (An asynchronous pipeline numbers each channel's messages from its start: one a microbatch, on
  // every crossing, and its stages are all on ranks of their own.)
  template <std::size_t K, class Args>
  static constexpr int skip_value_at(const Args& a) {
    static_assert(!(requires { a.global; }) || !skip_local<K>,
                  "ctpipe: an asynchronous pipeline's crossings join stages on two ranks (one stage per rank)");
    if constexpr (requires { a.global; })
      return a.global;
    else
      return Layout.skip_value_at[K * detail::ix(Layout.microbatches) + detail::ix(a.microbatch)];
  }
  template <std::size_t K, class Args>
  static constexpr int skip_gradient_at(const Args& a) {
    if constexpr (requires { a.global; })
      return a.global;
    else
      return Layout.skip_gradient_at[K * detail::ix(Layout.microbatches) + detail::ix(a.microbatch)];
  }
  template <int S>
  static constexpr bool held = Only < 0 || rank_of<S> == Only;
  // Stage S's neighbours on its own rank: then the hand-off is a local slot, not a channel.
  template <int S>
  static constexpr bool local_prev = !first_of_chain<S> && rank_of<(S > 0 ? S - 1 : 0)> == rank_of<S>;
  template <int S>
  static constexpr bool local_next = !last_of_chain<S> && rank_of<(S + 1 < stage_count ? S + 1 : S)> == rank_of<S>;

  static constexpr std::size_t boundaries = stage_count > 1 ? detail::ix(stage_count - 1) : 0;
  // std::tuple<Element<0>, ..., Element<N - 1>> for Seq = std::index_sequence<0, ..., N - 1>.
  // (A member, so that clang checks access to the private element aliases from inside the class.)
  template <template <std::size_t> class Element, class Seq>
  struct tuple_of;
  template <template <std::size_t> class Element, std::size_t... I>
  struct tuple_of<Element, std::index_sequence<I...>> {
    using type = std::tuple<Element<I>...>;
  };
  // ---- extents: a model with token-major tensors (ctpipe/model/extent.hpp) --------------------
  static constexpr std::size_t token_capacity = Model::token_capacity;
  static constexpr bool extents = token_capacity > 0;
  /// What a slot between two stages holds: the message, with its microbatch's extent where the
  /// model has extents (exec/detail/extents.hpp).
  template <class M>
  using slot_t = std::conditional_t<extents, carried<M>, M>;
  template <class Slot>
  static constexpr auto& value_of(Slot& s) noexcept {
    if constexpr (extents)
      return s.value;
    else
      return s;
  }
  template <class Slot>
  static constexpr int extent_in(const Slot& s) noexcept {
    if constexpr (extents)
      return s.extent;
    else
      return 0;
  }
  // Message `from`, of a microbatch of extent e, into a slot.
  template <class M>
  static void put(slot_t<M>& to, const M& from, int e) {
    if constexpr (extents) {
      to.extent = e;
      copy_used(to.value, from, e);
    } else {
      to = from;
    }
  }
  // What a microbatch of extent e uses of `from` into `to` (all of it in a model of fixed shapes).
  template <class M>
  static void copy_message(M& to, const M& from, int e) {
    if constexpr (extents)
      copy_used(to, from, e);
    else
      to = from;
  }
  // The same for one tensor.
  template <class T>
  static void assign_used(T& to, const T& from, int e) {
    if constexpr (extents && token_major<T>)
      std::memcpy(static_cast<void*>(&to), static_cast<const void*>(&from), used_bytes<T>(e));
    else
      to = from;
  }
  // Per stage: each stash slot's microbatch's extent, and that of the messages its last F and its
  // last B or I made (for the sends that follow them).
  template <int Slots>
  struct alignas(cache_line) stage_extents {
    std::array<int, detail::ix(Slots)> slot{};
    int forward = 0, backward = 0;
  };
  template <std::size_t S>
  using extents_at =
      std::conditional_t<extents && held<static_cast<int>(S)>, stage_extents<Layout.stash_slots[S]>, no_work>;

  // A boundary's same-rank slots exist where its stages are held.
  template <std::size_t B>
  using local_forward_t = line_array<slot_t<forward_message<static_cast<int>(B)>>,
                                     held<static_cast<int>(B)> ? detail::ix(Layout.local_forward_slots[B]) : 0>;
  template <std::size_t B>
  using local_backward_t = line_array<slot_t<backward_message<static_cast<int>(B)>>,
                                      held<static_cast<int>(B)> ? detail::ix(Layout.local_backward_slots[B]) : 0>;
  // A crossing's buffers where both its stages are on one rank (that rank's, where held).
  template <std::size_t K>
  static constexpr bool skip_buffers = skip_local<K>&& held<skip_from<K>>;
  template <std::size_t K>
  using local_skip_value_t =
      line_array<slot_t<skip_value_t<K>>, skip_buffers<K> ? detail::ix(Layout.skips[K].value_slots) : 0>;
  template <std::size_t K>
  using local_skip_gradient_t =
      line_array<slot_t<skip_gradient_t<K>>, skip_buffers<K> ? detail::ix(Layout.skips[K].gradient_slots) : 0>;
  template <std::size_t S>
  using storage_at = std::conditional_t<held<static_cast<int>(S)>, storage_t<static_cast<int>(S)>, absent_stage>;
  using local_forwards_t = typename tuple_of<local_forward_t, std::make_index_sequence<boundaries>>::type;
  using local_backwards_t = typename tuple_of<local_backward_t, std::make_index_sequence<boundaries>>::type;
  using storages_t = typename tuple_of<storage_at, std::make_index_sequence<detail::ix(stage_count)>>::type;
  using local_skip_values_t = typename tuple_of<local_skip_value_t, std::make_index_sequence<crossing_count>>::type;
  using local_skip_gradients_t =
      typename tuple_of<local_skip_gradient_t, std::make_index_sequence<crossing_count>>::type;
  using extents_t = typename tuple_of<extents_at, std::make_index_sequence<detail::ix(stage_count)>>::type;

  // The extent of the microbatch of `a` at stage S (0 in a model of fixed shapes), and of what a
  // message of route M carries: SEND_F's or a skip's value (the stage's output), or a gradient.
  template <int S, class Args>
  int extent_at(const Args& a) const noexcept {
    if constexpr (extents)
      return std::get<detail::ix(S)>(extents_).slot[detail::ix(a.stash)];
    else
      return 0;
  }
  template <route M, class Args>
  int sent_extent(const Args& a) const noexcept {
    constexpr int S = M.here;
    if constexpr (!extents)
      return 0;
    else if constexpr (M.backward)
      return std::get<detail::ix(S)>(extents_).backward;
    else if constexpr (graph || Stages.recompute[detail::ix(model_stage<S>)])
      return std::get<detail::ix(S)>(extents_).forward;
    else
      return std::get<detail::ix(S)>(extents_).slot[detail::ix(a.stash)];
  }
  // The extent of the microbatch F of stage S takes in: the step's (stage 0), or its message's.
  template <int S, class Args>
  int incoming_extent(const Args& a) {
    if constexpr (first_of_chain<S>)
      return extent_of(extents_in_, a.microbatch, token_capacity);
    else if constexpr (local_prev<S>)
      return extent_in(std::get<detail::ix(S - 1)>(local_forward_)[detail::ix(a.local_in)]);
    else
      return extent_in(self().template remote_input<S>(a));
  }
  // F of stage S notes its microbatch's extent (before its layers, whose context reads it).
  template <int S, class Args>
  int note_extent(const Args& a) {
    if constexpr (extents) {
      auto& x = std::get<detail::ix(S)>(extents_);
      const int e = incoming_extent<S>(a);
      x.slot[detail::ix(a.stash)] = e;
      x.forward = e;
      return e;
    } else {
      return 0;
    }
  }
  template <int S>
  void note_gradient_extent(int e) {
    if constexpr (extents) std::get<detail::ix(S)>(extents_).backward = e;
  }

  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  // The layers a task of stage S computes with: its chain's (chain_model), unless the engine keeps
  // weight versions of its own (an asynchronous pipeline: its `weights` hides this one).
  template <int S, class Args>
  Model& weights(const Args&) noexcept {
    return self().template chain_model<chain_of<S>>();
  }
  // The layers chain C runs: the model's, unless the engine keeps a copy for a bidirectional
  // table's mirrors (the host executor: its `chain_model` hides this one).
  template <int C>
  Model& chain_model() noexcept {
    return model_;
  }
  // The microbatch a failure names: the task's, or where the engine counts microbatches across steps, that count.
  template <class Args>
  static int reported_microbatch(const Args& a) {
    if constexpr (requires { a.global; })
      return a.global;
    else
      return a.microbatch;
  }

  // The frozen prefix's cache for the steps that follow: per microbatch, the output to use instead
  // of running the prefix (in[i], or null) and where to keep the output it computes (out[i], or null).
  // The step's extents (after set_batch; none: every microbatch uses all its tokens).
  void set_extents(const int* extents) noexcept { extents_in_ = extents; }
  void set_prefix_cache(const prefix_type* const* in, prefix_type* const* out) noexcept {
    prefix_in_ = in;
    prefix_out_ = out;
  }

  // A step starts: its batch, and its number for the layers' context (steps counted from 0; a
  // pipeline's drain, `counts` false, is no step of its own). `fresh`: a pipeline starts (an
  // asynchronous one numbers its microbatches from there).
  void set_batch(const input_type* inputs, const target_type* targets, bool fresh = true, bool counts = true) noexcept {
    extents_in_ = nullptr;
    inputs_ = inputs;
    targets_ = targets;
    if (counts) step_ = next_step_++;
    if (fresh) pipeline_step_ = step_;
  }

 public:
  /// Forward only (before a step starts): where each microbatch's output goes (null: nowhere).
  void set_outputs(output_type* outputs) noexcept { outputs_ = outputs; }
  /// Where the steps that follow stand for the layers' context (ctpipe::context): the next step's
  /// number, counting up by one per step, and the index of this executor's microbatch 0 in the global
  /// batch. Defaults: step 0, microbatch 0.
  void set_context_origin(step_origin o) noexcept {
    next_step_ = o.step;
    first_microbatch_ = o.first_microbatch;
  }
  step_origin context_origin() const noexcept { return {next_step_, first_microbatch_}; }
  // F, B, I or W of stage S on rank R (the op switch's compute: ctpipe/exec/detail/op_switch.hpp).
  template <int R, op_kind Op, int S, class Args>
  void run_compute(const Args& args);

 protected:
  // Whether rank R runs layer k in chain c.
  template <int R>
  static constexpr bool runs_layer(int c, int k) {
    return Layout.stage_rank[detail::ix(c * chain_length + Stages.stage_of_layer(k))] == R;
  }
  // Zeroes the gradients of the layers of rank R's stages (in each chain's layers).
  template <int R>
  void zero_rank_gradients() {
    if constexpr (forward_only) return;  // a forward-only pass leaves the gradients as they are
    zero_chain_gradients<R, 0>(std::make_index_sequence<Model::size>{});
    if constexpr (mirrored) zero_chain_gradients<R, 1>(std::make_index_sequence<Model::size>{});
  }
  template <int R, int C, std::size_t... K>
  void zero_chain_gradients(std::index_sequence<K...>) {
    ((runs_layer<R>(C, static_cast<int>(K)) ? zero_layer_gradients(self().template chain_model<C>().template layer<K>())
                                            : void()),
     ...);
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

  // Stage S's activation message is the output in its stash slot (sent_message below): a stage of
  // a chain that keeps its activations (not recomputed).
  template <int S>
  static constexpr bool sends_from_stash = !graph && !Stages.recompute[detail::ix(model_stage<S>)];

  // What a message of route M carries (ctpipe/exec/detail/op_switch.hpp): SEND_F's stage output
  // for the microbatch of `a`, SEND_B's input gradient, the value a skip's lower stage sends its
  // upper one, or the gradient terms the upper sends the lower (made by its last F, or B or I).
  template <route M, class Args>
  const auto& sent_message(const Args& a) {
    constexpr int S = M.here;
    auto& st = std::get<detail::ix(S)>(storage_);
    if constexpr (M.skip && !M.backward)
      return std::get<detail::ix(M.far - S - 1)>(st.sendbox);
    else if constexpr (M.backward && (graph || M.skip))
      return std::get<detail::ix(M.far)>(st.outbox);
    else if constexpr (M.backward)
      return std::get<0>(st.grads);
    else if constexpr (graph)
      return std::get<0>(st.sendbox);
    else if constexpr (Stages.recompute[detail::ix(model_stage<S>)])
      return std::get<std::tuple_size_v<full_t<S>> - 1>(st.work);
    else
      return std::get<std::tuple_size_v<full_t<S>> - 1>(st.stash[detail::ix(a.stash)]);
  }

 private:
  // The context a layer of stage S gets in a task Op (built only for a layer that takes one).
  // An asynchronous pipeline's task may run a microbatch fed by an earlier step: its context names
  // the step that fed it (a.global counts microbatches from the pipeline's start), so that its F and
  // B see the same step and microbatch.
  template <int S, op_kind Op, std::size_t Layer, class Args>
  auto context_for(const Args& a) const noexcept;

  // Where stage S's layers keep their state for the microbatch of `a`: its stash slot's, or (a
  // recomputing stage) the work copy; Slot: the slot's where there is one.
  template <int S, bool Slot, class Args>
  saved_states<S>& saved_for(const Args& a);

  template <int S, op_kind Op, class Args, std::size_t... K>
  void run_forward_layers(const Args& args, full_t<S>& a, saved_states<S>& s, std::index_sequence<K...>);

  template <int S, class Args>
  void forward(const Args& a);

  // The frozen prefix, forward only, for the microbatch of `a`: its output into x (from the cache
  // where it has it). Its layers' context: stage 0's.
  template <class Args>
  void run_prefix(const Args& a, prefix_type& x);

  // Layers of stage S from the top down: layer first + K gets dy and writes g[K]. A full backward
  // (Input false) calls backward; an I (Input true) calls backward_input where the layer splits its
  // backward, and its whole backward where it does not (then its W does nothing).
  template <int S, bool Input, std::size_t K, class Args, class Dy>
  void run_backward_layers(const Args& args, full_t<S>& a, saved_states<S>& s, full_t<S>& g, const Dy& dy);

  // The stage's activations for the stash slot of `a`: the stash, or recomputed from its input
  // (with the layers' state, into saved_for<S, Slot>: the slot's for a B or an I, the work copy
  // for a W, which reads what its I kept).
  template <int S, op_kind Op, class Args>
  full_t<S>& activations(const Args& a);

  // B (Input false) or I (Input true). An I keeps the gradients it computed, the incoming one
  // included, in the stage's grad stash for its W; the stage's input gradient goes on from grads[0]
  // either way (to SEND_B or the local hand-off).
  template <int S, bool Input, class Args>
  void backward(const Args& a);

  // The loss of the microbatch of `a` (stage S the last, in task Op): its value, its tokens, and the
  // gradient of its output y into dy.
  template <int S, op_kind Op, class Args, class Y>
  void take_loss(const Args& a, const Y& y, Y& dy);

  // Forward only: the end of the microbatch of `a` on its chain's last stage S, whose output is y.
  // Evaluation (targets given): its loss, the loss's gradient going to `scratch`, which nothing
  // reads. Prediction (outputs given): y copied out (with extents, its used tokens).
  template <int S, class Args, class Y>
  void finish_forward(const Args& a, const Y& y, Y& scratch);

  // W: every layer that splits its backward adds its weight gradients, from the activations, the
  // state its F saved (and its I added to), and the output gradients its I kept.
  template <int S, class Args, std::size_t... K>
  void run_weight_layers(const Args& args, full_t<S>& a, const saved_states<S>& s, const full_t<S>& g,
                         std::index_sequence<K...>);
  template <int S, std::size_t... K>
  static constexpr bool any_splits(std::index_sequence<K...>) {
    return (splittable_layer<typename Model::template layer_type<detail::ix(first_layer<S>) + K>> || ...);
  }
  template <int S, class Args>
  void weight_gradients(const Args& a);

  // ---- a graph stage's F, B, I and W (defined in exec/detail/host_graph_tasks.hpp) ------------
  template <std::size_t... K, class F>
  static constexpr void each_index(std::index_sequence<K...>, F&& f) {
    (f(std::integral_constant<std::size_t, K>{}), ...);
  }
  template <std::size_t N, class F>
  static constexpr void each(F&& f) {
    each_index(std::make_index_sequence<N>{}, f);
  }

  // Where a layer's input part (or a message's wire) of stage S is read from: a message the stage
  // took in, the model's input, or an output of the stage's own layers.
  template <int S, part_link L, class Act>
  static auto& source(const typename gtypes::template inbox_t<S>& in, const Act& act);
  // Stage S's layers in order, each one's input gathered from its sources.
  template <int S, op_kind Op, class Args, class Act>
  void graph_forward_layers(const Args& args, const typename gtypes::template inbox_t<S>& in, Act& act,
                            saved_states<S>& s);
  template <int S, class Args>
  void graph_forward(const Args& a);

  // A graph stage's activations for the stash slot of `a`: the stash, or recomputed from what the stage took in.
  template <int S, op_kind Op, class Args>
  auto& graph_activations_for(const Args& a);

  // Adds (or, where it starts the sum, copies) `from` into `to`.
  template <bool Starts, class T>
  static void accumulate(T& to, const T& from);

  // B (Input false) or I (Input true) of a graph stage: the gradients later stages sent (the
  // farthest first) or the loss's, then the layers from the top down, each one's input gradient
  // summed into its sources'. An I keeps the outputs' gradients in the grad stash for its W.
  template <int S, bool Input, class Args>
  void graph_backward(const Args& a);

  // W of a graph stage: every layer that splits its backward adds its weight gradients.
  template <int S, class Args>
  void graph_weight_gradients(const Args& a);

  Model& model_;
  Loss& loss_;
  storages_t storage_;
  local_forwards_t local_forward_;
  local_backwards_t local_backward_;
  [[no_unique_address]] local_skip_values_t local_skip_value_;
  [[no_unique_address]] local_skip_gradients_t local_skip_gradient_;
  [[no_unique_address]] extents_t extents_;
  alignas(cache_line) std::array<double, detail::ix(Layout.microbatches)> losses_{};
  [[no_unique_address]] std::array<int, extents ? detail::ix(Layout.microbatches) : 0> tokens_{};
  const input_type* inputs_ = nullptr;
  const int* extents_in_ = nullptr;  // the step's extents (none: all tokens)
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
  output_type* outputs_ = nullptr;  // forward only: where predict() wants the outputs
  // The layers' context: this step's number, the next one's, and where this executor's microbatches
  // start in the global batch.
  std::uint64_t step_ = 0, next_step_ = 0, pipeline_step_ = 0;
  int first_microbatch_ = 0;
  // What saved_for gives a stage that keeps no state (its layers take none).
  template <int S>
  static inline saved_states<S> no_saved_{};
};

}  // namespace ctpipe::detail

#include <ctpipe/exec/detail/host_chain_tasks.hpp>  // a chain stage's F, B, I and W
#include <ctpipe/exec/detail/host_graph_tasks.hpp>  // a graph stage's F, B, I and W
