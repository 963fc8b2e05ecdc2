// build error: ctpipe: a schedule's parameters: microbatches must be at least 1
// build error: invalid_parameter<.*my_schedule
// A user's schedule without CTPIPE_SCHEDULE_ERRORS still gets every common rule, in ctpipe's words,
// with its own type named.
#include <ctpipe/schedules.hpp>
struct my_schedule {
  int ranks = 1, microbatches = 1;
  constexpr ctpipe::schedule_info info() const { return {"mine", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return stage; }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    for (int r = 0; r < ranks; ++r)
      for (int i = 0; i < microbatches; ++i) out.push(r, ctpipe::make_compute(ctpipe::op_kind::forward, r, i));
  }
};
constexpr auto t = ctpipe::make_table<my_schedule{2, 0}>();
