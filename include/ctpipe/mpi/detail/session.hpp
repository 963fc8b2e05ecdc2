// The MPI executor's part that does not depend on the table: its communicators, bounded waits,
// failure notices and the agreement that ends every step. One per executor; its rank's engine
// calls it.
//
// Communicators, each a duplicate of (or split from) the user's, with errors returned, not fatal:
//  - data: the pipeline's hand-offs (tag 2b: activations across boundary b, 2b + 1: gradients), and
//    the step's end (one all-reduce that sums the global batch's losses and every process's status);
//  - replicas: the D copies of this process's pipeline rank, for the gradient sums;
//  - control: failure notices, one from a failing process to every other.
// After a failed step the data and replicas communicators are replaced by fresh duplicates, so that
// nothing left unmatched by the failed step (a send, a reduction) can match the next one.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/lazy_text.hpp>
#include <ctpipe/exec/detail/hang_record.hpp>
#include <ctpipe/exec/detail/host_compute.hpp>  // aborted
#include <ctpipe/exec/detail/requirements.hpp>  // layer_kind
#include <ctpipe/exec/failure.hpp>
#include <ctpipe/model/context.hpp>  // step_origin
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi::detail {

/// The MPI executor, for the rules it keeps (executor_requirements) and its messages: host layers,
/// tensors sent between processes as bytes.
struct executor_tag {
  static constexpr std::string_view name = "ctpipe::mpi::executor";
  static constexpr ctpipe::detail::layer_kind layers = ctpipe::detail::layer_kind::host;
  static constexpr bool frozen_prefix = true, recompute = true, copies_layers = false, sends_bytes = true,
                        graphs = true, shared_parameters = true, bidirectional = true, mirror_copies = false;
};
/// Its device path (mpi::device_executor): device layers, no frozen prefix or recomputation; its
/// messages are the MPI executor's.
struct device_executor_tag {
  static constexpr std::string_view name = executor_tag::name;
  static constexpr ctpipe::detail::layer_kind layers = ctpipe::detail::layer_kind::device;
  static constexpr bool frozen_prefix = false, recompute = false, copies_layers = false, sends_bytes = false,
                        graphs = true, shared_parameters = true, bidirectional = true, mirror_copies = false;
};
inline constexpr std::string_view name = executor_tag::name;

/// Two MPI tags per stage boundary (activations, gradients) within MPI's guaranteed 32,767.
template <int StageCount>
struct tag_room {
  static_assert(StageCount < 16384, "ctpipe::mpi: at most 16,383 stages (two MPI tags per boundary)");
  static constexpr bool value = true;
};

inline void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  std::string s(name);
  s += ": ";
  s += call;
  s += " failed: ";
  s.append(text, static_cast<std::size_t>(n));
  throw mpi_error(s);
}

// What a failing process tells every other: who failed, in which task, and the message.
struct notice {
  int process = -1, rank = -1, replica = -1, stage = -1, microbatch = -1, op = 0;
  char text[488]{};
};

inline constexpr int notice_tag = 1;

class session {
 public:
  using clock = std::chrono::steady_clock;

  // Collective over `parent`: checks the launch (process count, and every process's fingerprint of
  // its table, stage plan and tensors), then creates the communicators.
  session(MPI_Comm parent, int ranks, const options& o, std::uint64_t fingerprint) : opt_(o) {
    int up = 0;
    MPI_Initialized(&up);
    if (!up) throw launch_error(std::string(name) + ": MPI is not initialised: call MPI_Init before constructing it");
    int process = 0, processes = 0;
    check(MPI_Comm_rank(parent, &process), "MPI_Comm_rank");
    check(MPI_Comm_size(parent, &processes), "MPI_Comm_size");
    const int d = o.replicas > 0 ? o.replicas : processes / ranks;
    if (o.replicas < 0 || d < 1 || processes != ranks * d) {
      std::string s(name);
      s += ": launched as " + std::to_string(processes) + " processes, but the table has " + std::to_string(ranks) +
           " ranks";
      if (o.replicas > 0)
        s +=
            " and options::replicas is " + std::to_string(o.replicas) + ": start " + std::to_string(ranks * o.replicas);
      else
        s += ": start ranks x replicas processes (" + std::to_string(ranks) + ", " + std::to_string(2 * ranks) +
             ", ...)";
      throw launch_error(s);
    }
    if (o.timeout.count() <= 0) throw launch_error(std::string(name) + ": options::timeout must be positive");
    where_ = place_of(process, ranks, d);
    fingerprint ^= o.ordered_sums ? 0x9e3779b97f4a7c15ull : 0;  // every process sums alike
    std::vector<std::uint64_t> all(static_cast<std::size_t>(processes));
    check(MPI_Allgather(&fingerprint, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, parent), "MPI_Allgather");
    std::string odd;
    for (int p = 1; p < processes; ++p)
      if (all[static_cast<std::size_t>(p)] != all[0]) odd += (odd.empty() ? "" : ", ") + std::to_string(p);
    if (!odd.empty())
      throw launch_error(std::string(name) + ": process(es) " + odd +
                         " run another table, stage plan, tensor types or options::ordered_sums than process 0: "
                         "every process must run the same program");
    if (!o.report_dir.empty() || std::getenv("CTPIPE_REPORT_DIR")) open_record(o);
    parent_ = parent;
    make_step_communicators();
    check(MPI_Comm_dup(parent, &control_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    notice_sends_.assign(static_cast<std::size_t>(processes), MPI_REQUEST_NULL);
    post_notice_receive();
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() {
    record_.write(ctpipe::detail::hang_event::exit, "the executor was destroyed");
    int down = 0;
    MPI_Finalized(&down);
    if (down) return;
    if (notice_recv_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&notice_recv_);
      MPI_Wait(&notice_recv_, MPI_STATUS_IGNORE);
    }
    for (MPI_Comm* c : {&data_, &replicas_, &pipeline_, &control_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    for (MPI_Comm& c : groups_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }

  // Collective over every process: one communicator per shared group of layers, of the processes
  // of one replica whose rank holds a member (colors[g]: this process's replica where its rank
  // does, MPI_UNDEFINED where not or where the group needs no message), ordered by pipeline rank.
  // Replaced with the step's other communicators after a failed step.
  void add_groups(std::vector<int> colors) {
    group_colors_ = std::move(colors);
    make_group_communicators();
  }
  MPI_Comm group(std::size_t g) const noexcept { return groups_[g]; }

  const place& where() const noexcept { return where_; }
  /// A wait timed out: requests may still be pending on the executor's buffers.
  bool broken() const noexcept { return broken_; }
  MPI_Comm data() const noexcept { return data_; }
  MPI_Comm replicas() const noexcept { return replicas_; }
  MPI_Comm control() const noexcept { return control_; }  // failure notices (tag 1), the recording's clocks (tag 2)
  bool synchronous_sends() const noexcept { return opt_.synchronous_sends; }
  bool ordered_sums() const noexcept { return opt_.ordered_sums; }
  /// Where this process stands, for the hang report (exec/detail/hang_record.hpp).
  ctpipe::detail::hang_record& record() noexcept { return record_; }

  // `pass`: 0 a training step, 1 a forward-only pass (the hang report's table).
  void begin_step(int pass = 0) {
    if (broken_)
      throw std::logic_error(std::string(name) +
                             "::step: an earlier step timed out, and the processes can no longer agree on a step; "
                             "end the program (MPI_Abort)");
    own_failed_ = false;
    peer_notice_ = {};
    notices_seen_ = 0;
    record_.begin_step(pass);
  }

  // Waits for `r` within options::timeout. In a program (InProgram), a failure notice from another
  // process ends the wait (throws aborted). describe() says what was awaited, for timeout_error.
  // `status`: where the completed request's status goes (a receive's length).
  // (One function per InProgram: describe refers to the caller's lambda, detail/lazy_text.hpp.)
  template <bool InProgram>
  void wait(MPI_Request& r, ctpipe::detail::lazy_text describe, MPI_Status* status = MPI_STATUS_IGNORE) {
    int done = 0;
    check(MPI_Test(&r, &done, status), "MPI_Test");
    if (done) return;
    const clock::time_point start = clock::now();
    for (std::uint32_t i = 1;; ++i) {
      check(MPI_Test(&r, &done, status), "MPI_Test");
      if (done) return;
      if constexpr (InProgram)
        if (poll_notice()) stopped();
      if (i >= spin_polls) std::this_thread::yield();  // the core may be another process's
      if ((i & 255) == 0 && clock::now() - start > opt_.timeout) timed_out(describe);
    }
  }
  // (Out of line, and one each: wait is inlined where each message waits.)
  [[noreturn]] CTPIPE_COLD void stopped() {
    record_.write(ctpipe::detail::hang_event::stopped,
                  "stopped by process " + std::to_string(incoming_.process) +
                      "'s failure: " + std::string(incoming_.text, strnlen(incoming_.text, sizeof(incoming_.text))));
    throw ctpipe::detail::aborted{};
  }
  [[noreturn]] CTPIPE_COLD void timed_out(ctpipe::detail::lazy_text describe) {
    broken_ = true;
    const std::string text = std::string(name) + ": rank " + std::to_string(where_.rank) + ", replica " +
                             std::to_string(where_.replica) + ": " + describe() + ": nothing after " +
                             std::to_string(opt_.timeout.count()) + " ms (options::timeout); a peer died or hangs";
    record_.write(ctpipe::detail::hang_event::timeout, text);
    throw timeout_error(text);
  }

  // Starts the sum of a layer's n gradients (of type t) at g across the replicas: an all-reduce, or
  // with options::ordered_sums a gather into `gathered` on replica 0 (the engine adds them in order).
  void start_replica_sum(void* g, int n, MPI_Datatype t, void* gathered, MPI_Request& r) {
    if (opt_.ordered_sums)
      check(MPI_Igather(g, n, t, gathered, n, t, 0, replicas_, &r), "MPI_Igather");
    else
      check(MPI_Iallreduce(MPI_IN_PLACE, g, n, t, MPI_SUM, replicas_, &r), "MPI_Iallreduce");
  }

  // Collective over every process, between steps: each element of `terms` becomes its sum over
  // the processes (ctpipe::optimizer's per-layer terms of the global gradient norm, each given by one
  // process and zero elsewhere: exact, in any order of addition), within options::timeout.
  void sum_terms(std::span<double> terms) {
    if (broken_)
      throw std::logic_error(std::string(name) +
                             ": an earlier step timed out, and the processes can no longer agree; end the program "
                             "(MPI_Abort)");
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, terms.data(), static_cast<int>(terms.size()), MPI_DOUBLE, MPI_SUM, data_, &r),
          "MPI_Iallreduce");
    wait<false>(r, [] { return std::string("summing the gradient norm's terms (ctpipe::optimizer::step)"); });
  }

  // Collective over the processes of this process's replica, between steps: each byte of `bytes`
  // becomes the bitwise OR of theirs (where one process gives a value and the others zeros: that
  // value, exact), within options::timeout. `what`: the call, for the timeout's message.
  void or_within_replica(std::span<std::byte> bytes, const char* what) {
    if (broken_)
      throw std::logic_error(std::string(name) +
                             ": an earlier step timed out, and the processes can no longer agree; end the program "
                             "(MPI_Abort)");
    constexpr std::size_t most = std::size_t{1} << 30;  // bytes per call: MPI counts in int
    for (std::size_t at = 0; at < bytes.size(); at += most) {
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Iallreduce(MPI_IN_PLACE, bytes.data() + at, static_cast<int>(std::min(most, bytes.size() - at)),
                           MPI_BYTE, MPI_BOR, pipeline_, &r),
            "MPI_Iallreduce");
      wait<false>(r, [what] { return std::string("sharing the outputs (") + what + ")"; });
    }
  }

  // A task of this process failed: record it, and tell every other process (noexcept: it is called
  // on the way out of the task).
  void fail_here(int rank, task t, std::exception_ptr e) noexcept {
    if (own_failed_) return;
    own_failed_ = true;
    own_task_ = t;
    own_cause_ = std::move(e);
    own_notice_ = {where_.process, rank, where_.replica, t.stage, t.microbatch, static_cast<int>(t.op), {}};
    const std::string text = ctpipe::detail::describe_exception(own_cause_);
    std::memcpy(own_notice_.text, text.data(), std::min(text.size(), sizeof(own_notice_.text) - 1));
    record_.write(ctpipe::detail::hang_event::failure, text);
    for (int p = 0; p < where_.processes; ++p)
      if (p != where_.process)
        MPI_Isend(&own_notice_, sizeof(notice), MPI_BYTE, p, notice_tag, control_,
                  &notice_sends_[static_cast<std::size_t>(p)]);
  }
  bool own_failed() const noexcept { return own_failed_; }

  // The step's end, on every process. `sums` holds the global batch's losses (this process's part
  // filled in where it holds the last stage, zeros elsewhere) followed by one status per process;
  // `status` is this process's: 0 done, 1 a task failed here, 2 stopped by a peer's notice. Returns
  // true when every process completed the step.
  bool agree(std::span<double> sums, int status) {
    record_.wait(ctpipe::detail::hang_state::ending_step, -1);
    sums[sums.size() - static_cast<std::size_t>(where_.processes) + static_cast<std::size_t>(where_.process)] = status;
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM, data_, &r),
          "MPI_Iallreduce");
    wait<false>(r, [] { return std::string("waiting for every process to end the step"); });
    failed_.clear();
    for (int p = 0; p < where_.processes; ++p)
      if (sums[sums.size() - static_cast<std::size_t>(where_.processes) + static_cast<std::size_t>(p)] == 1.0)
        failed_.push_back(p);
    return std::none_of(sums.end() - where_.processes, sums.end(), [](double s) { return s != 0.0; });
  }

  // After agree() said a step failed, and the engine has dropped its requests: collects every
  // failing process's notice, replaces the step's communicators, and throws this process's
  // task_failure, or the peer_failure of the failed process first in the communicator.
  [[noreturn]] void recover_and_throw() {
    const auto expected = static_cast<int>(failed_.size()) - (own_failed_ ? 1 : 0);
    while (notices_seen_ < expected) {
      wait<false>(notice_recv_, [] { return std::string("waiting for a failed process's notice"); });
      take_notice();
    }
    for (MPI_Request& r : notice_sends_)
      if (r != MPI_REQUEST_NULL) wait<false>(r, [] { return std::string("telling the other processes of a failure"); });
    // Whatever the failed step left pending on the old communicators stays there: they are not freed.
    make_step_communicators();
    if (own_failed_) throw task_failure(name, where_.rank, own_task_, own_cause_, where_.replica);
    const notice& n = peer_notice_;
    throw peer_failure(name, n.process, n.rank, n.replica, task{static_cast<op_kind>(n.op), n.stage, n.microbatch, -1},
                       std::string(n.text, strnlen(n.text, sizeof(n.text))));
  }

 private:
  static constexpr std::uint32_t spin_polls = 1u << 12;

  // The hang report: options::report_dir, else CTPIPE_REPORT_DIR.
  CTPIPE_COLD void open_record(const options& o) {
    const place& w = where_;
    record_.open(!o.report_dir.empty() ? o.report_dir : std::string(std::getenv("CTPIPE_REPORT_DIR")), w.process,
                 "\"executor\": \"" + std::string(name) + "\", \"process\": " + std::to_string(w.process) +
                     ", \"processes\": " + std::to_string(w.processes) + ", \"rank\": " + std::to_string(w.rank) +
                     ", \"ranks\": " + std::to_string(w.ranks) + ", \"replica\": " + std::to_string(w.replica) +
                     ", \"replicas\": " + std::to_string(w.replicas) +
                     ", \"timeout_ms\": " + std::to_string(o.timeout.count()),
                 name);
  }

  void make_step_communicators() {
    check(MPI_Comm_dup(parent_, &data_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_split(parent_, where_.rank, where_.replica, &replicas_), "MPI_Comm_split");
    check(MPI_Comm_set_errhandler(replicas_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_split(parent_, where_.replica, where_.rank, &pipeline_), "MPI_Comm_split");
    check(MPI_Comm_set_errhandler(pipeline_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    make_group_communicators();
  }
  void make_group_communicators() {
    groups_.assign(group_colors_.size(), MPI_COMM_NULL);
    for (std::size_t g = 0; g < group_colors_.size(); ++g) {
      check(MPI_Comm_split(parent_, group_colors_[g], where_.rank, &groups_[g]), "MPI_Comm_split");
      if (groups_[g] != MPI_COMM_NULL)
        check(MPI_Comm_set_errhandler(groups_[g], MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    }
  }
  void post_notice_receive() {
    check(MPI_Irecv(&incoming_, sizeof(notice), MPI_BYTE, MPI_ANY_SOURCE, notice_tag, control_, &notice_recv_),
          "MPI_Irecv");
  }
  // Keeps the notice of the failed process first in the communicator (so that every process
  // reports the same one), and listens for the next.
  void take_notice() {
    if (peer_notice_.process < 0 || incoming_.process < peer_notice_.process) peer_notice_ = incoming_;
    ++notices_seen_;
    post_notice_receive();
  }
  bool poll_notice() {
    int done = 0;
    check(MPI_Test(&notice_recv_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) take_notice();
    return done != 0;
  }

  options opt_;
  place where_{};
  MPI_Comm parent_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL, replicas_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL;
  MPI_Comm pipeline_ = MPI_COMM_NULL;  // the processes of this replica (predict's outputs)
  std::vector<int> group_colors_;
  std::vector<MPI_Comm> groups_;  // per shared group (ctpipe::shared_with), where this process takes part
  bool broken_ = false;
  // Failures of the current step.
  bool own_failed_ = false;
  task own_task_{};
  std::exception_ptr own_cause_;
  notice own_notice_{}, incoming_{}, peer_notice_{};
  int notices_seen_ = 0;
  MPI_Request notice_recv_ = MPI_REQUEST_NULL;
  std::vector<MPI_Request> notice_sends_;
  std::vector<int> failed_;
  ctpipe::detail::hang_record record_;
};

/// What an MPI executor holds: its session and its process's rank program. After a timeout_error,
/// MPI may still complete a receive into the program's buffers (a late peer's message) or read a
/// send from them: both are then left allocated, never freed.
template <class Program>
struct held {
  std::unique_ptr<mpi::detail::session> session;
  std::unique_ptr<Program> program;
  held() = default;
  held(const held&) = delete;
  held& operator=(const held&) = delete;
  ~held() {
    if (session && session->broken()) {
      (void)program.release();
      (void)session.release();
    }
  }
};

class step_recorder;  // mpi/detail/recorder.hpp

// What the executor holds for its rank: one virtual call per step. (The forward-only pass is made
// and run by the executor's evaluate and predict, through the rank's type: an executor that never
// evaluates compiles none of it.)
template <class Input, class Target, class Output>
struct rank_base {
  virtual ~rank_base() = default;
  virtual std::span<const double> step(std::span<const Input> inputs, std::span<const Target> targets,
                                       const int* extents) = 0;
  virtual std::span<const int> tokens() const = 0;
  virtual std::size_t sent_bytes() const = 0;
  // The origin of replica 0 (this process's own is its replica's microbatches later).
  virtual void set_context_origin(step_origin o) = 0;
  virtual step_origin context_origin() const = 0;
  virtual const step_recorder* recorder() const = 0;  // null until record_steps(true)
};

}  // namespace ctpipe::mpi::detail
