// The NCCL executor's hang report (exec/detail/hang_record.hpp, options::report_dir or
// CTPIPE_REPORT_DIR). Its host issues the whole step and then waits at the step's end, so where
// the host stands says little; where the GPU stands says where the step stopped. With the report
// on, an event follows each task on the rank's stream (made at the first step, kept); when the
// step's wait times out, the first task whose event has not completed is where this process's
// GPU stopped: a receive waits for its peer's send (the peer is named), any other task never
// ended. That goes in the record before the file is written.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <ctpipe/detail/index.hpp>
#include <ctpipe/exec/detail/hang_record.hpp>
#include <ctpipe/exec/grid.hpp>
#include <ctpipe/nccl/errors.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::nccl::detail {

template <class Cuda>
class device_progress {
 public:
  using event_type = typename Cuda::event_type;
  using stream_type = typename Cuda::stream_type;

  explicit device_progress(int device) : device_(device) {}
  device_progress(const device_progress&) = delete;
  device_progress& operator=(const device_progress&) = delete;
  ~device_progress() {
    for (event_type e : events_) (void)Cuda::event_destroy(e);
  }

  void begin_step() noexcept { issued_ = 0; }
  // Task `i` of the rank's program has been issued on `s`.
  void after(int i, stream_type s) {
    const std::size_t k = ctpipe::detail::ix(i);
    while (events_.size() <= k) {
      event_type e{};
      check(Cuda::event_create(&e, device_), "cudaEventCreateWithFlags");
      events_.push_back(e);
    }
    check(Cuda::record(events_[k], s), "cudaEventRecord");
    issued_ = k + 1;
  }
  // The first task issued whose event has not completed; -1 where every one has.
  int first_incomplete() const noexcept {
    for (std::size_t k = 0; k < issued_; ++k)
      if (!Cuda::ok(Cuda::event_query(events_[k]))) return static_cast<int>(k);
    return -1;
  }

  // The step's wait timed out (`since_ms`: when the host began it): where the GPU stopped goes into
  // `rec`, then its file (`text`: the timeout's message).
  void report_timeout(ctpipe::detail::hang_record& rec, const place& w, long since_ms, const std::string& text) const {
    using ctpipe::detail::hang_state;
    const int at = first_incomplete();
    const auto program = rec.running_program();
    if (at < 0 || ctpipe::detail::ix(at) >= program.size()) {
      rec.waited(hang_state::ending_step, -1, since_ms);
    } else {
      rec.enter(at);
      const task& t = program[ctpipe::detail::ix(at)];
      const int peer = t.peer >= 0 ? process_of(t.peer, w.replica, w.replicas) : -1;
      if (is_recv(t.op))
        rec.waited(hang_state::receiving, peer, since_ms);
      else if (is_send(t.op))
        rec.waited(hang_state::sending, peer, since_ms);
      else
        rec.waited(hang_state::task, -1, since_ms);
    }
    rec.write(ctpipe::detail::hang_event::timeout, text);
  }

 private:
  static void check(typename Cuda::status s, const char* call) {
    if (!Cuda::ok(s)) [[unlikely]]
      throw error(call, Cuda::describe(s), "the hang report's progress events");
  }

  int device_;
  std::vector<event_type> events_;  // one after each task of the longest program run so far
  std::size_t issued_ = 0;          // this step's tasks issued
};

}  // namespace ctpipe::nccl::detail
