// What the NCCL executor's transports in one process share (nccl/detail/transport.hpp): the
// communicators of its FIFOs and shared groups, each FIFO's stream and per-message events, the
// gradient sums' stream, and the abort after a timeout. Written against Cuda (streams, events) and
// Net (communicators), as the transport is.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <ctpipe/exec/detail/hang_record.hpp>

namespace ctpipe::nccl::detail {

/// What a process's transports share (the training step's and the forward pass's, made at the
/// first evaluate or predict): the communicators, each FIFO's stream and per-message events, the
/// sums' stream, and whether a timeout aborted them. Made by the training step's transport; freed
/// with the last transport that holds them.
template <class Cuda, class Net>
struct links {
  using stream_type = typename Cuda::stream_type;
  using event_type = typename Cuda::event_type;
  using comm_type = typename Net::comm_type;

  // One end of a FIFO: its stream, communicator and per-message events. A receiving end's `done`
  // is "received", `consumed` "slot free"; a sending end's `done` is "sent", `consumed` "produced".
  struct fifo {
    comm_type comm{};
    stream_type stream{};
    bool stream_made = false, join_made = false;
    event_type join{};
    std::vector<event_type> done, consumed;
    std::string what;
  };

  links(int device, std::vector<comm_type> comms, comm_type world, comm_type peers, int process, int processes,
        int replicas, int replica, std::chrono::milliseconds timeout)
      : device(device),
        comms(std::move(comms)),
        world(world),
        peers(peers),
        process(process),
        processes(processes),
        replicas(replicas),
        replica(replica),
        timeout(timeout) {}
  links(const links&) = delete;
  links& operator=(const links&) = delete;
  ~links() {
    record.write(ctpipe::detail::hang_event::exit, "the executor was destroyed");
    release();
  }

  // Every stream: the FIFOs', and the gradient sums'.
  std::vector<fifo*> streams() {
    std::vector<fifo*> v;
    for (fifo& f : fifos) v.push_back(&f);
    v.push_back(&sums);
    return v;
  }
  void synchronize() noexcept {
    for (fifo* f : streams())
      if (f->stream_made) (void)Cuda::synchronize(f->stream);
  }
  // A step that did not end in time: every communicator aborted (NCCL may still write the
  // transports' buffers: they are left allocated).
  void abort() noexcept {
    broken = true;
    for (comm_type c : comms)
      if (c) (void)Net::abort(c);
    if (peers) (void)Net::abort(peers);
    if (replica_comm) (void)Net::abort(replica_comm);
    comms.clear();
    peers = replica_comm = comm_type{};
  }
  void release() noexcept {
    if (broken) return;  // aborted: NCCL may still write the buffers; they are left allocated
    synchronize();
    for (fifo* fp : streams()) {
      fifo& f = *fp;
      if (f.stream_made) (void)Cuda::stream_destroy(f.stream);
      f.stream_made = false;
      if (f.join_made) (void)Cuda::event_destroy(f.join);
      f.join_made = false;
      for (auto* v : {&f.done, &f.consumed})
        for (event_type e : *v) (void)Cuda::event_destroy(e);
      f.done.clear();
      f.consumed.clear();
    }
    if (fork_made) (void)Cuda::event_destroy(fork);
    fork_made = false;
    for (comm_type c : comms)
      if (c) (void)Net::destroy(c);
    comms.clear();
    if (peers) (void)Net::destroy(peers);
    if (replica_comm) (void)Net::destroy(replica_comm);
    peers = replica_comm = comm_type{};
  }

  int device;
  std::vector<comm_type> comms;  // FIFO (b, d)'s at 2b + d, then one per shared group
  comm_type world;               // every process (the user's: not destroyed here)
  comm_type peers;               // this rank's replicas
  comm_type replica_comm{};      // this replica's processes by rank (predict's outputs), made at the first pass
  int process, processes, replicas, replica;
  std::chrono::milliseconds timeout;
  bool broken = false;
  int microbatches = 0;     // each FIFO's events: one per message of a step
  std::vector<fifo> fifos;  // 2b + d
  fifo sums;                // the gradient sums' stream, and an event per stage and per shared group (in `done`)
  event_type fork{};
  bool fork_made = false;
  // The hang report (options::report_dir or CTPIPE_REPORT_DIR; off: a few stores a task).
  ctpipe::detail::hang_record record;
};

}  // namespace ctpipe::nccl::detail
