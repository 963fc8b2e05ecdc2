// The NCCL executor's transport, the half that needs neither its rank nor its table at compile
// time (nccl/detail/transport.hpp holds the other): the links' streams and events, the step's
// start and end (the losses, every process's status, the extents' sums), the wait within the
// timeout, the replicas' and shared groups' sums, the first exchange. What it needs of the table
// it reads at run time (transport_shape), so a program compiles it once per backend, not once per
// rank of every executor: the ranks' engines of one process-mode executor all share it.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ctpipe/cuda/detail/fifo_ends.hpp>
#include <ctpipe/cuda/detail/update_hook.hpp>  // process_sums, throw_updates_differ
#include <ctpipe/detail/acquire.hpp>
#include <ctpipe/detail/index.hpp>
#include <ctpipe/exec/detail/extents.hpp>  // put_extent_sums, check_extent_sums
#include <ctpipe/exec/failure.hpp>         // peer_failure
#include <ctpipe/nccl/detail/hang.hpp>
#include <ctpipe/nccl/detail/links.hpp>
#include <ctpipe/nccl/detail/shape.hpp>  // executor_tag, transport_shape
#include <ctpipe/nccl/errors.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::nccl::detail {

template <class Cuda, class Net>
class transport_core {
 public:
  using stream_type = typename Cuda::stream_type;
  using event_type = typename Cuda::event_type;
  using comm_type = typename Net::comm_type;
  using links_type = links<Cuda, Net>;

  // `comms[2b + d]`: FIFO (b, d)'s communicator where this rank is one of its ends (of this
  // replica), then one per shared group of layers (ctpipe::shared_with): the processes of this
  // replica whose ranks hold its members, where there are several (else null); `world`: every process, for the losses;
  // `peers`: the D replicas of this rank, for the gradient sums (with D > 1). This process's losses go to the global
  // batch's replica `replica`. `timeout`: how long wait() waits for a step before it gives up.
  // `norm_words`: the words of a device optimizer's terms (cuda/detail/update_hook.hpp), summed
  // with every step's losses whether or not one is attached (every process sums as many).
  transport_core(const transport_shape& shape, int device, std::vector<comm_type> comms, comm_type world,
                 comm_type peers, int process, int processes, int replicas, int replica,
                 std::chrono::milliseconds timeout, std::size_t norm_words)
      : l_(std::make_shared<links_type>(device, std::move(comms), world, peers, process, processes, replicas, replica,
                                        timeout)),
        rank_(shape.rank),
        edges_(shape.edges),
        microbatches_(shape.microbatches),
        stages_(shape.stages),
        ends_(shape.ends),
        device_(device),
        process_(process),
        processes_(processes),
        replicas_(replicas),
        replica_(replica),
        terms_words_(norm_words) {
    ctpipe::detail::acquire_or_release(
        [this] {
          make_links();
          acquire();
        },
        [this] { release(); });
  }
  /// A forward-only pass's transport: on the links of the training step's (`shared`, whose FIFOs
  /// must be this table's: the same edges between the same ranks, as a forward-only table of the
  /// same stages has), with buffers of its own.
  transport_core(const transport_shape& shape, std::shared_ptr<links_type> shared)
      : l_(std::move(shared)),
        rank_(shape.rank),
        edges_(shape.edges),
        microbatches_(shape.microbatches),
        stages_(shape.stages),
        ends_(shape.ends),
        device_(l_->device),
        process_(l_->process),
        processes_(l_->processes),
        replicas_(l_->replicas),
        replica_(l_->replica) {
    ctpipe::detail::acquire_or_release(
        [this] {
          check_links();
          acquire();
        },
        [this] { release(); });
  }
  transport_core(const transport_core&) = delete;
  transport_core& operator=(const transport_core&) = delete;
  ~transport_core() { release(); }

  /// What a forward-only pass's transport shares with this one.
  const std::shared_ptr<links_type>& shared_links() const noexcept { return l_; }

  int device() const noexcept { return device_; }
  /// How many losses a step gives: the global batch's.
  std::size_t losses() const noexcept { return ix(microbatches_ * replicas_); }
  // The index of this replica's microbatch 0 in the global batch (the layers' context).
  int first_microbatch() const noexcept { return microbatches_ * replica_; }

  void check_usable() const {
    if (l_->broken)
      throw std::logic_error(
          "ctpipe::nccl::executor::step: an earlier step timed out and the communicators were aborted; end the "
          "program");
  }
  // A task of this process failed: the others learn it from the step's statuses (end_step).
  void failed(int, task, std::exception_ptr e) noexcept {
    l_->record.write(ctpipe::detail::hang_event::failure, ctpipe::detail::describe_exception(e));
  }
  // Task `position` of the rank's program is being issued: where the MPI device path's hang
  // report tracks the host; the NCCL executor writes no hang report yet (docs/hang_report.md).
  void enter(int position) noexcept { l_->record.enter(position); }
  // ... and has been issued on `s` (the hang report's progress: nccl/detail/hang.hpp).
  void entered(int position, stream_type s) {
    if (l_->record.on()) progress_.after(position, s);
  }
  void begin_step(stream_type origin) {
    l_->record.begin_step(terms_words_ == 0 ? 1 : 0);  // (a forward pass's sums no optimizer terms)
    progress_.begin_step();
    std::fill(posted_.begin(), posted_.end(), 0);
    std::fill(sent_.begin(), sent_.end(), 0);
    links_type& k = *l_;
    cuda(Cuda::record(k.fork, origin), "cudaEventRecord", "starting the step");
    for (fifo& f : k.fifos)
      if (f.stream_made) cuda(Cuda::wait(f.stream, k.fork), "cudaStreamWaitEvent", "starting the step");
    if (k.sums.stream_made) cuda(Cuda::wait(k.sums.stream, k.fork), "cudaStreamWaitEvent", "starting the step");
  }

  // Data parallelism: stage `stage`'s gradients are final once `s` gets where it is now; the sums
  // that follow (sum()) start then, on a stream of their own, overlapped with the rest of the step.
  void sums_after(int stage, stream_type s) {
    event_type e = l_->sums.done[ix(stage)];
    cuda(Cuda::record(e, s), "cudaEventRecord", "summing a stage's gradients across the replicas");
    cuda(Cuda::wait(l_->sums.stream, e), "cudaStreamWaitEvent", "summing a stage's gradients across the replicas");
  }
  template <class T>
  void sum(T* gradients, std::size_t count) {
    net(Net::all_reduce_sum(gradients, count, l_->peers, l_->sums.stream), "ncclAllReduce",
        "summing a layer's gradients across the replicas");
  }
  bool sums_replicas() const noexcept { return replicas_ > 1; }
  // A bidirectional table (dualpipe): `count` gradients summed with the pair process's copy of
  // them, over group g's communicator (an all-reduce of two: the same bits on both), on the sums'
  // stream.
  template <class T>
  void sum_pair(int g, T* gradients, std::size_t count) {
    net(Net::all_reduce_sum(gradients, count, group_comm(g), l_->sums.stream), "ncclAllReduce",
        "adding the gradients of a stage's two copies (dualpipe)");
  }
  // Shared groups are summed as soon as a rank's members are final, on the sums' stream.
  static constexpr bool groups_at_end = false;

  // Shared groups (the engine sums them, cuda/detail/engine.hpp): group g's communicator, null
  // where this rank holds all its members or none.
  comm_type group_comm(int g) const {
    const std::size_t k = ix(2 * edges_ + g);
    return k < l_->comms.size() ? l_->comms[k] : comm_type{};
  }
  // The stream of the sums (the replicas' and the groups'): what is issued on it next waits for
  // `s` to get where it is now (group g's members are final there).
  stream_type sums_stream() const noexcept { return l_->sums.stream; }
  void group_after(int g, stream_type s) {
    event_type e = l_->sums.done[ix(stages_) + ix(g)];
    cuda(Cuda::record(e, s), "cudaEventRecord", "summing a shared group's gradients");
    cuda(Cuda::wait(l_->sums.stream, e), "cudaStreamWaitEvent", "summing a shared group's gradients");
  }
  // On the sums' stream: every holder's `bytes` of `send`, into `recv` in rank order.
  void gather(int g, const void* send, void* recv, std::size_t bytes) {
    net(Net::all_gather(send, recv, bytes, group_comm(g), l_->sums.stream), "ncclAllGather",
        "gathering a shared group's members from the ranks that hold them");
  }
  // Every FIFO's stream, and the sums', joined into `origin`: every message and sum of the step
  // is done there.
  void join_streams(stream_type origin) {
    for (fifo* f : l_->streams())
      if (f->stream_made) {
        cuda(Cuda::record(f->join, f->stream), "cudaEventRecord", "ending the step");
        cuda(Cuda::wait(origin, f->join), "cudaStreamWaitEvent", "ending the step");
      }
  }
  // After join_streams: sums the global batch's losses over the world (`losses`: this process's
  // microbatches_ on the rank with the last stage, nullptr elsewhere) with every process's status
  // (`failed`: the task of this process that failed, if one did), in a model with token-major
  // tensors its extents (exec/detail/extents.hpp: put_extent_sums), and a device optimizer's terms
  // (`terms`: norm_words in device memory, or null: zeros), and copies them to `host`, statuses()
  // and the extents' sums (check_extents()); the terms stay in device memory (summed()).
  void end_step(stream_type origin, const void* losses, double* host, const task* failed, std::span<const int> extents,
                const double* terms) {
    const std::size_t part = sizeof(double) * ctpipe::detail::ix(microbatches_);
    const std::size_t all = part * ctpipe::detail::ix(replicas_);
    const std::size_t status = sizeof(double) * status_words * ix(processes_);
    const std::size_t sums = sizeof(double) * extent_words();
    const std::size_t norm = sizeof(double) * terms_words_;
    cuda(Cuda::memset_async(losses_, all + status + sums + norm, origin), "cudaMemsetAsync", "gathering the losses");
    if (terms != nullptr && norm > 0)
      cuda(Cuda::memcpy_async(summed_terms(), device_, terms, device_, norm, origin), "cudaMemcpyAsync",
           "summing the device optimizer's terms");
    if (!extents.empty())  // (staged in device memory before the step: stage_extents)
      cuda(Cuda::memcpy_async(static_cast<char*>(losses_) + all + status + sums / ix(replicas_) * ix(replica_), device_,
                              extent_device(), device_, sums / ix(replicas_), origin),
           "cudaMemcpyAsync", "checking that every process gave the same extents");
    if (failed) {  // a hollow step runs eagerly: the staging buffer is read now
      double* me = status_staging_;
      me[0] = 1.0;
      me[1] = rank_;
      me[2] = replica_;
      me[3] = failed->stage;
      me[4] = failed->microbatch;
      me[5] = static_cast<double>(failed->op);
      cuda(Cuda::copy_to_device_async(static_cast<char*>(losses_) + all + sizeof(double) * status_words * ix(process_),
                                      me, sizeof(double) * status_words, origin),
           "cudaMemcpyAsync", "telling every process of a failure");
    }
    if (losses)
      cuda(Cuda::memcpy_async(static_cast<char*>(losses_) + part * ctpipe::detail::ix(replica_), device_, losses,
                              device_, part, origin),
           "cudaMemcpyAsync", "gathering the losses");
    net(Net::all_reduce_sum(static_cast<double*>(losses_), (all + status + sums + norm) / sizeof(double), l_->world,
                            origin),
        "ncclAllReduce", "summing the global batch's losses and every process's status");
    cuda(Cuda::copy_to_host_async(host, losses_, all, origin), "cudaMemcpyAsync", "copying the losses to the host");
    cuda(Cuda::copy_to_host_async(statuses_, static_cast<char*>(losses_) + all, status, origin), "cudaMemcpyAsync",
         "copying every process's status to the host");
    if (!extents.empty())
      cuda(Cuda::copy_to_host_async(extent_host_ + extent_words() / ix(replicas_),
                                    static_cast<char*>(losses_) + all + status, sums, origin),
           "cudaMemcpyAsync", "copying the extents' sums to the host");
    if (norm > 0)  // (the count of processes with an optimizer attached: check_updates)
      cuda(Cuda::copy_to_host_async(statuses_ + status_words * (ix(processes_) + 1), summed_terms() + terms_words_ - 1,
                                    sizeof(double), origin),
           "cudaMemcpyAsync", "copying the device optimizers' count to the host");
  }
  /// After end_step, on its stream: every process's terms and statuses, summed (a device
  /// optimizer's decision reads them).
  ctpipe::cuda::detail::process_sums summed() const noexcept {
    return {summed_terms(), static_cast<const double*>(losses_) + ix(microbatches_ * replicas_), ix(processes_),
            status_words};
  }
  /// After wait() and check_step(): std::logic_error where some processes had a device optimizer
  /// attached to their executor and others not (`mine`: this one has); the update was skipped on
  /// every process then.
  void check_updates(bool mine) const {
    if (terms_words_ == 0) return;
    const double n = statuses_[status_words * (ix(processes_) + 1)];
    if (n != 0.0 && n != static_cast<double>(processes_))
      ctpipe::cuda::detail::throw_updates_differ(executor_tag::name, rank_, replica_, process_, static_cast<int>(n),
                                                 processes_, mine);
  }
  // Before each step of a model with token-major tensors (a graph's replay too: outside any
  // capture), on `origin`: this process's extents' words (put_extent_sums) into device memory,
  // where end_step takes them. The pinned words are written again only once the last step's copy
  // has read them.
  void stage_extents(std::span<const int> extents, stream_type origin) {
    if (extents_pending_)
      cuda(Cuda::event_synchronize(extents_copied_), "cudaEventSynchronize", "staging the step's extents");
    ctpipe::detail::put_extent_sums(extents, extent_host_);
    cuda(Cuda::copy_to_device_async(extent_device(), extent_host_, sizeof(double) * extent_words() / ix(replicas_),
                                    origin),
         "cudaMemcpyAsync", "staging the step's extents");
    cuda(Cuda::record(extents_copied_, origin), "cudaEventRecord", "staging the step's extents");
    extents_pending_ = true;
  }
  // After a step with extents (`mine`, this process's), once it has ended: the first of this
  // replica's microbatches_ whose extent the processes of the replica did not all give alike, or -1;
  // tokens() then holds the global batch's tokens.
  int check_extents(std::span<const int> mine) {
    extents_pending_ = false;  // (the step has ended: its copies are done)
    const std::size_t n = extent_words();
    return ctpipe::detail::check_extent_sums({extent_host_ + n / ix(replicas_), n}, mine, replica_,
                                             processes_ / replicas_, tokens_);
  }
  /// The global batch's tokens of the last step with extents (check_extents).
  std::span<const int> tokens() const noexcept { return tokens_; }

  /// Waits for the step's end on `origin`, up to the timeout; then aborts the communicators and
  /// throws timeout_error.
  void wait(stream_type origin) {
    const auto start = std::chrono::steady_clock::now();
    const long since = l_->record.on() ? ctpipe::detail::hang_record::unix_ms() : 0;  // (the hang report's)
    for (std::uint32_t i = 0;; ++i) {
      const typename Cuda::status q = Cuda::query(origin);
      if (Cuda::ok(q)) return;
      if (!Cuda::not_ready(q)) cuda(q, "cudaStreamQuery", "waiting for the step");
      if (i >= 1024) std::this_thread::yield();
      if ((i & 255) == 0 && std::chrono::steady_clock::now() - start > l_->timeout) {
        const std::string text = "ctpipe::nccl::executor: rank " + std::to_string(rank_) + ", replica " +
                                 std::to_string(replica_) + " (process " + std::to_string(process_) +
                                 "): the step did not end within " + std::to_string(l_->timeout.count()) +
                                 " ms (options::timeout): a peer died or hangs; the executor's communicators are "
                                 "aborted";
        if (l_->record.on())  // (where this process's GPU stopped, before the abort moves it on)
          progress_.report_timeout(l_->record, place_of(process_, processes_ / replicas_, replicas_), since, text);
        l_->abort();
        throw timeout_error(text);
      }
    }
  }
  /// After a step: `status_words` doubles per process, in process order: 1 where its task failed,
  /// then its rank, replica, stage, microbatch and op.
  static constexpr std::size_t status_words = 6;
  const double* statuses() const noexcept { return statuses_; }
  int processes() const noexcept { return processes_; }
  bool broken() const noexcept { return l_->broken; }

  /// After wait(): this process's own task failure (`mine`, if a task failed), else a peer_failure
  /// for the first process whose status says one of its tasks failed.
  void check_step(std::exception_ptr mine) const {
    int failed = -1;
    for (int q = 0; q < processes_ && failed < 0; ++q)
      if (statuses_[status_words * ix(q)] != 0.0) failed = q;
    if (mine || failed < 0) {
      l_->record.end_step(!mine);
      if (mine) std::rethrow_exception(mine);
      return;
    }
    const double* x = statuses_ + status_words * ix(failed);
    const peer_failure f(
        executor_tag::name, failed, static_cast<int>(x[1]), static_cast<int>(x[2]),
        task{static_cast<op_kind>(static_cast<int>(x[5])), static_cast<int>(x[3]), static_cast<int>(x[4]), -1},
        "the failed process's own task_failure gives the layer's message");
    l_->record.write(ctpipe::detail::hang_event::stopped, f.what());
    l_->record.end_step(false);
    throw f;
  }

  // Before the first capture: one send or receive on every FIFO and an all-reduce of the world,
  // issued eagerly, so that NCCL has connected every peer (it connects at a peer's first call,
  // which a graph capture cannot contain). The step's own ops follow them on the same streams.
  void exchange_once(stream_type origin) {
    links_type& l = *l_;
    for (std::size_t k = 0; k < l.fifos.size(); ++k) {
      fifo& f = l.fifos[k];
      if (!f.stream_made) continue;
      if (ends_[k].sends)
        net(Net::send(scratch(k), sizeof(double), 1, f.comm, f.stream), "ncclSend", "connecting: " + f.what);
      else
        net(Net::recv(scratch(k), sizeof(double), 0, f.comm, f.stream), "ncclRecv", "connecting: " + f.what);
    }
    net(Net::all_reduce_sum(static_cast<double*>(losses_), 1, l.world, origin), "ncclAllReduce",
        "connecting every process");
    if (replicas_ > 1)
      net(Net::all_reduce_sum(scratch(l.fifos.size()), 1, l.peers, l.sums.stream), "ncclAllReduce",
          "connecting the replicas");
    for (std::size_t k = l.fifos.size(); k < l.comms.size(); ++k)
      if (l.comms[k])
        net(Net::all_reduce_sum(scratch(l.fifos.size()), 1, l.comms[k], l.sums.stream), "ncclAllReduce",
            "connecting the ranks of a shared group");
  }

  // Between steps (ctpipe::optimizer): each of `terms` summed over every process, through a device
  // buffer of their own (made at the first call) and an ncclAllReduce of the world on `origin`,
  // waited for within the timeout.
  void sum_terms(std::span<double> terms, stream_type origin) {
    check_usable();
    const std::size_t bytes = terms.size_bytes();
    if (terms.size() > terms_count_) {
      if (terms_) (void)Cuda::free(terms_, device_);
      terms_ = nullptr;
      terms_count_ = 0;
      void* p = nullptr;
      cuda(Cuda::malloc(&p, bytes, device_), "cudaMalloc", "the gradient norm's terms");
      terms_ = static_cast<double*>(p);
      terms_count_ = terms.size();
    }
    cuda(Cuda::copy_to_device_async(terms_, terms.data(), bytes, origin), "cudaMemcpyAsync",
         "the gradient norm's terms");
    net(Net::all_reduce_sum(terms_, terms.size(), l_->world, origin), "ncclAllReduce",
        "summing the gradient norm's terms over every process (ctpipe::optimizer::step)");
    cuda(Cuda::copy_to_host_async(terms.data(), terms_, bytes, origin), "cudaMemcpyAsync", "the gradient norm's terms");
    wait(origin);
  }

  // predict's outputs, after a forward-only pass (collective over every process, which make their
  // forward pass at the same call): a communicator of this replica's processes, by rank.
  void make_replica_comm() {
    if (l_->replica_comm) return;
    comm_type c{};
    net(Net::split(l_->world, replica_, rank_, &c), "ncclCommSplit",
        "making the communicator of a replica's processes");
    l_->replica_comm = c;
  }
  // On `origin`: `bytes` at `buffer` from the process of this replica that runs rank `root`, into
  // `buffer` on every other process of the replica.
  void broadcast_in_replica(void* buffer, std::size_t bytes, int root, stream_type origin) {
    net(Net::broadcast(buffer, bytes, root, l_->replica_comm, origin), "ncclBroadcast",
        "giving predict()'s outputs to every process of the replica");
  }

  void synchronize() noexcept { l_->synchronize(); }

 protected:
  static constexpr std::size_t ix(int i) { return ctpipe::detail::ix(i); }

  // Message n of FIFO k into `slot`, on the FIFO's stream, once message n - capacity has been
  // consumed there.
  void post_receive_on(std::size_t k, int capacity, int n, void* slot, std::size_t bytes) {
    fifo& f = l_->fifos[k];
    int& posted = posted_[k];
    if (n < posted) return;  // posted already (a hollow step repeats what a failed task did)
    posted = n + 1;
    if (n >= capacity) cuda(Cuda::wait(f.stream, f.consumed[ix(n - capacity)]), "cudaStreamWaitEvent", f.what);
    net(Net::recv(slot, bytes, 0, f.comm, f.stream), "ncclRecv", f.what);
    cuda(Cuda::record(f.done[ix(n)], f.stream), "cudaEventRecord", f.what);
  }
  // The consumer of message n of FIFO k, about to be issued on `s`, waits for its receive.
  void receive_on(std::size_t k, int n, stream_type s) {
    fifo& f = l_->fifos[k];
    cuda(Cuda::wait(s, f.done[ix(n)]), "cudaStreamWaitEvent", f.what);
  }
  // Message n's consumer has been issued on `s`: its slot is free once `s` gets there.
  void consumed_on(std::size_t k, int capacity, int n, stream_type s) {
    fifo& f = l_->fifos[k];
    if (n + capacity < microbatches_) cuda(Cuda::record(f.consumed[ix(n)], s), "cudaEventRecord", f.what);
  }
  // Message n of FIFO k, produced on `s` at `source`.
  void send_on(std::size_t k, int n, const void* source, std::size_t bytes, stream_type s) {
    fifo& f = l_->fifos[k];
    cuda(Cuda::record(f.consumed[ix(n)], s), "cudaEventRecord", f.what);  // on a sending FIFO: "produced"
    cuda(Cuda::wait(f.stream, f.consumed[ix(n)]), "cudaStreamWaitEvent", f.what);
    net(Net::send(source, bytes, 1, f.comm, f.stream), "ncclSend", f.what);
    cuda(Cuda::record(f.done[ix(n)], f.stream), "cudaEventRecord", f.what);
    sent_[k] = n + 1;
  }
  // Message n is about to be written on `s` where message n - 1 was: wait for that one's send.
  void before_overwrite_on(std::size_t k, int n, stream_type s) {
    if (n > 0) {
      fifo& f = l_->fifos[k];
      cuda(Cuda::wait(s, f.done[ix(n - 1)]), "cudaStreamWaitEvent", f.what);
    }
  }
  // Forward only: a stash slot that FIFO k's sends read from is about to be written on `s` (by
  // the stage's next F; its slot's last occupant went out on this FIFO, if anything did): wait for
  // the last send issued on it so far, and so for every one before it (one stream runs them in
  // order). A send's stream reads its buffer when the receiver is ready, after the call returns.
  void before_reuse_on(std::size_t k, stream_type s) {
    if (const int n = sent_[k]; n > 0) {
      fifo& f = l_->fifos[k];
      cuda(Cuda::wait(s, f.done[ix(n - 1)]), "cudaStreamWaitEvent", f.what);
    }
  }

  using fifo = typename links_type::fifo;
  double* scratch(std::size_t k) const { return summed_terms() + terms_words_ + k; }
  // The device optimizers' terms, after the extents' sums.
  double* summed_terms() const {
    return static_cast<double*>(losses_) + ix(microbatches_ * replicas_) + status_words * ix(processes_) +
           extent_words();
  }
  // The extents' sums: two words per microbatch of the global batch (exec/detail/extents.hpp).
  std::size_t extent_words() const noexcept { return 2 * ix(microbatches_ * replicas_); }
  // This process's extents' words, staged in device memory (after the FIFOs' words).
  double* extent_device() const { return scratch(ix(2 * edges_) + 1); }

  void cuda(typename Cuda::status s, const char* call, const std::string& context) const {
    if (!Cuda::ok(s)) [[unlikely]]
      throw error(call, Cuda::describe(s), context);
  }
  void net(typename Net::status s, const char* call, const std::string& context) const {
    if (!Net::ok(s)) [[unlikely]]
      throw error(call, Net::describe(s), context);
  }

  // The links' FIFOs and sums' stream (the training step's transport makes them).
  void make_links() {
    links_type& l = *l_;
    l.microbatches = microbatches_;
    l.fifos.resize(ix(2 * edges_));
    cuda(Cuda::event_create(&l.fork, device_), "cudaEventCreateWithFlags", "construction");
    l.fork_made = true;
    for (std::size_t k = 0; k < ends_.size(); ++k) {
      const fifo_end& end = ends_[k];
      if (!end.here) continue;
      fifo& f = l.fifos[k];
      f.what = std::string(end.sends ? "sending " : "receiving ") + (k % 2 == 0 ? "the activations" : "the gradients") +
               " across stages " + std::to_string(end.producer) + " and " + std::to_string(end.consumer) + " (rank " +
               std::to_string(end.peer) + ")";
      f.comm = l.comms.at(k);
      cuda(Cuda::stream_create(&f.stream, device_), "cudaStreamCreateWithFlags", "construction: " + f.what);
      f.stream_made = true;
      cuda(Cuda::event_create(&f.join, device_), "cudaEventCreateWithFlags", "construction");
      f.join_made = true;
      for (auto* v : {&f.done, &f.consumed})
        for (int n = 0; n < microbatches_; ++n) {
          event_type x{};
          cuda(Cuda::event_create(&x, device_), "cudaEventCreateWithFlags", "construction");
          v->push_back(x);
        }
    }
    const std::size_t groups = l.comms.size() > ix(2 * edges_) ? l.comms.size() - ix(2 * edges_) : 0;
    if (replicas_ > 1 || groups > 0) {
      l.sums.what = "summing gradients across the replicas and the ranks of shared groups";
      cuda(Cuda::stream_create(&l.sums.stream, device_), "cudaStreamCreateWithFlags", "construction: " + l.sums.what);
      l.sums.stream_made = true;
      cuda(Cuda::event_create(&l.sums.join, device_), "cudaEventCreateWithFlags", "construction");
      l.sums.join_made = true;
      for (std::size_t s = 0; s < ix(stages_) + groups; ++s) {  // one per stage, one per group
        event_type x{};
        cuda(Cuda::event_create(&x, device_), "cudaEventCreateWithFlags", "construction");
        l.sums.done.push_back(x);
      }
    }
  }
  // A forward pass's transport: every FIFO of this rank that its table's sends use is one of the
  // links', with an event for each of its messages.
  void check_links() const {
    const links_type& l = *l_;
    bool fits = l.microbatches == microbatches_ && l.fifos.size() == ix(2 * edges_);
    for (std::size_t k = 0; fits && k < ends_.size(); k += 2)
      if (ends_[k].here) fits = l.fifos[k].stream_made;
    if (!fits)
      throw std::logic_error(std::string(executor_tag::name) +
                             ": a forward-only pass's FIFOs are not the training step's (the same edges between the "
                             "same ranks, and microbatches_)");
  }

  // This transport's own buffers.
  void acquire() {
    posted_.assign(ix(2 * edges_), 0);
    sent_.assign(ix(2 * edges_), 0);
    // The global batch's losses, every process's status, the extents' sums, the device optimizers'
    // terms, a word per FIFO (and one for the replicas) for exchange_once, then this process's
    // extents' words.
    void* p = nullptr;
    cuda(Cuda::malloc(&p,
                      sizeof(double) * (ix(microbatches_ * replicas_) + status_words * ix(processes_) + extent_words() +
                                        terms_words_ + ix(2 * edges_) + 1 + 2 * ix(microbatches_)),
                      device_),
         "cudaMalloc", "construction: the losses");
    losses_ = p;
    void* x = nullptr;  // this process's extents' words (staged), then the job's sums
    cuda(Cuda::host_malloc(&x, sizeof(double) * (extent_words() / ix(replicas_) + extent_words())), "cudaMallocHost",
         "construction: the extents' sums");
    extent_host_ = static_cast<double*>(x);
    cuda(Cuda::event_create(&extents_copied_, device_), "cudaEventCreateWithFlags", "construction");
    extents_event_made_ = true;
    tokens_.assign(losses(), 0);
    void* h = nullptr;
    cuda(Cuda::host_malloc(&h, sizeof(double) * (status_words * (ix(processes_) + 1) + 1)), "cudaMallocHost",
         "construction: the statuses");
    statuses_ = static_cast<double*>(h);
    status_staging_ = statuses_ + status_words * ix(processes_);
    for (std::size_t i = 0; i < status_words * (ix(processes_) + 1) + 1; ++i) statuses_[i] = 0.0;
  }
  void release() noexcept {
    if (l_->broken) return;  // aborted: NCCL may still write the buffers; they are left allocated
    l_->synchronize();
    if (losses_) (void)Cuda::free(losses_, device_);
    losses_ = nullptr;
    if (statuses_) (void)Cuda::host_free(statuses_);
    statuses_ = status_staging_ = nullptr;
    if (extent_host_) (void)Cuda::host_free(extent_host_);
    extent_host_ = nullptr;
    if (extents_event_made_) (void)Cuda::event_destroy(extents_copied_);
    extents_event_made_ = extents_pending_ = false;
    if (terms_) (void)Cuda::free(terms_, device_);
    terms_ = nullptr;
    terms_count_ = 0;
  }

  std::shared_ptr<links_type> l_;
  device_progress<Cuda> progress_{l_->device};  // the hang report's: where this rank's GPU stands
  int rank_, edges_, microbatches_, stages_;
  std::span<const fifo_end> ends_;  // each FIFO's end on this rank (the transport's constant)
  int device_;
  int process_, processes_, replicas_, replica_;
  std::size_t terms_words_ = 0;       // a device optimizer's terms (norm_words; 0: a forward pass's)
  std::vector<int> posted_, sent_;    // per FIFO: receives posted and messages sent this step
  double* statuses_ = nullptr;        // host: every process's status after a step, then this one's
                                      // staged, then the count of device optimizers
  double* status_staging_ = nullptr;  // host: this process's, for a failed step
  void* losses_ = nullptr;
  double* terms_ = nullptr;  // device: the gradient norm's terms (sum_terms)
  std::size_t terms_count_ = 0;
  double* extent_host_ = nullptr;  // pinned: this process's extents' words, then the job's sums
  event_type extents_copied_{};
  bool extents_event_made_ = false, extents_pending_ = false;
  std::vector<int> tokens_;
};

}  // namespace ctpipe::nccl::detail
