// A stand-in for NCCL on the stream simulator (tests/support/stream_sim.hpp), so that the NCCL
// executor's ordering runs in CI without a GPU: every simulated process of a job lives in the test
// program, each with a simulated device of its own, and NCCL's calls are operations of the
// simulator that meet across streams. It enforces NCCL's rules, and records each broken one in
// `violations` (a test requires it empty):
//  - a send completes only together with its receive: the k-th send from a to b on a communicator
//    meets the k-th receive on b from a, each when it is at the front of its stream, so a send that
//    no receive is posted for holds its stream, and a cycle of them is the simulator's deadlock;
//  - a send and its receive name the same number of bytes; an all-reduce's parts the same count;
//  - buffers and streams on the device of the communicator's rank (of the memory the simulator
//    allocated: the test layers keep their parameters in host memory, as sim::launch allows);
//  - a communicator's calls on one stream only (NCCL serialises a communicator's calls, so a
//    second stream would wait on the first);
//  - no call captured into a graph on a communicator that has not made an eager call first (NCCL
//    connects to a peer at the first call, which a capture cannot hold);
//  - ncclCommSplit: every process of the parent calls it, in the same order (a collective); a
//    process without colour gets no communicator; ranks in the new one follow the key.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "stream_sim.hpp"

namespace sim::nccl {

struct comm_state;
// One process's end of a communicator (an ncclComm_t).
struct handle {
  comm_state* comm = nullptr;
  int process = 0;  // in the world
  int key = 0;      // its split key (its rank: by key, then by the parent's rank)
  int parent_rank = 0;
  int device = 0;
  bool connected = false;  // an eager call has been made
  std::set<stream_state*> streams;
  int splits = 0;  // calls to split with this handle as the parent
};

struct comm_state {
  std::vector<std::unique_ptr<handle>> members;
  // Splits of this communicator: (the members' ordinal of the call, colour) -> the new one.
  std::map<std::pair<int, int>, std::unique_ptr<comm_state>> children;
  std::map<int, int> calls_per_ordinal;  // split calls seen, per ordinal: every member must make each
  // Point to point: (from, to) -> the k-th send and the k-th receive's meeting.
  std::map<std::tuple<int, int, long>, std::shared_ptr<meeting>> p2p;
  std::map<std::pair<int, int>, long> sends, recvs;
  std::map<long, std::shared_ptr<meeting>> reductions;  // the n-th all-reduce
  std::vector<long> reduce_calls;
  int rank_of(const handle* h) const {
    std::vector<const handle*> v;
    for (const auto& m : members) v.push_back(m.get());
    std::sort(v.begin(), v.end(), [](const handle* a, const handle* b) {
      return std::pair(a->key, a->parent_rank) < std::pair(b->key, b->parent_rank);
    });
    return static_cast<int>(std::find(v.begin(), v.end(), h) - v.begin());
  }
  handle* at_rank(int r) const {
    for (const auto& m : members)
      if (rank_of(m.get()) == r) return m.get();
    return nullptr;
  }
};

struct state {
  std::vector<std::unique_ptr<comm_state>> worlds;
  std::vector<std::string> violations;
  long sends = 0, recvs = 0, reductions = 0, gathers = 0, broadcasts = 0, destroyed = 0, aborted = 0;
  std::size_t sent_bytes = 0;  // of every ncclSend issued (captured or not)
  static state& get() {
    static state s;
    return s;
  }
  void reset() { *this = state{}; }
};

inline void violation(std::string s) { state::get().violations.push_back(std::move(s)); }

/// After every process has made its communicators: each split was a collective of the parent.
inline void check_splits(const comm_state& c) {
  for (const auto& [ordinal, calls] : c.calls_per_ordinal)
    if (calls != static_cast<int>(c.members.size()))
      violation("ncclCommSplit number " + std::to_string(ordinal) + " was called by " + std::to_string(calls) +
                " of the " + std::to_string(c.members.size()) + " ranks of its parent");
}

/// A job of `processes` processes, process p on simulated device p: each one's world communicator.
inline std::vector<handle*> make_world(int processes) {
  auto c = std::make_unique<comm_state>();
  std::vector<handle*> out;
  for (int p = 0; p < processes; ++p) {
    c->members.push_back(std::make_unique<handle>(handle{c.get(), p, 0, p, p, false, {}, 0}));
    out.push_back(c->members.back().get());
  }
  state::get().worlds.push_back(std::move(c));
  return out;
}

enum status_code : int { success = 0, invalid_argument = 4, invalid_usage = 5 };

inline void check_call(handle* h, const void* buf, stream_state* s, const char* call) {
  world& w = world::get();
  const int d = w.device_of(buf);
  if (d >= 0 && d != h->device)  // (-1: memory the simulator did not allocate: the test layers' parameters)
    violation(std::string(call) + ": a buffer on device " + std::to_string(d) + ", the communicator's rank is on " +
              std::to_string(h->device));
  if (s->device != h->device) violation(std::string(call) + ": a stream of another device");
  h->streams.insert(s);
  if (h->streams.size() > 1) violation(std::string(call) + ": a communicator used from two streams");
  if (w.capturing && !h->connected)
    violation(std::string(call) + ": captured into a graph before any eager call on its communicator");
  if (!w.capturing) h->connected = true;
}

/// The Net backend of the NCCL executor on the simulator.
struct net {
  using status = int;
  using comm_type = handle*;
  static constexpr int no_colour = -1;  // NCCL_SPLIT_NOCOLOR
  static bool ok(status s) noexcept { return s == success; }
  static std::string describe(status s) {
    return s == invalid_argument ? "sim nccl: invalid argument" : "sim nccl: invalid usage";
  }

  static status split(comm_type parent, int colour, int key, comm_type* out) {
    const auto held = hold();
    *out = nullptr;
    if (!parent) return invalid_argument;
    comm_state& c = *parent->comm;
    const int ordinal = parent->splits++;
    ++c.calls_per_ordinal[ordinal];
    if (colour == no_colour) return success;
    auto& child = c.children[{ordinal, colour}];
    if (!child) child = std::make_unique<comm_state>();
    child->members.push_back(std::make_unique<handle>(
        handle{child.get(), parent->process, key, c.rank_of(parent), parent->device, false, {}, 0}));
    *out = child->members.back().get();
    return success;
  }

  static status send(const void* buf, std::size_t bytes, int peer, comm_type c, stream_state* s) {
    const auto held = hold();
    if (!c) return invalid_argument;
    check_call(c, buf, s, "ncclSend");
    ++state::get().sends;
    state::get().sent_bytes += bytes;
    enqueue(s, p2p_op(c, peer, true, const_cast<void*>(buf), bytes));
    return success;
  }
  static status recv(void* buf, std::size_t bytes, int peer, comm_type c, stream_state* s) {
    const auto held = hold();
    if (!c) return invalid_argument;
    check_call(c, buf, s, "ncclRecv");
    ++state::get().recvs;
    enqueue(s, p2p_op(c, peer, false, buf, bytes));
    return success;
  }
  // A collective's meeting: this rank's n-th collective on the communicator meets every other
  // rank's n-th (all-reduces and all-gathers alike, as NCCL orders them).
  static std::pair<std::shared_ptr<meeting>*, int> nth_collective(comm_state& k, int me) {
    if (k.reduce_calls.size() < k.members.size()) k.reduce_calls.resize(k.members.size());
    const long n = k.reduce_calls[static_cast<std::size_t>(me)]++;
    return std::pair(&k.reductions[n], me);
  }
  // Sums in the communicator's rank order: the same bits on every rank (ncclAllReduce makes the same
  // bits on every rank too, in an order of its own).
  template <class T>
  static status all_reduce_sum(T* buf, std::size_t count, comm_type c, stream_state* s) {
    const auto held = hold();
    if (!c) return invalid_argument;
    check_call(c, buf, s, "ncclAllReduce");
    ++state::get().reductions;
    enqueue(s, meet_op(c, nth_collective, buf, count * sizeof(T), sizeof(T) == sizeof(float) ? 1 : 2));
    return success;
  }
  // Every rank's `bytes` from `send` into `recv`, in rank order (one collective in the
  // communicator's sequence, as an all-reduce is).
  static status all_gather(const void* send, void* recv, std::size_t bytes, comm_type c, stream_state* s) {
    const auto held = hold();
    if (!c) return invalid_argument;
    check_call(c, send, s, "ncclAllGather");
    check_call(c, recv, s, "ncclAllGather");
    ++state::get().gathers;
    enqueue(s, meet_op(c, nth_collective, const_cast<void*>(send), bytes, 3, recv));
    return success;
  }
  // `bytes` at `buf` on rank `root` into `buf` on every other rank (one collective in the
  // communicator's sequence).
  static status broadcast(void* buf, std::size_t bytes, int root, comm_type c, stream_state* s) {
    const auto held = hold();
    if (!c) return invalid_argument;
    check_call(c, buf, s, "ncclBroadcast");
    ++state::get().broadcasts;
    enqueue(s, meet_op(c, nth_collective, buf, bytes, 4 + root));
    return success;
  }
  // The communicator's calls that wait, wait forever (as a dead peer's would): the executor leaves
  // them and its buffers behind, as it must with NCCL.
  static status abort(comm_type c) {
    const auto held = hold();
    if (!c) return invalid_argument;
    ++state::get().aborted;
    return success;
  }
  static status destroy(comm_type c) {
    const auto held = hold();
    if (!c) return invalid_argument;
    ++state::get().destroyed;
    return success;
  }

 private:
  // A call's meeting: each part's buffer and size; it runs once every part is at its stream's front.
  struct call : meeting {
    std::vector<void*> buf, out;  // (out: an all-gather's receive buffers)
    std::vector<std::size_t> size;
    int kind = 0;
  };
  // reduce: 0 point to point, 1 a sum of floats, 2 of doubles, 3 an all-gather, 4 + r a broadcast
  // from rank r.
  static std::shared_ptr<meeting> make_call(std::size_t parts, int reduce) {
    auto m = std::make_shared<call>();
    m->at.assign(parts, nullptr);
    m->buf.assign(parts, nullptr);
    m->size.assign(parts, 0);
    m->out.assign(parts, nullptr);
    m->kind = reduce;
    call* raw = m.get();
    const auto sum = [raw]<class T>(T) {
      for (std::size_t k = 1; k < raw->size.size(); ++k)
        if (raw->size[k] != raw->size[0]) violation("ncclAllReduce: the ranks' counts differ");
      const std::size_t n = raw->size[0] / sizeof(T);
      std::vector<T> total(static_cast<const T*>(raw->buf[0]), static_cast<const T*>(raw->buf[0]) + n);
      for (std::size_t k = 1; k < raw->buf.size(); ++k)
        for (std::size_t i = 0; i < n; ++i) total[i] += static_cast<const T*>(raw->buf[k])[i];
      for (void* b : raw->buf) std::memcpy(b, total.data(), n * sizeof(T));
    };
    if (reduce >= 4)
      m->fn = [raw, root = static_cast<std::size_t>(reduce - 4)] {
        if (root >= raw->buf.size()) {
          violation("ncclBroadcast: root " + std::to_string(root) + " of a communicator of " +
                    std::to_string(raw->buf.size()));
          return;
        }
        for (std::size_t k = 0; k < raw->buf.size(); ++k)
          if (raw->size[k] != raw->size[root]) violation("ncclBroadcast: the ranks' counts differ");
        for (std::size_t k = 0; k < raw->buf.size(); ++k)
          if (k != root) std::memcpy(raw->buf[k], raw->buf[root], std::min(raw->size[k], raw->size[root]));
      };
    else if (reduce == 3)
      m->fn = [raw] {
        for (std::size_t k = 0; k < raw->buf.size(); ++k)
          if (raw->size[k] != raw->size[0]) violation("ncclAllGather: the ranks' counts differ");
        for (std::size_t k = 0; k < raw->buf.size(); ++k)
          for (std::size_t j = 0; j < raw->buf.size(); ++j)
            std::memcpy(static_cast<char*>(raw->out[k]) + j * raw->size[0], raw->buf[j], raw->size[0]);
      };
    else if (reduce == 1)
      m->fn = [sum] { sum(float{}); };
    else if (reduce == 2)
      m->fn = [sum] { sum(double{}); };
    else
      m->fn = [raw] {
        if (raw->size[0] != raw->size[1])
          violation("ncclSend of " + std::to_string(raw->size[0]) + " bytes met ncclRecv of " +
                    std::to_string(raw->size[1]));
        std::memcpy(raw->buf[1], raw->buf[0], std::min(raw->size[0], raw->size[1]));
      };
    return m;
  }
  // An op of the simulator that joins its meeting when issued: `find(comm, my rank)` gives the
  // meeting's slot in the communicator and this op's part.
  template <class Find>
  static op meet_op(handle* c, Find find, void* buf, std::size_t bytes, int reduce, void* out = nullptr) {
    op o;
    o.kind = op::meet;
    o.join = [c, find, buf, bytes, reduce, out](stream_state* st) {
      comm_state& k = *c->comm;
      auto [slot, part] = find(k, k.rank_of(c));
      if (!reduce && k.members.size() != 2) violation("sim nccl: point to point on a communicator of other than 2");
      if (!*slot) {
        *slot = make_call(reduce ? k.members.size() : 2, reduce);
        // A collective's parts are the communicator's members, some of which may not have joined
        // it yet where the processes are made one after another (as here): it waits for all.
        if (reduce)
          (*slot)->complete = [&k, raw = static_cast<call*>(slot->get())] {
            return raw->at.size() == k.members.size();
          };
      }
      call& m = static_cast<call&>(**slot);
      if (reduce && static_cast<std::size_t>(part) >= m.at.size()) {
        const std::size_t n = static_cast<std::size_t>(part) + 1;
        m.at.resize(n, nullptr);
        m.buf.resize(n, nullptr);
        m.out.resize(n, nullptr);
        m.size.resize(n, 0);
      }
      if (m.kind != reduce) violation("sim nccl: ranks of a communicator made different collectives at one turn");
      m.out[static_cast<std::size_t>(part)] = out;
      m.at[static_cast<std::size_t>(part)] = st;
      m.buf[static_cast<std::size_t>(part)] = buf;
      m.size[static_cast<std::size_t>(part)] = bytes;
      return std::pair(*slot, part);
    };
    return o;
  }
  // The k-th send from a to b meets the k-th receive on b from a: part 0 the send, 1 the receive.
  static op p2p_op(handle* c, int peer, bool sending, void* buf, std::size_t bytes) {
    return meet_op(
        c,
        [peer, sending](comm_state& k, int me) {
          const int from = sending ? me : peer, to = sending ? peer : me;
          const long n = sending ? k.sends[{from, to}]++ : k.recvs[{from, to}]++;
          return std::pair(&k.p2p[{from, to, n}], sending ? 0 : 1);
        },
        buf, bytes, 0);
  }
};

}  // namespace sim::nccl
