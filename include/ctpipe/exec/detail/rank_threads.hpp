// The threads of the host executors' ranks 1..p-1 (rank 0 runs on the caller's thread).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include <ctpipe/detail/index.hpp>  // ix

namespace ctpipe::detail {

// The threads of ranks 1..Ranks-1 of an engine: each waits for a step, runs its rank's part
// (run.template operator()<R>(), the executor's), tells the engine it is done, until the engine
// stops. Rank 0 runs on the thread that calls the executor's step.
//
// Every thread starts through one plain function (thread_main) with pointers: std::thread's state
// is then one type in a whole program. Started with a lambda per rank, each rank of every executor
// had a state type of its own, whose name spells out the executor's whole task table, with a
// vtable and type information: a third of the symbol bytes of a source with many executors (and
// mangling such names took a quarter of its compile time: docs/testing.md).
template <int Ranks>
class rank_threads {
 public:
  template <class Engine, class Run>
  void start(Engine& en, Run run) {
    using state = started<Engine, Run>;
    state_ = held(new state{&en, std::move(run)}, [](void* p) { delete static_cast<state*>(p); });
    try {
      start_each<state>(std::make_integer_sequence<int, Ranks>{});
    } catch (...) {
      stop(en);
      throw;
    }
  }
  template <class Engine>
  void stop(Engine& en) noexcept {
    en.stop();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  template <class Engine, class Run>
  struct started {
    Engine* engine;
    Run run;
  };
  using body = void (*)(const void*);
  using held = std::unique_ptr<void, void (*)(void*)>;

  template <class State, int R>
  static void rank_body(const void* p) {
    const State& s = *static_cast<const State*>(p);
    std::uint32_t seen = 0;
    while (s.engine->wait_for_step(seen)) {
      s.run.template operator()<R>();
      s.engine->end_rank();
    }
  }
  static void thread_main(body b, const void* state) { b(state); }

  template <class State, int... R>
  void start_each(std::integer_sequence<int, R...>) {
    ((R > 0 ? void(threads_[detail::ix(R - 1)] = std::thread(&thread_main, &rank_body<State, R>, state_.get()))
            : void()),
     ...);
  }
  held state_{nullptr, [](void*) {}};  // the engine and the run the threads share (declared before them)
  std::array<std::thread, detail::ix(Ranks - 1)> threads_{};
};

/// A host executor's engine, on the heap (its buffers may be large), with the threads of ranks
/// 1..Ranks-1, started by start(run): each runs `run.template operator()<R>()` for every step. The
/// threads stop and join before the engine goes. Declared last in an executor, it is constructed
/// after, and destroyed before, everything its threads use. (start() is called from the executor's
/// constructor body: nvcc 13 mistranslates a template lambda in a member initialiser.)
template <class Engine, int Ranks>
class running_engine {
 public:
  template <class Model, class Loss>
  running_engine(Model& model, Loss& loss) : engine_(std::make_unique<Engine>(model, loss)) {}
  template <class Run>
  void start(Run run) {
    threads_.start(*engine_, run);
  }
  running_engine(const running_engine&) = delete;
  running_engine& operator=(const running_engine&) = delete;
  /// Never blocks on a rank: a step in progress (only possible from another thread, which is a
  /// misuse) is aborted first.
  ~running_engine() { threads_.stop(*engine_); }
  Engine& operator*() const noexcept { return *engine_; }
  Engine* operator->() const noexcept { return engine_.get(); }

 private:
  std::unique_ptr<Engine> engine_;
  rank_threads<Ranks> threads_;
};

}  // namespace ctpipe::detail
