// A stream simulator standing in for the CUDA runtime, so that the CUDA executor's logic (events,
// rings, pointers handed across ranks, the global issue order, graph capture and replay, error
// paths) is tested on a machine without a GPU.
//
// Streams are queues of operations (work, event record, event wait) that run only when the host
// synchronises, one operation at a time, taken from a stream chosen at random among those whose
// next operation may run: any interleaving the streams allow may happen, so a missing dependency
// shows as wrong numbers (buffers start filled with NaN). Events follow CUDA's rule: a wait waits
// for the record most recently issued before it. A capture records the operations issued instead
// of queueing them; a launch of the graph issues them again. An operation may also meet others on
// other streams (tests/support/nccl_sim.hpp: NCCL's calls), and runs when all are at the front of their
// streams. Device memory is host memory,
// tagged with its device, and the calls check what CUDA checks (an event recorded on a stream of
// another device, a synchronisation during a capture).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ctpipe/cuda/layer.hpp>  // ctpipe::cuda::context

namespace sim {

enum status_code : int { ok = 0, injected = 1, capture_violation = 2, wrong_device = 3, invalid = 4, not_ready = 5 };
enum class call : int { any, memcpy, record, wait, synchronize, malloc, graph_launch, launch };

struct event_state {
  int device = 0;
  std::uint64_t issued = 0, completed = 0;
  bool timed = false;  // made by timing_event_create
  double at = -1.0;    // a timed event: when its last record ran (the host's steady clock, in us)
};
struct stream_state;
// An operation that runs on several streams at once (NCCL's send with its receive, an all-reduce):
// it runs when each of its parts is at the front of its stream, and takes them all off.
struct meeting {
  std::vector<stream_state*> at;  // each part's stream, once issued
  std::function<void()> fn;
  std::function<bool()> complete;  // (where given: every part has joined; else `at` is sized to the parts)
};
struct op {
  enum kind_t { work, record, wait, meet } kind = work;
  std::function<void()> fn;
  event_state* event = nullptr;
  std::uint64_t generation = 0;
  // meet: called when the op is issued for real (not captured): finds its meeting and part.
  std::function<std::pair<std::shared_ptr<meeting>, int>(stream_state*)> join;
  std::shared_ptr<meeting> meeting_of;
  int part = 0;
};
struct stream_state {
  int device = 0;
  std::deque<op> queue;
};
inline op work_op(std::function<void()> fn) {
  op o;
  o.fn = std::move(fn);
  return o;
}
inline op event_op(op::kind_t k, event_state* e) {
  op o;
  o.kind = k;
  o.event = e;
  return o;
}
struct graph_state {
  std::vector<std::pair<stream_state*, op>> ops;
};

struct world {
  int devices = 1;
  // The calling thread's current device (as CUDA's: cudaSetDevice sets the host thread's).
  static int& current_device() {
    thread_local int d = 0;
    return d;
  }
  std::mt19937 rng{1};
  std::vector<stream_state*> streams;
  bool capturing = false, capture_invalid = false;
  std::vector<std::pair<stream_state*, op>> captured;
  std::map<const char*, std::pair<std::size_t, int>, std::greater<>> allocations;  // base -> (bytes, device)
  // Fault injection: the `countdown`-th call of kind `fail` returns `injected` (0: none).
  call fail = call::any;
  int countdown = 0;
  // Counters.
  long memcpys = 0, adds = 0, launches = 0, records = 0, waits = 0, syncs = 0, mallocs = 0, live_allocations = 0;
  std::size_t peer_bytes = 0;       // bytes copied from one device to another (issued, captured or not)
  std::vector<std::string> ranges;  // NVTX labels, when record_ranges
  bool record_ranges = false;
  std::vector<std::string> wrong_device_work;  // layers that ran with memory of another device

  static world& get() {
    static world w;
    return w;
  }
  void reset(unsigned seed, int device_count = 1) {
    *this = world{};
    current_device() = 0;
    rng.seed(seed);
    devices = device_count;
  }
  // The device of a simulated device pointer, -1 for host memory the user made.
  int device_of(const void* p) const {
    auto it = allocations.lower_bound(static_cast<const char*>(p));
    if (it == allocations.end()) return -1;
    const char* base = it->first;
    return static_cast<const char*>(p) < base + it->second.first ? it->second.second : -1;
  }
};

// Simulated processes may call the simulator from threads of their own (the NCCL tests run the
// optimizer's collective steps so): each call of the backend and of the NCCL stand-in holds this
// lock, so that the world changes one call at a time.
inline std::unique_lock<std::recursive_mutex> hold() {
  static std::recursive_mutex m;
  return std::unique_lock<std::recursive_mutex>(m);
}

inline status_code count(call c) {
  world& w = world::get();
  if (w.countdown > 0 && (w.fail == call::any || w.fail == c) && --w.countdown == 0) return injected;
  return ok;
}

inline void enqueue(stream_state* s, op o) {
  world& w = world::get();
  if (w.capturing) {
    w.captured.emplace_back(s, std::move(o));
    return;
  }
  if (o.kind == op::record) o.generation = ++o.event->issued;
  if (o.kind == op::wait) o.generation = o.event->issued;
  if (o.kind == op::meet) std::tie(o.meeting_of, o.part) = o.join(s);
  s->queue.push_back(std::move(o));
}

inline bool runnable(const op& o) {
  if (o.kind == op::wait) return o.event->completed >= o.generation;
  if (o.kind != op::meet) return true;
  const meeting& m = *o.meeting_of;
  if (m.complete && !m.complete()) return false;
  for (std::size_t k = 0; k < m.at.size(); ++k) {
    const stream_state* t = m.at[k];
    if (!t || t->queue.empty() || t->queue.front().kind != op::meet || t->queue.front().meeting_of != o.meeting_of ||
        t->queue.front().part != static_cast<int>(k))
      return false;
  }
  return true;
}

// Runs operations, streams chosen at random, until `done` holds; when nothing can run, throws
// (a deadlock) or, with `throw_when_stuck` false, returns.
template <class Done>
void run_until(Done done, bool throw_when_stuck = true) {
  world& w = world::get();
  std::vector<stream_state*> ready;
  while (!done()) {
    ready.clear();
    for (stream_state* s : w.streams)
      if (!s->queue.empty() && runnable(s->queue.front())) ready.push_back(s);
    if (ready.empty()) {
      if (!throw_when_stuck) return;
      throw std::logic_error("sim: deadlock: every stream with work waits on an event never recorded");
    }
    stream_state* s = ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(w.rng)];
    op o = std::move(s->queue.front());
    s->queue.pop_front();
    if (o.kind == op::work) {
      o.fn();
    } else if (o.kind == op::meet) {
      for (std::size_t k = 0; k < o.meeting_of->at.size(); ++k)
        if (static_cast<int>(k) != o.part) o.meeting_of->at[k]->queue.pop_front();
      o.meeting_of->fn();
    } else if (o.kind == op::record) {
      o.event->completed = o.generation > o.event->completed ? o.generation : o.event->completed;
      // (A timed event keeps the host's time when it ran: a process's messages wait on the host,
      // so a message's receive ends after its send began on these clocks too.)
      if (o.event->timed)
        o.event->at =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
    }
  }
}

inline stream_state* stream_of(const ctpipe::cuda::context& c) { return reinterpret_cast<stream_state*>(c.stream); }

/// What a simulated kernel does: `fn` runs when the stream reaches it. Checks that the memory it
/// names lives on the context's device.
template <class Fn>
void launch(const ctpipe::cuda::context& c, std::initializer_list<const void*> memory, Fn fn) {
  // (Under the lock, as every call: another simulated process's thread may be running the streams,
  // this one's among them. Without it the two raced on the stream's queue: one NCCL sweep in
  // thirty crashed, 2026-11-30.)
  const auto held = hold();
  world& w = world::get();
  if (world::current_device() != c.device) w.wrong_device_work.push_back("current device differs from the stream's");
  for (const void* p : memory) {
    const int d = w.device_of(p);
    if (d >= 0 && d != c.device) w.wrong_device_work.push_back("memory of device " + std::to_string(d));
  }
  enqueue(stream_of(c), work_op(std::function<void()>(std::move(fn))));
}

/// The backend the CUDA executor runs on in these tests.
struct backend {
  // Memory of device `found` (-1: not the simulator's, which counts as on every device) is on `device`.
  static bool on(int found, int device) noexcept { return found < 0 || found == device; }
  using status = int;
  using stream_type = stream_state*;
  using event_type = event_state*;
  using graph_type = graph_state*;

  static bool ok(status s) noexcept { return s == status_code::ok; }
  static int code(status s) noexcept { return s; }
  static std::string describe(status s) {
    switch (s) {
      case injected:
        return "sim: injected failure";
      case capture_violation:
        return "sim: operation not permitted while capturing";
      case wrong_device:
        return "sim: the event and the stream are on different devices";
      default:
        return "sim: invalid argument";
    }
  }
  static CUstream_st* handle(stream_type s) noexcept { return reinterpret_cast<CUstream_st*>(s); }

  static status device_count(int* n) {
    const auto held = hold();
    *n = world::get().devices;
    return status_code::ok;
  }
  static status set_device(int d) {
    const auto held = hold();
    if (d < 0 || d >= world::get().devices) return invalid;
    world::current_device() = d;
    return status_code::ok;
  }
  static status enable_peer_access(int, int) { return status_code::ok; }
  static status stream_create(stream_type* s, int device) {
    const auto held = hold();
    *s = new stream_state{device, {}};
    world::get().streams.push_back(*s);
    return status_code::ok;
  }
  static status stream_destroy(stream_type s) {
    const auto held = hold();
    auto& v = world::get().streams;
    std::erase(v, s);
    delete s;
    return status_code::ok;
  }
  static status event_create(event_type* e, int device) {
    const auto held = hold();
    *e = new event_state{device, 0, 0};
    return status_code::ok;
  }
  static status timing_event_create(event_type* e, int device) {
    const auto held = hold();
    *e = new event_state{device, 0, 0, true, -1.0};
    return status_code::ok;
  }
  // CUDA's rules: both timed, recorded and complete, on one device.
  static status elapsed_ms(float* ms, event_type from, event_type to) {
    const auto held = hold();
    if (!from->timed || !to->timed || from->device != to->device) return status_code::invalid;
    if (from->completed < from->issued || to->completed < to->issued) return status_code::not_ready;
    if (from->at < 0.0 || to->at < 0.0) return status_code::invalid;
    *ms = static_cast<float>((to->at - from->at) * 1e-3);
    return status_code::ok;
  }
  static status event_destroy(event_type e) {
    const auto held = hold();
    delete e;
    return status_code::ok;
  }
  static status malloc(void** p, std::size_t bytes, int device) {
    const auto held = hold();
    if (status s = count(call::malloc)) return s;
    world& w = world::get();
    char* m = new char[bytes];
    std::memset(m, 0xFF, bytes);  // NaN in every float: reading a buffer never written shows
    w.allocations[m] = {bytes, device};
    ++w.mallocs;
    ++w.live_allocations;
    *p = m;
    return status_code::ok;
  }
  static status free(void* p, int) {
    const auto held = hold();
    world& w = world::get();
    w.allocations.erase(static_cast<const char*>(p));
    --w.live_allocations;
    delete[] static_cast<char*>(p);
    return status_code::ok;
  }
  static status host_malloc(void** p, std::size_t bytes) {
    const auto held = hold();
    *p = new char[bytes];
    return status_code::ok;
  }
  static status host_free(void* p) {
    const auto held = hold();
    delete[] static_cast<char*>(p);
    return status_code::ok;
  }
  static status memcpy_async(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes,
                             stream_type s) {
    const auto held = hold();
    if (status e = count(call::memcpy)) return e;
    world& w = world::get();
    // (Memory the simulator did not allocate, such as a simulated layer's own parameters, counts as
    // on every device.)
    if (!on(w.device_of(dst), dst_device) || !on(w.device_of(src), src_device)) return invalid;
    ++w.memcpys;
    if (dst_device != src_device) w.peer_bytes += bytes;
    enqueue(s, work_op([=] { std::memcpy(dst, src, bytes); }));
    return status_code::ok;
  }
  static status copy_to_host_async(void* dst, const void* src, std::size_t bytes, stream_type s) {
    const auto held = hold();
    if (status e = count(call::memcpy)) return e;
    enqueue(s, work_op([=] { std::memcpy(dst, src, bytes); }));
    return status_code::ok;
  }
  static status copy_to_device_async(void* dst, const void* src, std::size_t bytes, stream_type s) {
    const auto held = hold();
    if (status e = count(call::memcpy)) return e;
    enqueue(s, work_op([=] { std::memcpy(dst, src, bytes); }));
    return status_code::ok;
  }
  // dst += src on stream s (the runtime's cuBLAS axpy): the host's own addition, element by element.
  using adder_type = int;  // the device
  static status adder_create(adder_type* h, int device) {
    const auto held = hold();
    *h = device;
    return status_code::ok;
  }
  static status adder_destroy(adder_type) { return status_code::ok; }
  template <class T>
  static status add(adder_type h, T* dst, const T* src, std::size_t n, stream_type s) {
    const auto held = hold();
    if (status e = count(call::memcpy)) return e;
    world& w = world::get();
    if (!on(w.device_of(dst), h) || !on(w.device_of(src), h) || s->device != h) return invalid;
    ++w.adds;
    enqueue(s, work_op([=] {
              for (std::size_t i = 0; i < n; ++i) dst[i] = dst[i] + src[i];
            }));
    return status_code::ok;
  }
  // f(i) for i in [0, n) on stream s, when the stream reaches it (the runtime's kernel of a
  // thread per index): the device optimizer's kernels run as the host loop of their own code.
  static constexpr bool launches_kernels = true;
  template <class F>
  static status for_each(std::size_t n, const F& f, stream_type s) {
    const auto held = hold();
    if (status e = count(call::launch)) return e;
    world& w = world::get();
    if (world::current_device() != s->device) w.wrong_device_work.push_back("a kernel launched on another device");
    ++w.launches;
    enqueue(s, work_op([n, f] {
              for (std::size_t i = 0; i < n; ++i) f(i);
            }));
    return status_code::ok;
  }
  static status memset_async(void* p, std::size_t bytes, stream_type s) {
    const auto held = hold();
    enqueue(s, work_op([=] { std::memset(p, 0, bytes); }));
    return status_code::ok;
  }
  static status record(event_type e, stream_type s) {
    const auto held = hold();
    if (status x = count(call::record)) return x;
    if (e->device != s->device) return wrong_device;
    ++world::get().records;
    enqueue(s, event_op(op::record, e));
    return status_code::ok;
  }
  static status wait(stream_type s, event_type e) {
    const auto held = hold();
    if (status x = count(call::wait)) return x;
    ++world::get().waits;
    enqueue(s, event_op(op::wait, e));
    return status_code::ok;
  }
  static status synchronize(stream_type s) {
    const auto held = hold();
    world& w = world::get();
    if (w.capturing) {
      w.capture_invalid = true;
      return capture_violation;
    }
    if (status x = count(call::synchronize)) return x;
    ++w.syncs;
    run_until([s] { return s->queue.empty(); });
    return status_code::ok;
  }
  static status event_synchronize(event_type e) {
    const auto held = hold();
    world& w = world::get();
    if (w.capturing) {
      w.capture_invalid = true;
      return capture_violation;
    }
    ++w.syncs;
    run_until([e] { return e->completed >= e->issued; });
    return status_code::ok;
  }
  // Runs what can run; done when the stream is empty, not_ready when what is left waits on
  // something that cannot run yet (another process's part, say).
  static status query(stream_type s) {
    const auto held = hold();
    world& w = world::get();
    if (w.capturing) return capture_violation;
    run_until([s] { return s->queue.empty(); }, false);
    return s->queue.empty() ? status_code::ok : status_code::not_ready;
  }
  // Runs what can run; done when the event's last record has run.
  static status event_query(event_type e) {
    const auto held = hold();
    world& w = world::get();
    if (w.capturing) return capture_violation;
    run_until([e] { return e->completed >= e->issued; }, false);
    return e->completed >= e->issued ? status_code::ok : status_code::not_ready;
  }
  static bool not_ready(status s) noexcept { return s == status_code::not_ready; }
  static status last_error() { return status_code::ok; }

  static status begin_capture(stream_type) {
    const auto held = hold();
    world& w = world::get();
    if (w.capturing) return capture_violation;
    w.capturing = true;
    w.capture_invalid = false;
    w.captured.clear();
    return status_code::ok;
  }
  static status end_capture(stream_type, graph_type* g) {
    const auto held = hold();
    world& w = world::get();
    if (!w.capturing) return invalid;
    w.capturing = false;
    if (w.capture_invalid) return capture_violation;
    *g = new graph_state{std::move(w.captured)};
    w.captured.clear();
    return status_code::ok;
  }
  static status graph_launch(graph_type g, stream_type) {
    const auto held = hold();
    if (status x = count(call::graph_launch)) return x;
    for (const auto& [s, o] : g->ops) enqueue(s, o);
    return status_code::ok;
  }
  static status graph_destroy(graph_type g) {
    const auto held = hold();
    delete g;
    return status_code::ok;
  }

  static void range_push(const char* label) {
    if (world::get().record_ranges) world::get().ranges.emplace_back(label);
  }
  static void range_pop() noexcept {}
};

/// A device allocation of the simulator for test data (inputs, targets), freed with the object.
struct buffer {
  void* p = nullptr;
  explicit buffer(std::size_t bytes, int device = 0) {
    if (backend::malloc(&p, bytes, device) != status_code::ok) throw std::runtime_error("sim: malloc failed");
  }
  ~buffer() { backend::free(p, 0); }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

}  // namespace sim
