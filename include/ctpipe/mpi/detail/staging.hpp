// The MPI executor's device path: the hand-off of the CUDA engine in process mode (cuda/executor.hpp)
// over MPI, for users with one GPU per process and no NCCL. Every tensor that crosses to another
// rank is staged through pinned host memory, and the host waits for it:
//  - a send copies the tensor to a pinned slot on the rank's stream, waits for the copy, and starts
//    MPI_Isend (MPI_Issend with options::synchronous_sends) from the slot; the slot's previous send
//    is waited for first (rings of the analysis' capacity, as on the host path);
//  - a receive (at its RECV task) receives into a pinned slot, within options::timeout, and copies it
//    to the device ring slot the engine named for it on the rank's stream (the pinned slot is reused
//    once that copy is done);
//  - with D > 1 each layer's gradients are copied to the host, summed with MPI_Iallreduce across the
//    replicas, and copied back;
//  - a shared group whose members are on several ranks is summed once every task of the step has
//    been issued (groups_at_end: a process that waited for a group's gather in the middle of its
//    program could hold back a send its peer needs first): its members are copied to the host,
//    gathered over the group's communicator (the session's) and copied back, where the engine adds
//    them in layer order;
//  - the step ends with the session's agreement (the global batch's losses and every process's
//    status), as on the host path.
// The host waits at every hand-off, so a step is not captured into a CUDA graph (launch::eager
// only), and a hand-off costs two copies and the host's round trip: NCCL's path has none of it.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ctpipe/cuda/detail/fifo_ends.hpp>
#include <ctpipe/cuda/detail/update_hook.hpp>  // process_sums, throw_updates_differ
#include <ctpipe/detail/acquire.hpp>
#include <ctpipe/detail/index.hpp>
#include <ctpipe/exec/detail/extents.hpp>  // put_extent_sums, check_extent_sums
#include <ctpipe/mpi/detail/recorder.hpp>
#include <ctpipe/mpi/detail/session.hpp>
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi::detail {

/// What the staging needs of its rank and table, at run time (so that a program compiles its
/// staging once per backend, not once per rank of every executor).
struct staging_shape {
  int microbatches = 0;
  std::span<const ctpipe::cuda::detail::fifo_end> ends;  // each FIFO's end on this rank
};

/// The staging's run-time half: the pinned slots and events of this rank's FIFOs, each message's
/// copies and MPI calls on FIFO k, the step's end (session::agree), the replicas' and shared groups'
/// sums through the host.
template <class Cuda>
class staging_core {
 public:
  using stream_type = typename Cuda::stream_type;
  using event_type = typename Cuda::event_type;

  // `fifo_bytes[2e + d]`: the bytes of a message of edge e's direction d (process_mode's
  // fifo_bytes); `gradient_bytes`: the largest layer's gradients of this rank (for the sums);
  // `norm_words`: the words of a device optimizer's terms (cuda/detail/update_hook.hpp), summed with
  // every step's losses whether or not one is attached (0: a forward pass's staging).
  staging_core(const staging_shape& shape, session& s, int device, std::vector<std::size_t> fifo_bytes,
               std::size_t gradient_bytes, std::size_t norm_words)
      : s_(s),
        microbatches_(shape.microbatches),
        ends_(shape.ends),
        device_(device),
        bytes_(std::move(fifo_bytes)),
        gradient_bytes_(gradient_bytes),
        terms_words_(norm_words) {
    ctpipe::detail::acquire_or_release([this] { acquire(); }, [this] { release(); });
  }
  staging_core(const staging_core&) = delete;
  staging_core& operator=(const staging_core&) = delete;
  ~staging_core() { release(); }

  int device() const noexcept { return device_; }
  // The index of this replica's microbatch 0 in the global batch (the layers' context).
  int first_microbatch() const noexcept { return microbatches_ * s_.where().replica; }
  std::size_t losses() const noexcept {
    return ctpipe::detail::ix(microbatches_) * ctpipe::detail::ix(s_.where().replicas);
  }
  bool broken() const noexcept { return s_.broken(); }
  // (The hang report's pass: a forward pass's staging sums no optimizer terms.)
  void check_usable() { s_.begin_step(terms_words_ == 0 ? 1 : 0); }
  // Task `position` of the rank's program is being issued (the hang report).
  void enter(int position) noexcept { s_.record().enter(position); }
  // (... issued: the host itself takes part in every message on this path, so it knows already.)
  void entered(int, stream_type) noexcept {}
  // Between steps (ctpipe::optimizer): each of `terms` summed over every process (the session's).
  void sum_terms(std::span<double> terms, stream_type) { s_.sum_terms(terms); }
  // A task of this process failed: the others are told (they learn it at the step's end).
  void failed(int r, task t, std::exception_ptr e) noexcept { s_.fail_here(r, t, std::move(e)); }

  // record_steps (cuda/detail/process_mode.hpp): the host path's clocks and gather
  // (mpi/detail/recorder.hpp), with this process's times from its GPU's events. `lengths`: each
  // rank's program length; begin is collective, as the step.
  void recording_begin(std::span<const int> lengths, stream_type) {
    if (!recorder_)
      recorder_ = std::make_unique<step_recorder>(s_.where(), std::vector<int>(lengths.begin(), lengths.end()));
    recorder_->begin(s_);
  }
  std::span<double> recording_times() noexcept { return recorder_->times(); }
  void recording_gather(double own_error, stream_type) {
    recorder_->set_own_error(own_error);
    recorder_->gather(s_);
  }
  const measured_step& recording_step(int replica) const noexcept {
    static const measured_step none{};
    return recorder_ ? recorder_->step(replica) : none;
  }
  double recording_error() const noexcept { return recorder_ ? recorder_->alignment_error() : 0.0; }

  void begin_step(stream_type) {}
  // (Its end_step reads the extents as it runs, within the eager step: nothing to stage before.)
  void stage_extents(std::span<const int>, stream_type) {}
  // (Every message and sum of the step is done when its call returns.)
  void join_streams(stream_type) {}
  // The step's end: the global batch's losses, with extents every process's (put_extent_sums), a
  // device optimizer's terms (`terms`: norm_words in device memory, or null: zeros), and every
  // process's status, summed over the job (session::agree); the terms go back to device memory
  // (summed()). Where some processes have a device optimizer attached and others not, every
  // process throws std::logic_error (before any update).
  void end_step(stream_type origin, const void* losses, double* host, const task* failed, std::span<const int> extents,
                const double* terms) {
    const std::size_t m = ctpipe::detail::ix(microbatches_);
    if (losses) cuda(Cuda::copy_to_host_async(loss_stage_, losses, sizeof(double) * m, origin), "copying the losses");
    if (terms && terms_words_ > 0)
      cuda(Cuda::copy_to_host_async(term_stage_, terms, sizeof(double) * terms_words_, origin),
           "copying the device optimizer's terms");
    cuda(Cuda::synchronize(origin), "ending the step");
    const place& w = s_.where();
    std::fill(sums_.begin(), sums_.end(), 0.0);
    if (losses)
      std::copy_n(loss_stage_, m, sums_.begin() + static_cast<std::ptrdiff_t>(m * ctpipe::detail::ix(w.replica)));
    if (!extents.empty())
      ctpipe::detail::put_extent_sums(extents, sums_.data() + this->losses() + 2 * m * ctpipe::detail::ix(w.replica));
    double* const summed_terms = sums_.data() + 3 * this->losses();
    if (terms && terms_words_ > 0) std::copy_n(term_stage_, terms_words_, summed_terms);
    if (!s_.agree(sums_, failed ? 1 : 0)) [[unlikely]] {
      for (fifo& f : fifos_)
        for (MPI_Request& q : f.sends)
          if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
      s_.record().end_step(false);
      s_.recover_and_throw();
    }
    for (fifo& f : fifos_)
      for (MPI_Request& q : f.sends)
        s_.wait<false>(q, [&] { return "waiting for a send to complete (" + f.what + ")"; });
    s_.record().end_step(true);
    std::copy_n(sums_.begin(), this->losses(), host);
    if (terms_words_ > 0) {
      const double n = summed_terms[terms_words_ - 1];  // (the processes with an optimizer attached)
      if (n != 0.0 && n != static_cast<double>(w.processes))
        ctpipe::cuda::detail::throw_updates_differ(name, w.rank, w.replica, w.process, static_cast<int>(n), w.processes,
                                                   terms != nullptr);
      if (terms) {
        std::copy_n(summed_terms, terms_words_, term_stage_);
        cuda(Cuda::copy_to_device_async(summed_device_, term_stage_, sizeof(double) * terms_words_, origin),
             "copying the device optimizer's terms");
      }
    }
  }
  /// After end_step, on its stream: every process's terms, summed (a failed step threw before).
  ctpipe::cuda::detail::process_sums summed() const noexcept {
    return {summed_device_, nullptr, ctpipe::detail::ix(s_.where().processes), 0};
  }
  // (end_step threw where the processes' optimizers differ.)
  void check_updates(bool) const noexcept {}
  // After a step with extents (`mine`, this process's): the first of this replica's microbatches
  // whose extent the replica's processes did not all give alike, or -1; tokens() then holds the
  // global batch's tokens.
  int check_extents(std::span<const int> mine) {
    const place& w = s_.where();
    return ctpipe::detail::check_extent_sums({sums_.data() + this->losses(), 2 * this->losses()}, mine, w.replica,
                                             w.processes / w.replicas, tokens_);
  }
  std::span<const int> tokens() const noexcept { return tokens_; }

  // (`bytes`: what message n brings, which with run-time extents may be less than the FIFO's most.)
  void post_receive_on(std::size_t k, int n, void* slot, std::size_t bytes) {
    fifo& f = fifos_[k];
    f.device_slot[slot_of(k, n)] = slot;
    f.expected[slot_of(k, n)] = bytes;
  }
  void receive_on(std::size_t k, int n, stream_type s) {
    fifo& f = fifos_[k];
    const std::size_t i = slot_of(k, n);
    if (f.copied_made[i]) cuda(Cuda::event_synchronize(f.copied[i]), f.what);  // the slot's last copy is done
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Irecv(f.host[i], static_cast<int>(bytes_[k]), MPI_BYTE, f.peer, static_cast<int>(k), s_.data(), &q),
          "MPI_Irecv");
    MPI_Status status{};
    s_.record().wait(ctpipe::detail::hang_state::receiving, f.peer);
    s_.wait<false>(
        q, [&] { return f.what + ", message " + std::to_string(n); }, &status);
    int got = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count");
    if (static_cast<std::size_t>(got) != f.expected[i])
      throw std::invalid_argument(std::string(name) + ": " + f.what + ", message " + std::to_string(n) + " brought " +
                                  std::to_string(got) + " bytes where this process expected " +
                                  std::to_string(f.expected[i]) +
                                  ": every process must give step() the same extents, and the same launch");
    cuda(Cuda::copy_to_device_async(f.device_slot[i], f.host[i], f.expected[i], s), f.what);
    cuda(Cuda::record(f.copied[i], s), f.what);
    f.copied_made[i] = true;
  }
  void send_on(std::size_t k, int n, const void* source, std::size_t bytes, stream_type s) {
    fifo& f = fifos_[k];
    const std::size_t i = slot_of(k, n);
    if (f.sends[i] != MPI_REQUEST_NULL) s_.record().wait(ctpipe::detail::hang_state::sending, f.peer);
    s_.wait<false>(f.sends[i], [&] { return f.what + ", message " + std::to_string(n - slots_of(k)); });
    cuda(Cuda::copy_to_host_async(f.host[i], source, bytes, s), f.what);
    cuda(Cuda::record(f.copied[i], s), f.what);
    cuda(Cuda::event_synchronize(f.copied[i]), f.what);
    if (s_.synchronous_sends())
      check(
          MPI_Issend(f.host[i], static_cast<int>(bytes), MPI_BYTE, f.peer, static_cast<int>(k), s_.data(), &f.sends[i]),
          "MPI_Issend");
    else
      check(
          MPI_Isend(f.host[i], static_cast<int>(bytes), MPI_BYTE, f.peer, static_cast<int>(k), s_.data(), &f.sends[i]),
          "MPI_Isend");
  }
  // After wait(): a failure has been thrown at the step's end already (session::agree).
  void check_step(std::exception_ptr) const noexcept {}

  // Data parallelism: each layer's gradients, on the rank's stream `s`, summed across the replicas.
  void sums_after(int, stream_type s) { sums_stream_ = s; }
  bool sums_replicas() const noexcept { return s_.where().replicas > 1; }

  // Shared groups (the engine sums them: cuda/detail/engine.hpp), after the step's every task.
  static constexpr bool groups_at_end = true;
  void group_after(int, stream_type s) { sums_stream_ = s; }
  stream_type sums_stream() const noexcept { return sums_stream_; }
  // Every holder's `bytes` of `send` (device memory), into `recv` in rank order, through the host.
  void gather(int g, const void* send, void* recv, std::size_t bytes) {
    const MPI_Comm c = s_.group(ctpipe::detail::ix(g));
    int holders = 0;
    check(MPI_Comm_size(c, &holders), "MPI_Comm_size");
    const std::size_t all = bytes * ctpipe::detail::ix(holders);
    if (group_stage_.size() < bytes + all) group_stage_.resize(bytes + all);  // (sized by the construction's)
    cuda(Cuda::copy_to_host_async(group_stage_.data(), send, bytes, sums_stream_), "gathering a shared group");
    cuda(Cuda::synchronize(sums_stream_), "gathering a shared group");
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Iallgather(group_stage_.data(), static_cast<int>(bytes), MPI_BYTE, group_stage_.data() + bytes,
                         static_cast<int>(bytes), MPI_BYTE, c, &q),
          "MPI_Iallgather");
    s_.wait<false>(q, [] { return std::string("gathering a shared group's members from the ranks that hold them"); });
    cuda(Cuda::copy_to_device_async(recv, group_stage_.data() + bytes, all, sums_stream_), "gathering a shared group");
    cuda(Cuda::synchronize(sums_stream_), "gathering a shared group");  // (the staging serves the next group)
  }
  template <class T>
  void sum(T* gradients, std::size_t count) {
    all_reduce(gradients, count, s_.replicas(), "summing gradients across replicas");
  }
  // A bidirectional table (dualpipe): summed with the pair process's copy (group g: an all-reduce
  // of two, the same bits on both).
  template <class T>
  void sum_pair(int g, T* gradients, std::size_t count) {
    all_reduce(gradients, count, s_.group(ctpipe::detail::ix(g)),
               "adding the gradients of a stage's two copies (dualpipe)");
  }

  void wait(stream_type origin) { cuda(Cuda::synchronize(origin), "waiting for the step"); }
  void synchronize() noexcept {}
  void exchange_once(stream_type) {}

 protected:
  // `count` gradients (device memory) summed over `comm`, through the host staging buffer.
  template <class T>
  void all_reduce(T* gradients, std::size_t count, MPI_Comm comm, const char* what) {
    const std::size_t bytes = count * sizeof(T);
    cuda(Cuda::copy_to_host_async(gradient_stage_, gradients, bytes, sums_stream_), "summing gradients");
    cuda(Cuda::synchronize(sums_stream_), "summing gradients");
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, gradient_stage_, static_cast<int>(count), datatype<T>(), MPI_SUM, comm, &q),
          "MPI_Iallreduce");
    s_.wait<false>(q, [what] { return std::string(what); });
    cuda(Cuda::copy_to_device_async(gradients, gradient_stage_, bytes, sums_stream_), "summing gradients");
    cuda(Cuda::synchronize(sums_stream_), "summing gradients");  // the staging buffer serves the next layer
  }
  // FIFO k's slots (its edge's capacity, at least one), and message n's.
  int slots_of(std::size_t k) const noexcept { return ends_[k].capacity > 0 ? ends_[k].capacity : 1; }
  std::size_t slot_of(std::size_t k, int n) const noexcept { return ctpipe::detail::ix(n % slots_of(k)); }

  template <class T>
  static MPI_Datatype datatype() {
    if constexpr (std::is_same_v<T, float>)
      return MPI_FLOAT;
    else
      return MPI_DOUBLE;
  }
  void cuda(typename Cuda::status st, const std::string& context) const {
    if (!Cuda::ok(st)) [[unlikely]]
      throw mpi_error(std::string(name) + ": a CUDA call failed (" + context + "): " + Cuda::describe(st));
  }

  // One end of a boundary's direction: pinned slots, the device slots the engine named, a copy
  // event per slot, and the sends in flight.
  struct fifo {
    int peer = -1;  // the other process
    std::string what;
    std::vector<char*> host;
    std::vector<void*> device_slot;
    std::vector<std::size_t> expected;  // the bytes the message in each slot brings
    std::vector<event_type> copied;
    std::vector<bool> copied_made;
    std::vector<MPI_Request> sends;
  };

  void acquire() {
    const place& w = s_.where();
    fifos_.resize(ends_.size());
    for (std::size_t i = 0; i < ends_.size(); ++i) {
      const ctpipe::cuda::detail::fifo_end& end = ends_[i];
      if (!end.here) continue;
      fifo& f = fifos_[i];
      f.peer = process_of(end.peer, w.replica, w.replicas);
      f.what = std::string(end.sends ? "sending " : "receiving ") + (i % 2 == 0 ? "the activations" : "the gradients") +
               (end.skip ? " of the skip connection between stages " : " across stages ") +
               std::to_string(end.producer) + " and " + std::to_string(end.consumer) + " (rank " +
               std::to_string(end.peer) + ")";
      const int c = slots_of(i);
      for (int k = 0; k < c; ++k) {
        void* p = nullptr;
        cuda(Cuda::host_malloc(&p, std::max<std::size_t>(bytes_[i], 1)), "construction: a pinned staging slot");
        f.host.push_back(static_cast<char*>(p));
        event_type x{};
        cuda(Cuda::event_create(&x, device_), "construction: an event");
        f.copied.push_back(x);
      }
      f.device_slot.assign(ctpipe::detail::ix(c), nullptr);
      f.expected.assign(ctpipe::detail::ix(c), 0);
      f.copied_made.assign(ctpipe::detail::ix(c), false);
      f.sends.assign(ctpipe::detail::ix(c), MPI_REQUEST_NULL);
    }
    void* p = nullptr;
    cuda(Cuda::host_malloc(&p, sizeof(double) * ctpipe::detail::ix(microbatches_)), "construction: the losses");
    loss_stage_ = static_cast<double*>(p);
    if (gradient_bytes_ > 0) {  // (0 where nothing is summed: one replica, no dualpipe)
      cuda(Cuda::host_malloc(&p, gradient_bytes_), "construction: the gradients' staging");
      gradient_stage_ = p;
    }
    if (terms_words_ > 0) {
      cuda(Cuda::host_malloc(&p, sizeof(double) * terms_words_), "construction: the optimizer's terms' staging");
      term_stage_ = static_cast<double*>(p);
      cuda(Cuda::malloc(&p, sizeof(double) * terms_words_, device_), "construction: the optimizer's terms");
      summed_device_ = static_cast<double*>(p);
    }
    // The losses, the extents' sums, a device optimizer's terms, the statuses.
    sums_.assign(3 * losses() + terms_words_ + ctpipe::detail::ix(w.processes), 0.0);
    tokens_.assign(losses(), 0);
  }
  void release() noexcept {
    if (s_.broken()) return;  // MPI may still write the pinned slots: they are left allocated
    for (fifo& f : fifos_) {
      for (char* h : f.host) (void)Cuda::host_free(h);
      for (event_type e : f.copied) (void)Cuda::event_destroy(e);
      f.host.clear();
      f.copied.clear();
    }
    if (loss_stage_) (void)Cuda::host_free(loss_stage_);
    if (gradient_stage_) (void)Cuda::host_free(gradient_stage_);
    if (term_stage_) (void)Cuda::host_free(term_stage_);
    if (summed_device_) (void)Cuda::free(summed_device_, device_);
    loss_stage_ = term_stage_ = summed_device_ = nullptr;
    gradient_stage_ = nullptr;
  }

  session& s_;
  int microbatches_;
  std::span<const ctpipe::cuda::detail::fifo_end> ends_;  // (the staging's constant)
  int device_;
  std::vector<std::size_t> bytes_;
  std::size_t gradient_bytes_;
  std::size_t terms_words_;
  std::vector<fifo> fifos_;
  double* loss_stage_ = nullptr;
  double* term_stage_ = nullptr;     // pinned: a device optimizer's terms
  double* summed_device_ = nullptr;  // device: the terms summed over every process
  void* gradient_stage_ = nullptr;
  std::vector<std::byte> group_stage_;  // a shared group's gather: this process's part, then every holder's
  stream_type sums_stream_{};
  // The global batch's losses, the extents' sums (two words per microbatch of it), a device
  // optimizer's terms, then a status per process (session::agree).
  std::vector<double> sums_;
  std::vector<int> tokens_;                  // the global batch's tokens (a step with extents)
  std::unique_ptr<step_recorder> recorder_;  // record_steps: made once, kept
};

/// The staging of rank `Rank` of the FIFO layout `Fifos`: the run-time half (staging_core), and
/// each message's calls, which the engine's tasks make with their FIFO as a constant.
template <class Cuda, int Rank, auto Fifos>
class staging : public staging_core<Cuda> {
  using core = staging_core<Cuda>;

 public:
  static constexpr int rank = Rank;
  using tag = device_executor_tag;      // (session.hpp)
  static constexpr auto fifos = Fifos;  // (cuda/detail/process_mode.hpp: fifo_layout)
  static constexpr int microbatches = Fifos.microbatches;
  using typename core::stream_type;

  // `fifo_bytes[2e + d]`: the bytes of a message of edge e's direction d (process_mode's
  // fifo_bytes); `gradient_bytes`: the largest layer's gradients of this rank (for the sums).
  staging(session& s, int device, std::vector<std::size_t> fifo_bytes, std::size_t gradient_bytes,
          std::size_t norm_words = 0)
      : core(shape, s, device, std::move(fifo_bytes), gradient_bytes, norm_words) {}

  template <int B, int Dir>
  void post_receive(int n, void* slot, std::size_t bytes) {
    this->post_receive_on(ctpipe::detail::ix(2 * B + Dir), n, slot, bytes);
  }
  template <int B, int Dir>
  void receive(int n, stream_type s) {
    this->receive_on(ctpipe::detail::ix(2 * B + Dir), n, s);
  }
  template <int B, int Dir>
  void consumed(int, stream_type) {}
  template <int B, int Dir>
  void send(int n, const void* source, std::size_t bytes, stream_type s) {
    this->send_on(ctpipe::detail::ix(2 * B + Dir), n, source, bytes, s);
  }
  template <int B, int Dir>
  void before_overwrite(int, stream_type) {}      // the copy to the host is on the rank's stream
  static constexpr bool sends_read_late = false;  // (the same: a send has read its buffer when the stream moves on)

 private:
  static constexpr auto ends = ctpipe::cuda::detail::make_fifo_ends<Rank, Fifos>();
  static constexpr staging_shape shape{microbatches, ends};
};

}  // namespace ctpipe::mpi::detail
