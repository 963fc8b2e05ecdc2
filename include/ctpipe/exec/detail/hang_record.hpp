// Where this process stands in its rank's program, and the file it writes when a step cannot go
// on: the hang report (docs/hang_report.md), written once for every executor that runs one
// process per rank. The executor tells it, as cheaply as a store, which task of its program runs
// and what it waits for; on a timeout, a failure, a peer's failure notice, a signal that ends the
// process (SIGTERM from the launcher when another process died, SIGINT, SIGSEGV, ...) or the
// executor's end, it writes DIR/process-P.json: who it is, the table it runs (table_json), and
// where it stands. `ctpipe hang-report DIR` collates the files against the table.
//
// The write is async-signal-safe (open, write, rename, clock_gettime; no allocation, no lock, no
// MPI, which is undefined after a failure): everything that allocates is made when the record is
// opened. Off unless opened (options::report_dir, or the environment's CTPIPE_REPORT_DIR); off, a
// task costs one relaxed store.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include <ctpipe/config.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/failure.hpp>  // launch_error
#include <ctpipe/format/table_json.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::detail {

/// What the process is doing: between steps, running the task at `position`, waiting in it for a
/// peer's message, for a peer to take an earlier message (a send), or for every process to end the
/// step (the agreement, the gradient sums).
enum class hang_state : int { between_steps, task, receiving, sending, ending_step };
/// Why the file was written.
enum class hang_event : int { timeout, failure, stopped, signal, exit };

inline constexpr std::array<std::string_view, 5> hang_state_names{"between_steps", "task", "receiving", "sending",
                                                                  "ending_step"};
inline constexpr std::array<std::string_view, 5> hang_event_names{"timeout", "failure", "stopped", "signal", "exit"};

/// The signals on which an open record writes its file (then hands the signal on as before).
inline constexpr std::array<int, 9> hang_signals{SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT,
                                                 SIGSEGV, SIGBUS, SIGFPE, SIGILL};

class hang_record;

/// The live part of the record: what the program's thread stores as it goes. On, it lives in a
/// file mapped into memory (DIR/process-P.live), so that it outlives a process killed outright
/// (SIGKILL, the out-of-memory killer): the kernel keeps the mapped page. Eight 64-bit words of
/// the machine's order, as `ctpipe hang-report` reads them: hang_live_magic, step (steps begun),
/// pass, position, state, peer, since (when the state was set: ms since 1970) and the process id.
struct hang_live {
  std::atomic<std::int64_t> magic{0}, step{0}, pass{0}, position{-1}, state{0}, peer{-1}, since{0}, pid{0};
};
inline constexpr std::int64_t hang_live_magic = 0x31766c6570697074;  // "ctpipelv1" in part
static_assert(sizeof(hang_live) == 64 && std::atomic<std::int64_t>::is_always_lock_free);

// The process's record that signals write (the last one that began a step), and the actions the
// signals had before.
inline std::atomic<hang_record*> signalled_record{nullptr};
inline std::array<struct sigaction, 65> signal_previous{};
inline std::atomic<bool> signals_installed{false};
inline void on_hang_signal(int sig) noexcept;

class hang_record {
 public:
  static constexpr int passes = 2;  // a training step's table, the forward-only one

  hang_record() = default;
  hang_record(const hang_record&) = delete;
  hang_record& operator=(const hang_record&) = delete;
  ~hang_record() {
    hang_record* self = this;
    signalled_record.compare_exchange_strong(self, nullptr);
    if (live_ != &own_) ::munmap(static_cast<void*>(live_), sizeof(hang_live));
  }

  /// Turns the record on: this process (`process`, named by `identity`: JSON members, no braces)
  /// writes `dir`/process-P.json. The folder is made if missing; one that cannot be written is a
  /// launch_error naming `who`. An earlier run's file of this process is removed.
  CTPIPE_COLD void open(std::string dir, int process, std::string_view identity, std::string_view who) {
    make_folders(dir);
    const std::string name = "/process-" + std::to_string(process) + ".json";
    path_ = dir + name;
    temp_ = path_ + ".tmp";
    const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw launch_error(std::string(who) + ": the hang report's folder (options::report_dir or CTPIPE_REPORT_DIR) '" +
                         dir + "' cannot be written: " + std::strerror(errno));
    ::close(fd);
    ::unlink(temp_.c_str());
    ::unlink(path_.c_str());
    const std::string live = dir + "/process-" + std::to_string(process) + ".live";
    const int lf = ::open(live.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    void* m = lf >= 0 && ::ftruncate(lf, sizeof(hang_live)) == 0
                  ? ::mmap(nullptr, sizeof(hang_live), PROT_READ | PROT_WRITE, MAP_SHARED, lf, 0)
                  : MAP_FAILED;
    if (lf >= 0) ::close(lf);
    if (m == MAP_FAILED)
      throw launch_error(std::string(who) + ": the hang report's live record '" + live +
                         "' cannot be made: " + std::strerror(errno));
    live_ = ::new (m) hang_live{};
    live_->pid.store(::getpid(), std::memory_order_relaxed);
    live_->magic.store(hang_live_magic, std::memory_order_relaxed);
    head_ = "{\"ctpipe_hang_report\": 1, ";
    head_ += identity;
    on_ = true;
    if (!signals_installed.exchange(true))
      for (int sig : hang_signals) {
        struct sigaction a {};
        a.sa_handler = [](int s) { on_hang_signal(s); };
        sigemptyset(&a.sa_mask);
        a.sa_flags = SA_RESTART;
        sigaction(sig, &a, &signal_previous[static_cast<std::size_t>(sig)]);
      }
  }
  bool on() const noexcept { return on_; }
  /// The table pass `pass` runs (table_json; `schedule`: its schedule's name) and this rank's
  /// program in it; set once per pass.
  CTPIPE_COLD void set_pass(int pass, std::string_view schedule, std::string table, std::span<const task> program) {
    names_[static_cast<std::size_t>(pass)] = schedule;
    tables_[static_cast<std::size_t>(pass)] = std::move(table);
    programs_[static_cast<std::size_t>(pass)] = program;
  }
  bool has_pass(int pass) const noexcept { return !programs_[static_cast<std::size_t>(pass)].empty(); }

  // The program's side: a few relaxed stores each.
  void begin_step(int pass) noexcept {
    live_->pass.store(pass, std::memory_order_relaxed);
    live_->step.fetch_add(1, std::memory_order_relaxed);
    live_->position.store(-1, std::memory_order_relaxed);
    set_state(hang_state::task, -1);
    if (on_) signalled_record.store(this, std::memory_order_relaxed);
  }
  void enter(int position) noexcept {
    live_->position.store(position, std::memory_order_relaxed);
    if (on_) set_state(hang_state::task, -1);
  }
  void wait(hang_state s, int peer) noexcept {
    if (on_) set_state(s, peer);
  }
  /// As wait(), found out late (a device path learns where its GPU waits only when its host's wait
  /// times out): in state `s` since `since_ms` (unix_ms()).
  void waited(hang_state s, int peer, long since_ms) noexcept {
    if (!on_) return;
    set_state(s, peer);
    live_->since.store(since_ms, std::memory_order_relaxed);
  }
  /// The rank's program in the pass now running (empty where its pass was not set).
  std::span<const task> running_program() const noexcept {
    return programs_[static_cast<std::size_t>(live_->pass.load(std::memory_order_relaxed))];
  }
  static long unix_ms() noexcept {
    timespec wall{};
    clock_gettime(CLOCK_REALTIME, &wall);
    return static_cast<long>(wall.tv_sec) * 1000 + wall.tv_nsec / 1000000;
  }
  /// The step ended; `completed`: on every process (what was written for an incident is then old).
  void end_step(bool completed) noexcept {
    set_state(hang_state::between_steps, -1);
    if (completed) incident_step_.store(-1, std::memory_order_relaxed);
  }

  /// Writes the file (nothing when off). A signal writes only where nothing was written for this
  /// step's incident (a timeout's or a failure's file says more); the executor's end only where no
  /// incident is unresolved. `text`: the message (a timeout's, a failure's), empty from a signal.
  CTPIPE_COLD void write(hang_event e, std::string_view text = {}, int signal = 0) noexcept {
    if (!on_) return;
    const long step = static_cast<long>(live_->step.load(std::memory_order_relaxed));
    const long incident = incident_step_.load(std::memory_order_relaxed);
    if ((e == hang_event::signal && incident == step) || (e == hang_event::exit && incident >= 0)) return;
    if (e != hang_event::exit) incident_step_.store(step, std::memory_order_relaxed);
    const auto pass = static_cast<int>(live_->pass.load(std::memory_order_relaxed));
    const auto position = static_cast<int>(live_->position.load(std::memory_order_relaxed));
    const std::span<const task> program = programs_[static_cast<std::size_t>(pass)];
    char buf[2048];
    writer w{buf, buf + sizeof(buf)};
    w.put(", \"event\": \"").put(hang_event_names[static_cast<std::size_t>(e)]).put("\", \"signal\": ").num(signal);
    w.put(", \"schedule\": \"").escaped(names_[static_cast<std::size_t>(pass)]);
    w.put("\", \"pass\": \"").put(pass == 0 ? "step" : "forward").put("\", \"step\": ").num(step);
    w.put(", \"position\": ").num(position);
    if (position >= 0 && static_cast<std::size_t>(position) < program.size()) {
      const task& t = program[static_cast<std::size_t>(position)];
      w.put(", \"task\": {\"op\": \"").put(op_name(t.op)).put("\", \"stage\": ").num(t.stage);
      w.put(", \"mb\": ").num(t.microbatch).put("}");
    }
    const auto state = static_cast<int>(live_->state.load(std::memory_order_relaxed));
    w.put(", \"state\": \"").put(hang_state_names[static_cast<std::size_t>(state)]).put("\", \"peer\": ");
    w.num(static_cast<long>(live_->peer.load(std::memory_order_relaxed)));
    const long now = unix_ms();
    w.put(", \"elapsed_ms\": ").num(now - static_cast<long>(live_->since.load(std::memory_order_relaxed)));
    w.put(", \"unix_ms\": ").num(now);
    w.put(", \"text\": \"").escaped(text).put("\", \"table\": ");
    const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::string& table = tables_[static_cast<std::size_t>(pass)];
    bool ok = all(fd, head_.data(), head_.size()) && all(fd, buf, static_cast<std::size_t>(w.at - buf)) &&
              all(fd, table.empty() ? "null" : table.data(), table.empty() ? 4 : table.size()) && all(fd, "}\n", 2);
    ok = ::close(fd) == 0 && ok;
    if (ok) ::rename(temp_.c_str(), path_.c_str());
  }

 private:
  // `dir` and the folders above it, where missing (mkdir -p; what cannot be made shows when the
  // file is opened). Not <filesystem>: it costs every program that includes this a second of compile.
  static void make_folders(const std::string& dir) {
    for (std::size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
      ::mkdir(dir.substr(0, at).c_str(), 0755);
      if (at == std::string::npos) break;
    }
  }
  // Appends to a fixed buffer (a write that does not fit is cut: the text first).
  struct writer {
    char* at;
    char* end;
    writer& put(std::string_view s) noexcept {
      for (char c : s)
        if (at < end - 64) *at++ = c;  // room kept for the members after the text
      return *this;
    }
    writer& num(long v) noexcept {
      char d[24];
      int n = 0;
      const bool neg = v < 0;
      unsigned long u = neg ? 0ul - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
      do d[n++] = static_cast<char>('0' + u % 10);
      while ((u /= 10) != 0);
      if (neg && at < end) *at++ = '-';
      while (n > 0 && at < end) *at++ = d[--n];
      return *this;
    }
    writer& escaped(std::string_view s) noexcept {
      static constexpr char hex[] = "0123456789abcdef";
      for (char c : s) {
        if (at >= end - 128) break;
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
          *at++ = '\\';
          *at++ = c;
        } else if (u < 0x20) {
          for (char x : {'\\', 'u', '0', '0', hex[u >> 4], hex[u & 15]}) *at++ = x;
        } else {
          *at++ = c;
        }
      }
      return *this;
    }
  };
  static bool all(int fd, const char* p, std::size_t n) noexcept {
    while (n > 0) {
      const ssize_t k = ::write(fd, p, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }
  void set_state(hang_state s, int peer) noexcept {
    live_->state.store(static_cast<int>(s), std::memory_order_relaxed);
    live_->peer.store(peer, std::memory_order_relaxed);
    if (on_) live_->since.store(unix_ms(), std::memory_order_relaxed);
  }

  bool on_ = false;
  std::string path_, temp_, head_;
  std::array<std::string, passes> names_{}, tables_{};
  std::array<std::span<const task>, passes> programs_{};
  hang_live own_{};          // where the record lives while off
  hang_live* live_ = &own_;  // on: in DIR/process-P.live, mapped
  std::atomic<long> incident_step_{-1};
};

/// Tells an open record that pass `pass` runs Table (of schedule `schedule`), whose rank R this
/// process runs (once).
template <auto Table, int R>
CTPIPE_COLD void set_record_pass(hang_record& r, int pass, std::string_view schedule) {
  if (!r.on() || r.has_pass(pass)) return;
  r.set_pass(pass, schedule, table_json(Table),
             std::span<const task>(Table.programs[ix(R)].data(), ix(Table.length[ix(R)])));
}

// Writes the record's file, then hands the signal to the action it had before (by default: the
// process ends by it, as it would have).
inline void on_hang_signal(int sig) noexcept {
  const int saved = errno;
  if (hang_record* r = signalled_record.load(std::memory_order_relaxed)) r->write(hang_event::signal, {}, sig);
  sigaction(sig, &signal_previous[static_cast<std::size_t>(sig)], nullptr);
  errno = saved;
  raise(sig);
}

}  // namespace ctpipe::detail
