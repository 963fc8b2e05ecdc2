// The MPI executor's engine: one rank's program in this process, its tensors crossing rank
// boundaries as MPI messages (rings whose receives are posted ahead, as soon as a slot is free, so
// that a message finds its receive waiting; sends that never wait for MPI to buffer), and with data
// parallelism the sums of each stage's gradients over its replicas, overlapped with the rest of the
// step.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/detail/lazy_text.hpp>
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/host_compute.hpp>
#include <ctpipe/exec/detail/op_switch.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>
#include <ctpipe/model/partition.hpp>
#include <ctpipe/model/shared_parameters.hpp>
#include <ctpipe/mpi/detail/message_text.hpp>
#include <ctpipe/mpi/detail/ring.hpp>
#include <ctpipe/mpi/detail/session.hpp>
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi::detail {

// One step of rank R's program in this process: the hand-off over MPI. Buffers of rank R's stages
// only (compute's Only = R).
template <model_type Model, auto Stages, class Loss, auto Layout, int R>
class engine : public ctpipe::detail::compute<engine<Model, Stages, Loss, Layout, R>, Model, Stages, Loss, Layout, R> {
  using base = ctpipe::detail::compute<engine, Model, Stages, Loss, Layout, R>;
  using route = ctpipe::detail::route;
  friend base;

 public:
  using base::stage_count;
  using typename base::input_type;
  using typename base::target_type;
  static constexpr int microbatches = Layout.microbatches;

  engine(Model& model, Loss& loss, session& s) : base(model, loss), s_(s) {
    this->set_context_origin({0, s.where().replica * microbatches});  // the layers' context: global microbatches
    const std::size_t global = static_cast<std::size_t>(s.where().replicas * microbatches);
    sums_.assign((base::extents ? 2 * global : global) + static_cast<std::size_t>(s.where().processes), 0.0);
    tokens_.assign(base::extents ? global : 0, 0);
    reductions_.fill(MPI_REQUEST_NULL);
    if constexpr (base::forward_only) return;  // evaluation: no gradient to sum, no group to make
    if (s.ordered_sums() && s.where().replica == 0 && s.where().replicas > 1)  // the replicas' gradients, gathered
      for_each_reduced([&]<std::size_t L, std::size_t K>() {
        const auto g = this->model().template layer<L>().gradients();
        gathered_[K].resize(g.size_bytes() * static_cast<std::size_t>(s.where().replicas));
      });
    if constexpr (groups > 0) set_up_groups();
    if constexpr (base::mirrored)  // the process that runs the other copies of this rank's two stages
      s.add_groups(ctpipe::detail::mirror_colours(Layout.chain_length, s.where().rank, s.where().replica));
  }

  // A step: runs the program (run(), which calls run_task and reduce for each task), then agrees
  // with every other process on how the step ended.
  template <class Run>
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets,
                               const int* extents, Run&& run) {
    s_.begin_step(base::forward_only ? 1 : 0);
    this->set_batch(inputs.data(), targets.data());
    this->set_extents(extents);
    sent_ = 0;
    int status = 0;
    try {
      post_ahead();
      this->template zero_rank_gradients<R>();
      run();
    } catch (const ctpipe::detail::aborted&) {
      status = s_.own_failed() ? 1 : 2;
    }
    std::fill(sums_.begin(), sums_.end(), 0.0);
    const std::size_t global = static_cast<std::size_t>(s_.where().replicas * microbatches);
    if constexpr (holds_a_last_stage) {  // (zeros for the microbatches another process's last stage has)
      std::copy_n(this->losses().data(), microbatches, sums_.begin() + s_.where().replica * microbatches);
      if constexpr (base::extents)  // the tokens follow the losses
        std::copy_n(this->tokens().data(), microbatches,
                    sums_.begin() + static_cast<std::ptrdiff_t>(global) + s_.where().replica * microbatches);
    }
    if (s_.agree(sums_, status)) [[likely]] {
      if constexpr (!base::forward_only) finish_sums();
      wait_sends(std::make_index_sequence<base::boundaries>{});
      if constexpr (base::extents)
        for (std::size_t i = 0; i < global; ++i) tokens_[i] = static_cast<int>(sums_[global + i]);
      s_.record().end_step(true);
      return {sums_.data(), global};
    }
    drop_requests(std::make_index_sequence<base::boundaries>{});
    s_.record().end_step(false);
    s_.recover_and_throw();
  }

  /// The global batch's tokens of the last step (a model with extents), as its losses.
  std::span<const int> global_tokens() const noexcept { return {tokens_.data(), tokens_.size()}; }
  /// The tensor bytes this process's messages carried in the last step (with extents, the tokens
  /// each microbatch used; each message adds a header of ctpipe::detail::packed_header bytes).
  std::size_t sent_bytes() const noexcept { return sent_; }

  // Task `Op` of stage S (Other: a skip message's far stage), task `index` of the rank's program;
  // `a` holds its microbatch, slots and message number.
  template <op_kind Op, int S, int Other = -1, class Args>
  void run_task(const Args& args, std::size_t index) {
    s_.record().enter(static_cast<int>(index));
    if constexpr (Op == op_kind::forward && S + 1 < stage_count)
      if constexpr (in_place_here<ctpipe::detail::ix(S)>) {
        MPI_Request& q = std::get<ctpipe::detail::ix(S)>(out_forward_).request[ctpipe::detail::ix(args.stash)];
        if (q != MPI_REQUEST_NULL)  // the slot's last activation, sent in place
          s_.wait<true>(
              q, peer_text{"sending ", what_of<ctpipe::detail::route_of(op_kind::send_forward, S, 0)>(args.microbatch),
                           base::template rank_of<S + 1>});
      }
    if constexpr ((Op == op_kind::backward || Op == op_kind::backward_input) && S > 0)
      if constexpr (gradients_in_place_here<ctpipe::detail::ix(S - 1)>) {
        MPI_Request& q = std::get<ctpipe::detail::ix(S - 1)>(out_backward_).request[0];
        if (q != MPI_REQUEST_NULL)  // the stage's last gradient, sent in place
          s_.wait<true>(
              q, peer_text{"sending ", what_of<ctpipe::detail::route_of(op_kind::send_backward, S, 0)>(args.microbatch),
                           base::template rank_of<S - 1>});
      }
    ctpipe::detail::run_op<R, Op, S, Other>(*this, args);
  }
  // The op switch's primitives (exec/detail/op_switch.hpp): a compute op is the shared compute's
  // run_compute; a message goes through route M's ring, with its own MPI tag.
  template <int, route M, class Args>
  void receive(const Args& a) {
    receive_on<op_of(M), M.here, M>(a, what_of<M>(a.microbatch));
  }
  template <int, route M, class Args>
  void send(const Args& a) {
    constexpr bool in_place = !M.skip && (M.backward ? gradients_in_place<ctpipe::detail::ix(M.lower)>
                                                     : sends_in_place<ctpipe::detail::ix(M.lower)>);
    send_on<capacity_of<M>, tag_of<M>, base::template rank_of<M.far>, in_place>(
        ring_of<M, false>(), a, this->template sent_message<M>(a), this->template sent_extent<M>(a),
        what_of<M>(a.microbatch));
  }

  // Stage S's last weight-gradient op of the step has run: with replicas, start summing the
  // gradients of its layers across them (but for members of shared groups: after the group's sum).
  template <int S>
  void reduce() {
    if constexpr (base::mirrored) {  // first the two copies' sum, then (finish_sums) the replicas'
      mirror_sums<S>();
      return;
    }
    if (s_.where().replicas == 1) return;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((ctpipe::detail::group_of<Model>(base::template first_layer<S> + static_cast<int>(K)) < 0
            ? reduce_layer<ctpipe::detail::ix(base::template first_layer<S>) + K>()
            : void()),
       ...);
    }
    (std::make_index_sequence<ctpipe::detail::ix(base::template end_layer<S> - base::template first_layer<S>)>{});
  }

  // Rank R's members of shared group G are final for the step: where they all are on this rank,
  // sums them here (and starts their sums across replicas); else starts the gather of every
  // holding rank's members (finish_sums adds them, in layer order).
  template <std::size_t G>
  void arrive() {
    if constexpr (holders[G] == 1) {
      ctpipe::detail::sum_group<Model, G>(this->model());
      reduce_members<G>();
    } else {
      using T = ctpipe::detail::group_element_t<Model, G>;
      const auto g = ctpipe::detail::group_spans<true, Model, G>(this->model());
      shared_group& sg = shared_[G];
      T* all = reinterpret_cast<T*>(sg.gathered.data());
      for (std::size_t m = 0; m < g.size(); ++m)
        if (on_rank(group_members<G>[m])) std::copy(g[m].begin(), g[m].end(), all + sg.offset[m]);
      check(MPI_Iallgatherv(MPI_IN_PLACE, 0, datatype_of<T>(), all, sg.counts.data(), sg.displs.data(),
                            datatype_of<T>(), s_.group(G), &sg.request),
            "MPI_Iallgatherv");
    }
  }

 private:
  template <int B>
  static constexpr int capacity = Layout.channel_capacity[ctpipe::detail::ix(B)];
  // Boundary B crosses from rank From to rank To (B's lower stage on From, upper on To).
  template <std::size_t B, bool Lower>
  static constexpr bool crosses_here() {
    constexpr int lo = Layout.stage_rank[B], hi = Layout.stage_rank[B + 1];
    return lo != hi && (Lower ? lo : hi) == R;
  }
  // What boundary B carries each way: a chain's boundary tensor, or a graph's messages.
  template <std::size_t B>
  using forward_t = typename base::template forward_message<static_cast<int>(B)>;
  template <std::size_t B>
  using backward_t = typename base::template backward_message<static_cast<int>(B)>;
  static constexpr bool packed = base::extents;
  template <std::size_t B, bool Lower, class T, bool Receives>
  using ring_at = ring<T, crosses_here<B, Lower>() ? capacity<static_cast<int>(B)> : 0, packed, Receives>;
  template <std::size_t B>
  using in_forward_t = ring_at<B, false, forward_t<B>, true>;  // rank R holds B's upper stage: activations come in
  template <std::size_t B>
  using in_backward_t = ring_at<B, true, backward_t<B>, true>;  // rank R holds B's lower stage: gradients come in
  // Boundary B's activations leave from stage B's stash slots, in place (no copy): where they
  // travel whole (no extents), the stage keeps them (sends_from_stash) and the table trains. The
  // slot then lives until the microbatch's B or W, which needs the gradient the receiver returns
  // only after its F has read the activation: the send is complete long before an F takes the
  // slot again (that F waits for it, as MPI asks, which then costs one MPI_Test).
  template <std::size_t B>
  static constexpr bool sends_in_place =
      !packed && !base::forward_only && base::template sends_from_stash<static_cast<int>(B)>;
  // ... and rank R sends them (it holds stage B, and B + 1 is another rank's).
  template <std::size_t B>
  static constexpr bool in_place_here = crosses_here<B, true>() && (capacity<static_cast<int>(B)> != 0) &&
                                        (sends_in_place<B>);
  template <std::size_t B>
  using out_forward_t =
      std::conditional_t<sends_in_place<B>,
                         ring<forward_t<B>, in_place_here<B> ? Layout.stash_slots[B] : 0, false, false, true>,
                         ring_at<B, true, forward_t<B>, false>>;
  // Boundary B's gradients leave from stage B + 1's gradient buffer, in place: where they travel
  // whole (no extents), a chain's (its input gradient, which the stage's next B or I writes again),
  // in a training table. That B or I first waits for the send (as MPI asks). It never waits on
  // anything this rank does later: the receiver posts its receive as soon as its slot is free, and
  // the ring's capacity (the analysis' bound on messages in flight) makes that slot's message
  // consumed before this one is sent, in every order the table allows.
  template <std::size_t B>
  static constexpr bool gradients_in_place = !packed && !base::forward_only && !base::graph;
  template <std::size_t B>
  static constexpr bool gradients_in_place_here = crosses_here<B, false>() && (capacity<static_cast<int>(B)> != 0) &&
                                                  (gradients_in_place<B>);
  template <std::size_t B>
  using out_backward_t = std::conditional_t<gradients_in_place<B>,
                                            ring<backward_t<B>, gradients_in_place_here<B> ? 1 : 0, false, false, true>,
                                            ring_at<B, false, backward_t<B>, false>>;
  template <template <std::size_t> class E>
  using rings = typename base::template tuple_of<E, std::make_index_sequence<base::boundaries>>::type;
  // A crossing's rings where it joins this rank to another: its values come in at its later stage's
  // rank and go out at its earlier one's; its gradients the other way.
  template <std::size_t K>
  static constexpr int skip_capacity = Layout.skips[K].remote ? Layout.skips[K].capacity : 0;
  template <std::size_t K, bool AtFrom>
  static constexpr bool skip_here =
      Layout.skips[K].remote&& base::template rank_of<AtFrom ? Layout.skips[K].from : Layout.skips[K].to> == R;
  template <std::size_t K>
  using in_skip_forward_t =
      ring<typename base::template skip_value_t<K>, skip_here<K, false> ? skip_capacity<K> : 0, packed, true>;
  template <std::size_t K>
  using out_skip_forward_t =
      ring<typename base::template skip_value_t<K>, skip_here<K, true> ? skip_capacity<K> : 0, packed, false>;
  template <std::size_t K>
  using in_skip_backward_t =
      ring<typename base::template skip_gradient_t<K>, skip_here<K, true> ? skip_capacity<K> : 0, packed, true>;
  template <std::size_t K>
  using out_skip_backward_t =
      ring<typename base::template skip_gradient_t<K>, skip_here<K, false> ? skip_capacity<K> : 0, packed, false>;
  template <template <std::size_t> class E>
  using skip_rings = typename base::template tuple_of<E, std::make_index_sequence<base::crossing_count>>::type;
  // Route M's crossing (its boundary, or its skip crossing's index), ring, capacity, MPI tag (two
  // per boundary, activations and gradients, then two per crossing) and name in messages.
  template <route M>
  static constexpr std::size_t crossing_of = M.skip ? base::skip_index(M.lower, M.upper) : ctpipe::detail::ix(M.lower);
  template <route M, bool In>
  auto& ring_of() noexcept {
    constexpr std::size_t at = 2 * M.skip + M.backward;
    if constexpr (In)
      return std::get<crossing_of<M>>(
          std::get<at>(std::tie(in_forward_, in_backward_, in_skip_forward_, in_skip_backward_)));
    else
      return std::get<crossing_of<M>>(
          std::get<at>(std::tie(out_forward_, out_backward_, out_skip_forward_, out_skip_backward_)));
  }
  template <route M>
  static constexpr int capacity_of = [] {
    if constexpr (M.skip)
      return skip_capacity<crossing_of<M>>;
    else
      return capacity<M.lower>;
  }();
  template <route M>
  static constexpr int tag_of = 2 * (M.skip ? stage_count + static_cast<int>(crossing_of<M>) : M.lower) + M.backward;
  template <route M>
  static route_text what_of(int mb) {
    return {M.backward, M.skip, M.lower, M.skip ? M.upper : M.lower + 1, mb};
  }
  static_assert(2 * (stage_count + static_cast<int>(base::crossing_count)) <= 32767,
                "ctpipe::mpi: too many crossings for MPI's guaranteed 32,767 tags (two per boundary and per crossing)");

  // ---- the hand-off (called by the shared compute ops) ---------------------------------------
  template <int S, class Args>
  const auto& remote_input(const Args& a) {
    return std::get<ctpipe::detail::ix(S - 1)>(in_forward_).slot[ctpipe::detail::ix(a.message % capacity<S - 1>)];
  }
  template <int S, class Args>
  void input_consumed(const Args& a) {
    freed<ctpipe::detail::route_of(op_kind::recv_forward, S, 0)>(a.message);
  }
  template <int S, class Args>
  const auto& remote_gradient(const Args& a) {
    return std::get<ctpipe::detail::ix(S)>(in_backward_).slot[ctpipe::detail::ix(a.message % capacity<S>)];
  }
  template <int S, class Args>
  void gradient_consumed(const Args& a) {
    freed<ctpipe::detail::route_of(op_kind::recv_backward, S, 0)>(a.message);
  }
  template <std::size_t K>
  const auto& remote_skip_value(int message) {
    return std::get<K>(in_skip_forward_).slot[ctpipe::detail::ix(message % skip_capacity<K>)];
  }
  template <std::size_t K>
  void skip_value_consumed(int message) {
    freed<ctpipe::detail::route_of(op_kind::recv_skip_forward, Layout.skips[K].to, Layout.skips[K].from)>(message);
  }
  template <std::size_t K>
  const auto& remote_skip_gradient(int message) {
    return std::get<K>(in_skip_backward_).slot[ctpipe::detail::ix(message % skip_capacity<K>)];
  }
  template <std::size_t K>
  void skip_gradient_consumed(int message) {
    freed<ctpipe::detail::route_of(op_kind::recv_skip_backward, Layout.skips[K].from, Layout.skips[K].to)>(message);
  }
  void fail(int rank, task t, std::exception_ptr e) noexcept { s_.fail_here(rank, t, std::move(e)); }

  // ---- receives posted ahead ----------------------------------------------------------------
  // Route M's messages a step (what its receiving ring posts), and its ring's receive of message j
  // (into its slot, or with extents its wire buffer), posted.
  template <route M>
  static constexpr int messages_of = [] {
    if constexpr (M.skip)
      return M.backward ? Layout.skips[crossing_of<M>].gradients : Layout.skips[crossing_of<M>].values;
    else
      return M.backward ? Layout.backward_messages[ctpipe::detail::ix(M.lower)]
                        : Layout.forward_messages[ctpipe::detail::ix(M.lower)];
  }();
  // Posts route M's receives up to message `last` (but none past the step's), in order: message j
  // goes into slot j % capacity, free once message j - capacity is consumed (or, with extents,
  // unpacked).
  template <route M>
  void post_through(int last);
  // Route M's message j is consumed: its slot takes the receive of message j + capacity.
  template <route M>
  void freed(int j) {
    if constexpr (!packed) post_through<M>(j + capacity_of<M>);
  }
  // The step begins: every receiving ring posts its first `capacity` receives (restart: one ring).
  void post_ahead();
  template <route M>
  void restart() {
    ring_of<M, true>().posted = 0;
    post_through<M>(capacity_of<M> - 1);
  }

  // Route M's message a.message (task Op of stage S receives it); `what` names it in a timeout's
  // message. Its receive is posted already (or now: a step gone hollow consumes nothing); with
  // extents the message comes packed, and is unpacked into its slot here (a message that is not one
  // fails the task), which frees its wire buffer for the receive of message + capacity.
  template <op_kind Op, int S, route M, class Args>
  void receive_on(const Args& a, ctpipe::detail::lazy_text what);
  template <int Capacity, int Tag, int To, bool InPlace, class Ring, class Args>
  void send_on(Ring& r, const Args& a, const typename Ring::value_type& value, int extent,
               ctpipe::detail::lazy_text what);
  template <std::size_t... B>
  void wait_sends(std::index_sequence<B...>);
  // After a failed step: receives are cancelled, sends left to complete on their own (or never: the
  // step's communicators are replaced), reductions left behind with them.
  template <std::size_t... B>
  void drop_requests(std::index_sequence<B...>);

  // The layers of rank R's stages that have parameters, numbered: layer L's reduction request.
  template <std::size_t L>
  static constexpr bool reduced = has_parameters<typename Model::template layer_type<L>> &&
                                  (base::template runs_layer<R>(0, static_cast<int>(L)) ||
                                   (base::mirrored && base::template runs_layer<R>(1, static_cast<int>(L))));
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
      s_.start_replica_sum(g.data(), static_cast<int>(g.size()), datatype_of<std::remove_cvref_t<decltype(g[0])>>(),
                           gathered_[k].data(), reductions_[k]);
    }
  }

  // Does rank R hold the last stage of a chain (where losses are taken)?
  static constexpr bool holds_a_last_stage = [] {
    for (int s = Layout.chain_length - 1; s < stage_count; s += Layout.chain_length)
      if (Layout.stage_rank[ctpipe::detail::ix(s)] == R) return true;
    return false;
  }();

  // A bidirectional table: stage S (a copy of model stage S % chain_length) has run its last B or W
  // of the step. Each of the process's two model stages is summed with the pair process's copy (an
  // all-reduce of two: a + b, the same bits on both, the first chain's term first or not, as
  // addition of two numbers is commutative), the lower model stage first on both processes (the
  // order of their collectives), each as soon as it and those before it are final here.
  template <int S>
  void mirror_sums() {
    mirrors_ready_ |= 1u << (S % Layout.chain_length);
    constexpr auto order = ctpipe::detail::mirrored_stages(Layout.chain_length, R);
    ctpipe::detail::start_in_order<order>(mirrors_ready_, mirrors_started_, [&]<int j>() { start_mirror_sums<j>(); });
  }
  template <int j>
  void start_mirror_sums() {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (
          [&] {
            constexpr std::size_t L = ctpipe::detail::ix(base::template first_layer<j>) + K;
            if constexpr (has_parameters<typename Model::template layer_type<L>>) {
              auto g = this->model().template layer<L>().gradients();
              using element = std::remove_cvref_t<decltype(g[0])>;
              check(MPI_Iallreduce(MPI_IN_PLACE, g.data(), static_cast<int>(g.size()), datatype_of<element>(), MPI_SUM,
                                   s_.group(0), &mirror_requests_[L]),
                    "MPI_Iallreduce");
            }
          }(),
          ...);
    }
    (std::make_index_sequence<ctpipe::detail::ix(base::template end_layer<j> - base::template first_layer<j>)>{});
  }
  // At the step's end: waits for the copies' sums, then starts the replicas' sums of those layers.
  void finish_mirrors() {
    mirrors_ready_ = mirrors_started_ = 0;
    for (MPI_Request& r : mirror_requests_)
      s_.wait<false>(r, [] { return std::string("adding the gradients of a stage's two copies (dualpipe)"); });
    if (s_.where().replicas == 1) return;
    for_each_reduced([&]<std::size_t L, std::size_t K>() { reduce_layer<L>(); });
  }
  std::array<MPI_Request, Model::size> mirror_requests_ = [] {
    std::array<MPI_Request, Model::size> r{};
    r.fill(MPI_REQUEST_NULL);
    return r;
  }();
  std::uint32_t mirrors_ready_ = 0, mirrors_started_ = 0;  // model stages final here / summing

  // Where rank R holds layer k.
  static constexpr bool on_rank(int k) { return Layout.stage_rank[ctpipe::detail::ix(Stages.stage_of_layer(k))] == R; }
  template <std::size_t G>
  static constexpr auto group_members = ctpipe::detail::group_members<Model, G>;
  static constexpr std::size_t groups = shared_group_count<Model>;
  static constexpr auto holders =
      ctpipe::detail::group_holders<Model, Stages>(Layout.stage_rank, static_cast<int>(Layout.ranks));

  // A shared group's sum across ranks: every holding rank's members' gradients gathered (in
  // pipeline rank order; each rank's in layer order), then added in layer order on each.
  struct shared_group {
    std::vector<std::byte> gathered;
    std::vector<int> counts, displs;  // per holding rank, in elements
    std::vector<std::size_t> offset;  // per member (layer order): where its gradient is gathered
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::array<shared_group, groups> shared_{};

  // At construction (collective): each group's communicator, its gather's layout, and the copies
  // started equal from the group's first layer (a broadcast from the rank that holds it).
  void set_up_groups() {
    s_.add_groups(ctpipe::detail::group_colours<Model, Stages>(Layout.stage_rank, static_cast<int>(Layout.ranks), R,
                                                               s_.where().replica, MPI_UNDEFINED));
    // (the executor has checked the groups' lengths)
    ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
      if constexpr (holders[G] > 1) {
        if (!ctpipe::detail::holds_member<Model, G, Stages>(Layout.stage_rank, R)) return;
        using T = ctpipe::detail::group_element_t<Model, G>;
        const auto p = ctpipe::detail::group_spans<false, Model, G>(this->model());
        const std::size_t n = p[0].size();
        shared_group& sg = shared_[G];
        sg.offset.assign(group_members<G>.size(), 0);
        std::size_t at = 0;
        int root = -1;  // the communicator's rank of the group's first layer's
        for (int r = 0, q = 0; r < static_cast<int>(Layout.ranks); ++r) {
          if (!ctpipe::detail::holds_member<Model, G, Stages>(Layout.stage_rank, r)) continue;
          sg.displs.push_back(static_cast<int>(at));
          for (std::size_t m = 0; m < group_members<G>.size(); ++m)
            if (ctpipe::detail::rank_of_layer<Stages>(Layout.stage_rank, group_members<G>[m]) == r) {
              sg.offset[m] = at;
              at += n;
            }
          sg.counts.push_back(static_cast<int>(at) - sg.displs.back());
          if (ctpipe::detail::rank_of_layer<Stages>(Layout.stage_rank, group_members<G>[0]) == r) root = q;
          ++q;
        }
        sg.gathered.assign(at * sizeof(T), std::byte{});
        check(MPI_Bcast(p[0].data(), static_cast<int>(n), datatype_of<T>(), root, s_.group(G)), "MPI_Bcast");
      }
    });
    tie_parameters(this->model());
  }

  // Starts the sums across replicas of group G's members on this rank (where there are replicas).
  template <std::size_t G>
  void reduce_members() {
    if (s_.where().replicas == 1) return;
    [&]<std::size_t... M>(std::index_sequence<M...>) {
      ((on_rank(group_members<G>[M]) ? reduce_layer<ctpipe::detail::ix(group_members<G>[M])>() : void()), ...);
    }
    (std::make_index_sequence<group_members<G>.size()>{});
  }

  // At the step's end, before the replicas' sums: adds each gathered group in layer order into
  // this rank's members, and starts their sums across replicas.
  void finish_groups() {
    ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
      if constexpr (holders[G] > 1) {
        shared_group& sg = shared_[G];
        if (sg.counts.empty()) return;  // no member here
        s_.wait<false>(sg.request, [] {
          return "summing the gradients of the layers that share parameters " + members_text(group_members<G>);
        });
        using T = ctpipe::detail::group_element_t<Model, G>;
        const auto g = ctpipe::detail::group_spans<true, Model, G>(this->model());
        const T* all = reinterpret_cast<const T*>(sg.gathered.data());
        std::array<const T*, group_members<G>.size()> parts{};
        for (std::size_t m = 0; m < parts.size(); ++m) parts[m] = all + sg.offset[m];
        for (std::size_t m = 0; m < g.size(); ++m)
          if (on_rank(group_members<G>[m])) ctpipe::detail::sum_in_order(g[m], std::span<const T* const>(parts));
        reduce_members<G>();
      }
    });
  }
  template <std::size_t N>
  static std::string members_text(const std::array<int, N>& m) {
    std::string t = "(layers";
    for (std::size_t i = 0; i < N; ++i) t += (i == 0 ? " " : ", ") + std::to_string(m[i]);
    return t + ")";
  }

  // At the step's end: waits for the sums. Ordered: replica 0 adds each layer's gathered gradients
  // in replica order, ((g0 + g1) + g2) + ..., and broadcasts the result.
  void finish_sums() {
    if constexpr (groups > 0) finish_groups();
    if constexpr (base::mirrored) finish_mirrors();
    const auto what = [] { return std::string("summing gradients across replicas"); };
    if (s_.ordered_sums() && s_.where().replicas > 1)
      for_each_reduced([&]<std::size_t L, std::size_t K>() {
        s_.wait<false>(reductions_[K], what);
        auto g = this->model().template layer<L>().gradients();
        using element = std::remove_cvref_t<decltype(g[0])>;
        if (s_.where().replica == 0) {
          const auto* all = reinterpret_cast<const element*>(gathered_[K].data());
          std::vector<const element*> parts(static_cast<std::size_t>(s_.where().replicas));
          for (std::size_t r = 0; r < parts.size(); ++r) parts[r] = all + r * g.size();
          ctpipe::detail::sum_in_order(std::span<element>(g), std::span<const element* const>(parts));
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
  skip_rings<in_skip_forward_t> in_skip_forward_;
  skip_rings<in_skip_backward_t> in_skip_backward_;
  skip_rings<out_skip_forward_t> out_skip_forward_;
  skip_rings<out_skip_backward_t> out_skip_backward_;
  std::array<MPI_Request, reduced_layers> reductions_{};
  std::array<std::vector<std::byte>, reduced_layers> gathered_{};  // ordered sums, on replica 0
  std::vector<double> sums_;  // the global batch's losses (with extents, then its tokens), then a status per process
  std::vector<int> tokens_;   // the global batch's tokens (a model with extents)
  std::size_t sent_ = 0;
};

}  // namespace ctpipe::mpi::detail

#include <ctpipe/mpi/detail/engine_messages.hpp>  // (the definitions of its message functions)
