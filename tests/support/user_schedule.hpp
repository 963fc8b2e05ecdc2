// A schedule written outside the library, as a user writes one: 1F1B with an eager warm-up of
// 2(p-r-1) forwards (twice 1F1B's), so that each rank has a forward at hand while it waits for a
// gradient. It meets ctpipe::schedule_generator and goes through the same entry points as the
// built-in schedules: make_table, check, analyse, the formats and the executors.
#pragma once
#include <ctpipe/schedules.hpp>

namespace user {

struct eager_one_f_one_b {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("user::eager_one_f_one_b")  // the words of its parameter errors

  constexpr ctpipe::schedule_info info() const { return {"eager_1f1b", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return stage; }  // one stage per rank
  // A rule of its own, in ctpipe's words.
  constexpr ctpipe::param_check validate() const {
    if (ranks > 64) return {ctpipe::param_rule::stages_fit_in_int, ranks};
    return {};
  }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    using ctpipe::op_kind;
    for (int r = 0; r < ranks; ++r) {
      const int m = microbatches, w = 2 * (ranks - r - 1) < m ? 2 * (ranks - r - 1) : m;
      for (int i = 0; i < w; ++i) out.push(r, ctpipe::make_compute(op_kind::forward, r, i));
      for (int i = 0; i < m - w; ++i) {
        out.push(r, ctpipe::make_compute(op_kind::forward, r, w + i));
        out.push(r, ctpipe::make_compute(op_kind::backward, r, i));
      }
      for (int i = m - w; i < m; ++i) out.push(r, ctpipe::make_compute(op_kind::backward, r, i));
    }
  }
};
static_assert(ctpipe::schedule_generator<eager_one_f_one_b>);

}  // namespace user
