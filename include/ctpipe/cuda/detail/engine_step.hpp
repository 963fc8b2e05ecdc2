// The CUDA engine's step (cuda/detail/engine.hpp declares it): set-up and tear-down of its
// streams, events and buffers, a step enqueued (eagerly, or captured into a CUDA graph and
// replayed), its losses waited for, and the errors that end it, named by rank, stage and microbatch.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <ctpipe/cuda/detail/engine.hpp>

namespace ctpipe::cuda::detail {

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <class IssueTasks>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::enqueue_forward(
    const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
    std::span<const output_type> outputs, launch how, IssueTasks&& issue_tasks, std::span<const int> extents) {
  static_assert(forward_only, "ctpipe: a forward pass runs a forward-only table");
  predicting_ = targets.empty();
  ctpipe::detail::check_microbatches(who, inputs.size(), predicting_ ? outputs.size() : targets.size(), microbatches,
                                     predicting_ ? "outputs" : "targets");
  ctpipe::detail::check_extents(who, extents, ctpipe::detail::ix(microbatches), token_capacity);
  targets_.fill(target_type{});
  outputs_.fill(output_type{});
  written_.fill(false);
  std::copy(outputs.begin(), outputs.end(), outputs_.begin());
  start(inputs, targets, how, issue_tasks, extents);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <class IssueTasks>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::start(std::span<const input_type> inputs,
                                                                           std::span<const target_type> targets,
                                                                           launch how, IssueTasks& issue_tasks,
                                                                           std::span<const int> extents) {
  if (update_) update_->check_ready();  // (before anything changes)
  for (std::size_t i = 0; i < extents_.size(); ++i)
    extents_[i] =
        ctpipe::detail::extent_of(extents.empty() ? nullptr : extents.data(), static_cast<int>(i), token_capacity);
  std::copy(inputs.begin(), inputs.end(), inputs_.begin());
  std::copy(targets.begin(), targets.end(), targets_.begin());
  if constexpr (only >= 0) {
    transport_->check_usable();  // before anything is issued
    failed_ = hollow_ = false;
    failure_ = {};
  }
  graph_step_ = how == launch::graph;
  in_flight_ = true;
  try {
    write_step_number();
    if constexpr (only >= 0 && token_capacity > 0) transport_->stage_extents(tokens(), origin_);
    if (how == launch::eager) {
      issue_step(issue_tasks);
      return;
    }
    if (!graph_ready_ || std::memcmp(&inputs_, &graph_inputs_, sizeof inputs_) != 0 ||
        std::memcmp(&targets_, &graph_targets_, sizeof targets_) != 0 ||
        (forward_only &&
         (std::memcmp(&outputs_, &graph_outputs_, sizeof outputs_) != 0 || predicting_ != graph_predicting_))) {
      invalidate_graph();
      check(Backend::begin_capture(origin_), "cudaStreamBeginCapture", "capturing the step into a graph");
      capturing_ = true;
      issue_step(issue_tasks);  // on failure it ends the capture itself
      if constexpr (only >= 0)
        if (failed_) {  // process mode: drop the capture, and run the step hollow, eagerly (see fail_task)
          abandon_capture();
          issue_step(issue_tasks);
          return;
        }
      capturing_ = false;
      check(
          Backend::end_capture(origin_, &graph_), "cudaStreamEndCapture / cudaGraphInstantiate",
          "capturing the step into a graph: a layer may have synchronised, or used a stream other than its context's");
      graph_ready_ = true;
      graph_inputs_ = inputs_;
      graph_targets_ = targets_;
      graph_outputs_ = outputs_;
      graph_predicting_ = predicting_;
      ++captures_;
    }
    check(Backend::graph_launch(graph_, origin_), "cudaGraphLaunch", "launching the step's graph");
  } catch (...) {  // a step that throws while being issued is over once what it issued has run
    synchronize_all();
    in_flight_ = false;
    if (update_) update_->finished(false);
    throw;
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::wait() -> std::span<const double> {
  in_flight_ = false;
  step_copy_pending_ = false;  // (the step's number was read before the step ran)
  if constexpr (only >= 0) {
    try {
      transport_->wait(origin_);                                           // within its deadline
      transport_->check_step(failure_.failed ? failure_.error : nullptr);  // this process's failure, or a peer's
      transport_->check_updates(update_ != nullptr);                       // every process's optimizer, or none
    } catch (...) {
      if (update_) update_->finished(false);
      throw;
    }
    if (update_) update_->finished(true);
    report_faults();
  } else {
    try {
      check(Backend::synchronize(origin_), "cudaStreamSynchronize",
            "waiting for the step; an asynchronous error of any task surfaces here: sync_after_each_task(true) names "
            "the task");
    } catch (...) {
      if (update_) update_->finished(false);
      throw;
    }
    if (update_) update_->finished(true);
    report_faults();
  }
  return {losses_host_, losses_count_};
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::report_faults() {
  if constexpr (requires { loss_.report(); }) loss_.report();
  const auto each = [](Model& m) {
    ctpipe::for_each_layer(m, [](auto& l) {
      if constexpr (requires { l.report(); }) l.report();
    });
  };
  each(model_);
  if constexpr (mirrored)
    if (mirror_) each(*mirror_);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::second_stream(int r) const -> stream_type {
  if constexpr (layout_.pairs)
    return aux_.at(ctpipe::detail::ix(r));
  else
    return streams_.at(ctpipe::detail::ix(r));
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::layers() noexcept -> Model& {
  if constexpr (mirrored && only < 0 && chains_.chain_of_stage(S) == 1)
    return *mirror_;
  else
    return model_;
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline int engine<Model, Stages, Loss, Backend, Layout, Transport>::on(int d) const {
  if constexpr (only < 0)
    return d;
  else
    return transport_->device();
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class A>
CTPIPE_NOINLINE void engine<Model, Stages, Loss, Backend, Layout, Transport>::fail_task(const A& a) {
  record_failure(R, task{Op, S, a.microbatch, -1});
  if constexpr (is_compute(Op)) hollow_task<R, Op, S>(a);  // what the task may not have done
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
CTPIPE_NOINLINE void engine<Model, Stages, Loss, Backend, Layout, Transport>::record_failure(int rank, task t) {
  if (!failed_) {
    failed_ = true;
    failure_.failed = true;
    failure_.rank = rank;
    failure_.t = t;
    transport_->failed(rank, t, std::current_exception());  // the layer's own exception
    try {
      rethrow_as_task_failure(rank, t);
    } catch (...) {
      failure_.error = std::current_exception();
    }
  }
  hollow_ = true;
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::hollow_task(const A& a) {
  const auto s = streams_[ctpipe::detail::ix(R)];
  if constexpr (graph) {
    parts::graph::template hollow<R, Op, S>(*this, a, s);
  } else if constexpr (Op == op_kind::forward && !chains_.first(S)) {
    if constexpr (layout_.forward[ctpipe::detail::ix(S - 1)] == handoff::ring_copy) consumed<S - 1, 0>(a.message, s);
  } else if constexpr (Op == op_kind::backward || Op == op_kind::backward_input) {
    if constexpr (!chains_.first(S))
      if constexpr (layout_.backward[ctpipe::detail::ix(S - 1)] == handoff::ring_copy)
        transport_->template before_overwrite<S - 1, 1>(a.out_message, s);
    if constexpr (!chains_.last(S))
      if constexpr (layout_.backward[ctpipe::detail::ix(S)] == handoff::ring_copy) consumed<S, 1>(a.message, s);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::abandon_capture() noexcept {
  typename Backend::graph_type g{};
  if (Backend::ok(Backend::end_capture(origin_, &g))) (void)Backend::graph_destroy(g);
  capturing_ = false;
  graph_ready_ = false;
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::acquire() {
  int visible = 0;
  check(Backend::device_count(&visible), "cudaGetDeviceCount", "construction");
  if constexpr (only >= 0)
    if (on(0) < 0 || on(0) >= visible)
      throw std::invalid_argument("ctpipe::cuda::executor: rank " + std::to_string(only) +
                                  "'s process runs on device " + std::to_string(on(0)) + ", but " +
                                  std::to_string(visible) + " device(s) are visible");
  for (int r = 0; r < ranks && only < 0; ++r)
    if (layout_.device[ctpipe::detail::ix(r)] >= visible)
      throw std::invalid_argument("ctpipe::cuda::executor: the placement puts rank " + std::to_string(r) +
                                  " on device " + std::to_string(layout_.device[ctpipe::detail::ix(r)]) + ", but " +
                                  std::to_string(visible) + " device(s) are visible");
  // Peer access between devices that exchange tensors (a peer copy works without it, slower).
  const auto peers = [&](int p, int q) {
    if (p == q) return;
    check(Backend::enable_peer_access(p, q), "cudaDeviceEnablePeerAccess", "construction: enabling peer access");
    check(Backend::enable_peer_access(q, p), "cudaDeviceEnablePeerAccess", "construction: enabling peer access");
  };
  for (int b = 0; b + 1 < stage_count && only < 0; ++b)
    if ((b + 1) % chain_length != 0) peers(stage_device(b), stage_device(b + 1));
  for (int j = 0; j < chain_length && mirrored && only < 0; ++j)  // (a stage's two copies, summed)
    peers(stage_device(j), stage_device(chain_length + j));
  for (const skip_route& route : layout_.stages.skips) peers(stage_device(route.from), stage_device(route.to));
  if (!borrowed_) {
    check(Backend::stream_create(&origin_, on(layout_.device[0])), "cudaStreamCreateWithFlags",
          "construction: the origin stream");
    origin_made_ = true;
  }
  for (std::size_t r = 0; r < streams_.size() && !borrowed_; ++r) {
    if (!mine(static_cast<int>(r))) continue;
    check(Backend::stream_create(&streams_[r], on(layout_.device[r])), "cudaStreamCreateWithFlags",
          "construction: a rank's stream");
    stream_made_[r] = true;
  }
  if constexpr (layout_.pairs)
    for (std::size_t r = 0; r < aux_.size(); ++r) {
      if (!mine(static_cast<int>(r))) continue;
      check(Backend::stream_create(&aux_[r], on(layout_.device[r])), "cudaStreamCreateWithFlags",
            "construction: a rank's second stream (for overlapped pairs F&B)");
      aux_made_[r] = true;
    }
  // (Process mode: the events of hand-offs between ranks go unused; the transport has its own.)
  for (std::size_t e = 0; e < events_.size(); ++e) {
    check(Backend::event_create(&events_[e], on(event_devices[e])), "cudaEventCreateWithFlags",
          "construction: an event");
    ++events_made_;
  }
  for (std::size_t d = 0; d < memory_.size(); ++d)
    if (mem.bytes[d] > 0 && (only < 0 || static_cast<int>(d) == device_of_rank<(only < 0 ? 0 : only)>))
      check(Backend::malloc(&memory_[d], mem.bytes[d], on(static_cast<int>(d))), "cudaMalloc",
            "construction: the buffers of a device");
  if constexpr (adds)
    for (std::size_t d = 0; d < adders_.size(); ++d)
      if (memory_[d] || ((shares || mirrored) && only < 0)) {
        check(Backend::adder_create(&adders_[d], on(static_cast<int>(d))), "cublasCreate",
              "construction: the gradient sums' handle of a device");
        adder_made_[d] = true;
      }
  // Process mode: the global batch's losses (every replica's), which the transport gathers.
  if constexpr (only >= 0) losses_count_ = transport_->losses();
  void* host = nullptr;
  check(Backend::host_malloc(&host, sizeof(double) * losses_count_), "cudaMallocHost",
        "construction: the losses' host copy");
  losses_host_ = static_cast<double*>(host);
  for (std::size_t i = 0; i < losses_count_; ++i) losses_host_[i] = 0.0;
  check(Backend::host_malloc(&host, step_words_bytes(microbatches)), "cudaMallocHost",
        "construction: the step number's host copy");
  step_host_ = static_cast<std::uint64_t*>(host);
  std::memset(host, 0, step_words_bytes(microbatches));
  check(Backend::event_create(&step_copied_, on(layout_.device[0])), "cudaEventCreateWithFlags",
        "construction: an event");
  step_event_made_ = true;
  if constexpr (only >= 0) replica_offset_ = transport_->first_microbatch();
  // Parameters shared by hand across ranks, and shared groups the executor cannot sum, refused.
  ctpipe::detail::check_shared_parameters(model_, Transport::tag::name,
                                          [](int k) { return groups_type::rank_of_layer(k); });
  if constexpr (shares && only < 0 && !forward_only) groups_.set_up(*this);
  if constexpr (mirrored && only < 0 && !forward_only) mirrors_.set_up(*this);
  if constexpr (shares && only >= 0 && Transport::tag::shared_parameters) groups_.set_up_processes(*this);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::release() noexcept {
  if constexpr (only >= 0)
    if (transport_->broken()) return;  // aborted (a timeout): streams may never finish; buffers are left
  synchronize_all();
  invalidate_graph();
  for (std::size_t e = 0; e < events_made_; ++e) (void)Backend::event_destroy(events_[e]);
  events_made_ = 0;
  for (std::size_t r = 0; r < streams_.size(); ++r)
    if (stream_made_[r]) (void)Backend::stream_destroy(streams_[r]);
  stream_made_.fill(false);
  for (std::size_t r = 0; r < aux_.size(); ++r)
    if (aux_made_[r]) (void)Backend::stream_destroy(aux_[r]);
  aux_made_.fill(false);
  if (origin_made_) (void)Backend::stream_destroy(origin_);
  origin_made_ = false;
  groups_.release(*this);
  mirrors_.release(*this);
  if constexpr (adds)
    for (std::size_t d = 0; d < adders_.size(); ++d)
      if (adder_made_[d]) (void)Backend::adder_destroy(adders_[d]);
  adder_made_.fill(false);
  for (std::size_t d = 0; d < memory_.size(); ++d)
    if (memory_[d]) (void)Backend::free(memory_[d], on(static_cast<int>(d)));
  memory_.fill(nullptr);
  if (losses_host_) (void)Backend::host_free(losses_host_);
  losses_host_ = nullptr;
  if (step_host_) (void)Backend::host_free(step_host_);
  step_host_ = nullptr;
  if (step_event_made_) (void)Backend::event_destroy(step_copied_);
  step_event_made_ = step_copy_pending_ = false;
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::synchronize_all() noexcept {
  for (std::size_t r = 0; r < streams_.size(); ++r)
    if (stream_made_[r] || (borrowed_ && mine(static_cast<int>(r)))) (void)Backend::synchronize(streams_[r]);
  for (std::size_t r = 0; r < aux_.size(); ++r)
    if (aux_made_[r]) (void)Backend::synchronize(aux_[r]);
  if constexpr (only >= 0) transport_->synchronize();
  if (origin_made_ || borrowed_) (void)Backend::synchronize(origin_);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <class IssueTasks>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::issue_step(IssueTasks& issue_tasks) {
  constexpr bool switching = layout_.multi_device && only < 0;
  try {
    if constexpr (layout_.multi_device || only >= 0)  // (process mode: the process's device, whatever was current)
      check(Backend::set_device(on(layout_.device[0])), "cudaSetDevice", "starting the step");
    check(Backend::record(event(layout_.fork_event), origin_), "cudaEventRecord", "starting the step");
    for (std::size_t r = 0; r < streams_.size(); ++r)
      if (mine(static_cast<int>(r)))
        check(Backend::wait(streams_[r], event(layout_.fork_event)), "cudaStreamWaitEvent", "starting the step");
    if constexpr (only >= 0) {
      transport_->begin_step(origin_);
      if constexpr (model_checked)  // (as the tasks: nothing for a model that broke a rule)
        post_first_receives(std::make_index_sequence<ctpipe::detail::ix(edge_count)>{});
    }
    zero_gradients(std::make_index_sequence<Model::size>{});
    groups_.new_step();
    if constexpr (mirrored && only >= 0) {  // (the losses of the other chain: zero in the transport's sum)
      mirrors_.new_step();
      if constexpr (last_held >= 0)
        check(Backend::memset_async(base<last_held>() + mem.losses[chains_.chain_of_stage(last_held)],
                                    sizeof(double) * ctpipe::detail::ix(microbatches),
                                    streams_[ctpipe::detail::ix(only)]),
              "cudaMemsetAsync", "starting the step's losses");
    }
    if constexpr (switching) check(Backend::set_device(layout_.device[0]), "cudaSetDevice", "starting the step");
    issue_tasks();
    if constexpr (only < 0) copy_losses<0>();
    if constexpr (only < 0 && mirrored) copy_losses<1>();
    for (std::size_t r = 0; r < streams_.size(); ++r) {
      if (!mine(static_cast<int>(r))) continue;
      if constexpr (switching) check(Backend::set_device(layout_.device[r]), "cudaSetDevice", "ending the step");
      check(Backend::record(event(layout_.join_event + static_cast<int>(r)), streams_[r]), "cudaEventRecord",
            "ending the step");
    }
    if constexpr (switching) check(Backend::set_device(layout_.device[0]), "cudaSetDevice", "ending the step");
    for (std::size_t r = 0; r < streams_.size(); ++r)
      if (mine(static_cast<int>(r)))
        check(Backend::wait(origin_, event(layout_.join_event + static_cast<int>(r))), "cudaStreamWaitEvent",
              "ending the step");
    if constexpr (only < 0 && !forward_only)
      if (update_) issue_update();
    if constexpr (only >= 0) {
      const void* losses = nullptr;
      if constexpr (last_held >= 0) losses = base<last_held>() + mem.losses[chains_.chain_of_stage(last_held)];
      // An update: this process's terms once every message and sum of the step is done, summed
      // over every process with the losses and statuses (one collective), then decided and applied.
      transport_->join_streams(origin_);
      if (update_) update_->terms(0, origin_);
      transport_->end_step(origin_, losses, losses_host_, failure_.failed ? &failure_.t : nullptr, tokens(),
                           update_ ? update_->process_terms() : nullptr);
      if (update_) {
        const process_sums sums = transport_->summed();
        update_->decide(origin_, &sums);
        update_->apply(0, origin_);
      }
    }
  } catch (...) {
    abandon_step();
    throw;
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::issue_update() {
  constexpr bool switching = layout_.multi_device;
  const auto on_rank = [&](std::size_t r) {
    if constexpr (switching) check(Backend::set_device(layout_.device[r]), "cudaSetDevice", "the update");
  };
  const auto fork = [&] {
    check(Backend::record(event(layout_.fork_event), origin_), "cudaEventRecord", "the update");
    for (std::size_t r = 0; r < streams_.size(); ++r)
      check(Backend::wait(streams_[r], event(layout_.fork_event)), "cudaStreamWaitEvent", "the update");
  };
  const auto join = [&] {
    for (std::size_t r = 0; r < streams_.size(); ++r) {
      on_rank(r);
      check(Backend::record(event(layout_.join_event + static_cast<int>(r)), streams_[r]), "cudaEventRecord",
            "the update");
    }
    on_rank(0);
    for (std::size_t r = 0; r < streams_.size(); ++r)
      check(Backend::wait(origin_, event(layout_.join_event + static_cast<int>(r))), "cudaStreamWaitEvent",
            "the update");
  };
  fork();  // each rank's terms of the norm, once every task of the step (and every sum) is done
  for (std::size_t r = 0; r < streams_.size(); ++r) {
    on_rank(r);
    update_->terms(static_cast<int>(r), streams_[r]);
  }
  join();
  update_->decide(origin_, nullptr);
  fork();  // each rank's update, once the decision is made
  for (std::size_t r = 0; r < streams_.size(); ++r) {
    on_rank(r);
    update_->apply(static_cast<int>(r), streams_[r]);
  }
  join();
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int C>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::copy_losses() {
  constexpr int last = (C + 1) * chain_length - 1;
  constexpr int per_chain = mirrored ? microbatches / 2 : microbatches, first = C * per_chain;
  if constexpr (layout_.multi_device) check(Backend::set_device(device_of<last>), "cudaSetDevice", "ending the step");
  check(Backend::copy_to_host_async(losses_host_ + first, base<last>() + mem.losses[C] + sizeof(double) * first,
                                    sizeof(double) * ctpipe::detail::ix(per_chain),
                                    streams_[ctpipe::detail::ix(rank_of<last>)]),
        "cudaMemcpyAsync", "copying the losses to the host");
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int E>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::post_first() {
  constexpr int from = edge_from(E), to = edge_to(E);
  if constexpr (rank_of<from> != rank_of<to>) {
    for (int n = 0; n < edge_capacity<E> && n < edge_messages; ++n) {
      if constexpr (rank_of<to> == only) post_receive<E, 0>(n);
      if constexpr (rank_of<from> == only && !forward_only) post_receive<E, 1>(n);  // (a forward pass: no gradient)
    }
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int E, int Dir>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::post_receive(int n) {
  if constexpr (graph) {
    constexpr auto& go = parts::graph::go;
    constexpr auto a = ctpipe::detail::ix(edge_from(E)), b = ctpipe::detail::ix(edge_to(E));
    if constexpr (E < boundary_count && Dir == 0)
      transport_->template post_receive<E, 0>(n, parts::graph::template ring_forward<E>(*this, n),
                                              transport_bytes<E, 0>(n, go.value_bytes[a][b]));
    else if constexpr (E < boundary_count)
      transport_->template post_receive<E, 1>(n, parts::graph::template ring_backward<E>(*this, n),
                                              transport_bytes<E, 1>(n, go.gradient_bytes[a][b]));
    else if constexpr (Dir == 0)
      transport_->template post_receive<E, 0>(n, parts::graph::template skip_ring_forward<E - boundary_count>(*this, n),
                                              transport_bytes<E, 0>(n, go.value_bytes[a][b]));
    else
      transport_->template post_receive<E, 1>(n,
                                              parts::graph::template skip_ring_backward<E - boundary_count>(*this, n),
                                              transport_bytes<E, 1>(n, go.gradient_bytes[a][b]));
  } else if constexpr (Dir == 0) {
    transport_->template post_receive<E, 0>(n, parts::chain::template ring_forward_view<E>(*this, n).data,
                                            transport_bytes<E, 0>(n, boundary_tensor<E>::bytes));
  } else {
    transport_->template post_receive<E, 1>(n, parts::chain::template ring_backward_view<E>(*this, n).data,
                                            transport_bytes<E, 1>(n, boundary_tensor<E>::bytes));
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::abandon_step() noexcept {
  if (capturing_) {
    typename Backend::graph_type g{};
    if (Backend::ok(Backend::end_capture(origin_, &g))) (void)Backend::graph_destroy(g);
    capturing_ = false;
  }
  synchronize_all();
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <std::size_t K>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::zero_layer() {
  constexpr int j = Stages.stage_of_layer(static_cast<int>(K));
  if constexpr (has_parameters<typename Model::template layer_type<K>>) {
    zero_copy<K, j>();
    if constexpr (mirrored) zero_copy<K, chain_length + j>();
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <std::size_t K, int S>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::zero_copy() {
  if constexpr (mine(rank_of<S>)) {
    const auto s = streams_[ctpipe::detail::ix(rank_of<S>)];
    auto g = layers<S>().template layer<K>().gradients();
    if constexpr (layout_.multi_device && only < 0)
      check(Backend::set_device(device_of<S>), "cudaSetDevice", "zeroing gradients");
    if constexpr (!forward_only)
      check(Backend::memset_async(g.data(), g.size_bytes(), s), "cudaMemsetAsync", "zeroing a layer's gradients");
    if constexpr (mirrored && only < 0 && chains_.chain_of_stage(S) == 1) {
      const auto from = model_.template layer<K>().parameters();
      check(Backend::memcpy_async(mirror_->template layer<K>().parameters().data(), device_of<S>, from.data(),
                                  device_of<S - chain_length>, from.size_bytes(), s),
            "cudaMemcpyPeerAsync", "copying a layer's parameters into its mirrored copy (dualpipe)");
      if constexpr (has_compute_copy<typename Model::template layer_type<K>>) {  // (and what it computes with)
        const auto c = model_.template layer<K>().compute_parameters();
        check(Backend::memcpy_async(mirror_->template layer<K>().compute_parameters().data(), device_of<S>, c.data(),
                                    device_of<S - chain_length>, c.size_bytes(), s),
              "cudaMemcpyPeerAsync", "copying a layer's compute copy into its mirrored copy (dualpipe)");
      }
    }
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int E, int Dir>
inline std::size_t engine<Model, Stages, Loss, Backend, Layout, Transport>::transport_bytes(
    int n, std::size_t whole) const noexcept {
  constexpr std::size_t row = message_token_bytes<E, Dir>();
  if constexpr (row == 0) {
    return whole;
  } else {
    if (graph_step_) return whole;
    constexpr auto fifo = ctpipe::detail::ix(2 * E + Dir);
    return row * ctpipe::detail::ix(
                     extents_[ctpipe::detail::ix(Transport::fifos.message_microbatch[fifo][ctpipe::detail::ix(n)])]);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int E, int Dir>
constexpr std::size_t engine<Model, Stages, Loss, Backend, Layout, Transport>::message_token_bytes() {
  if constexpr (token_capacity == 0) {
    return 0;
  } else if constexpr (graph) {
    constexpr int a = edge_from(E), b = edge_to(E);
    using wiring = typename parts::graph::wiring;
    constexpr int count = Dir == 0 ? wiring::wire_count(a, b) : wiring::term_count(b, a);
    if constexpr (count != 1)
      return 0;
    else
      return wiring::at(Dir == 0 ? wiring::wire_edge(a, b, 0) : wiring::term_edge(b, a, 0)).token_bytes;
  } else {
    return ctpipe::detail::token_bytes_of<boundary_tensor<E>>();
  }
}

}  // namespace ctpipe::cuda::detail
