// build error: ctpipe::check: an overlapped F \(F&B\) must be directly followed by the full B it runs with
// build error: table_check_failed<ctpipe::check_rule::overlap_pair, 0, 1
// An overlapped F followed by an I, not a full B, is not a pair.
#include <ctpipe/schedules.hpp>
constexpr auto table = [] {
  ctpipe::task_table<1, 2, 6> t{};
  t.params = ctpipe::custom_schedule(1, 1, 2);
  t.stage_rank = {0, 0};
  t.push(0, ctpipe::make_compute(ctpipe::op_kind::forward, 0, 0));
  // F of stage 1 marked overlapped, but then an I
  t.push(0, ctpipe::make_overlapped_forward(1, 0));
  t.push(0, ctpipe::make_compute(ctpipe::op_kind::backward_input, 1, 0));
  t.push(0, ctpipe::make_compute(ctpipe::op_kind::backward_weight, 1, 0));
  t.push(0, ctpipe::make_compute(ctpipe::op_kind::backward, 0, 0));
  return t;
}();
static_assert(ctpipe::check<table>());
