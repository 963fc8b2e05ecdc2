// The NCCL executor's hand-off between processes: what the CUDA engine calls in process mode
// (cuda/executor.hpp) for every tensor that crosses to another rank. Written against two backends,
// Cuda (streams, events, memory: ctpipe::cuda::runtime) and Net (point-to-point and all-reduce:
// ctpipe::nccl::runtime), so that the CPU tests run it on the stream simulator and a stand-in for
// NCCL that checks NCCL's rules.
//
// Every direction of every boundary between two ranks is a FIFO of its own: a communicator of its
// two processes, and on each of them a stream that carries only that FIFO's sends or receives.
// NCCL's send waits for its receive, and calls on one stream (or one communicator) run one after
// another, so with one stream for all of a rank's sends and receives the table's order deadlocks
// (interleaved, the zero-bubble and DualPipe orders post a send that waits for a peer who is itself
// waiting in a send). With a stream per FIFO, a send holds up only later messages of its own FIFO,
// which the receiver takes in the same order (verify() proves it), so no group calls are needed:
//  - a send: its stream waits for the tensor to be produced (an event on the compute stream), then
//    ncclSend reads it where it lies; a gradient's buffer is not written again before the send of
//    the one before it has completed (before_overwrite); an activation stays in the stash until the
//    stage's backward, which cannot run before the receiver has it;
//  - a receive: posted on its stream into ring slot n % capacity as soon as the slot's previous
//    message has been consumed (an event on the compute stream), so it runs ahead of its consumer
//    by up to `capacity` messages; the consumer's stream waits for it (receive()).
// The ring's capacity is the analysis' bound on messages in flight, so a slot's wait never waits on
// anything the table does not already order first.
// A forward-only pass (evaluate, predict) keeps no activation for a backward: a stage's stash slot
// is written again by its next F, so that F first waits for the sends issued from the stage's slots
// so far (before_reuse). It runs on the training step's communicators and FIFO streams (links,
// below): NCCL orders a communicator's calls, and the two never run at once.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <ctpipe/detail/index.hpp>
#include <ctpipe/nccl/detail/recording.hpp>
#include <ctpipe/nccl/detail/transport_core.hpp>

namespace ctpipe::nccl {

namespace detail {

/// The transport of rank `Rank` of the FIFO layout `Fifos`: the run-time half (transport_core),
/// and each message's calls, which the engine's tasks make with their FIFO as a constant.
template <class Cuda, class Net, int Rank, auto Fifos>
class transport : public transport_core<Cuda, Net> {
  using core = transport_core<Cuda, Net>;

 public:
  static constexpr int rank = Rank;
  using tag = executor_tag;
  static constexpr auto fifos = Fifos;  // (cuda/detail/process_mode.hpp: fifo_layout)
  static constexpr int edges = Fifos.edges();
  static constexpr int microbatches = Fifos.microbatches;
  using typename core::comm_type;
  using typename core::links_type;
  using typename core::stream_type;

  /// The training step's transport (transport_core's arguments).
  transport(int device, std::vector<comm_type> comms, comm_type world, comm_type peers, int process, int processes,
            int replicas, int replica, std::chrono::milliseconds timeout, std::size_t norm_words)
      : core(shape, device, std::move(comms), world, peers, process, processes, replicas, replica, timeout,
             norm_words) {}
  /// A forward-only pass's transport, on the training step's links.
  explicit transport(std::shared_ptr<links_type> shared) : core(shape, std::move(shared)) {}

  // Each message's calls, on FIFO (B, Dir) (transport_core says what each does).
  template <int B, int Dir>
  void post_receive(int n, void* slot, std::size_t bytes) {
    this->post_receive_on(ix(2 * B + Dir), capacity<B>, n, slot, bytes);
  }
  template <int B, int Dir>
  void receive(int n, stream_type s) {
    this->receive_on(ix(2 * B + Dir), n, s);
  }
  template <int B, int Dir>
  void consumed(int n, stream_type s) {
    this->consumed_on(ix(2 * B + Dir), capacity<B>, n, s);
  }
  template <int B, int Dir>
  void send(int n, const void* source, std::size_t bytes, stream_type s) {
    this->send_on(ix(2 * B + Dir), n, source, bytes, s);
  }
  template <int B, int Dir>
  void before_overwrite(int n, stream_type s) {
    this->before_overwrite_on(ix(2 * B + Dir), n, s);
  }
  // A send's stream reads its buffer when the receiver is ready, after the call returns: a forward
  // pass's stash slot waits for its sends before it is written again (before_reuse).
  static constexpr bool sends_read_late = true;
  template <int B, int Dir>
  void before_reuse(stream_type s) {
    this->before_reuse_on(ix(2 * B + Dir), s);
  }

  // record_steps (cuda/detail/process_mode.hpp; nccl/detail/recording.hpp): collective, each.
  void recording_begin(std::span<const int> lengths, stream_type origin) {
    this->check_usable();
    if (!recording_) recording_ = std::make_unique<recording<Cuda, Net>>(*this, lengths);
    recording_->begin(origin);
  }
  std::span<double> recording_times() noexcept { return recording_->task_times(); }
  void recording_gather(double own_error, stream_type origin) { recording_->gather(own_error, origin); }
  const measured_step& recording_step(int replica) const noexcept {
    static const measured_step none{};
    return recording_ ? recording_->step(replica) : none;
  }
  double recording_error() const noexcept { return recording_ ? recording_->alignment_error() : 0.0; }

 private:
  using core::ix;
  static constexpr auto ends = ctpipe::cuda::detail::make_fifo_ends<Rank, Fifos>();
  static constexpr transport_shape shape{Rank, edges, microbatches, static_cast<int>(Fifos.stage_rank.size()), ends};
  template <int B>
  static constexpr int capacity = Fifos.capacity[ctpipe::detail::ix(B)];
  std::unique_ptr<recording<Cuda, Net>> recording_;  // record_steps: made once, kept
};

}  // namespace detail
}  // namespace ctpipe::nccl
