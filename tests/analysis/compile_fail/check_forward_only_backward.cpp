// build error: ctpipe::check: a forward-only table \(schedule_info::forward_only\) runs no B, I or W and sends no gradients
// build error: table_check_failed<.*backward_in_forward_only, 0, 4,
#include <ctpipe/ctpipe.hpp>
// 1F1B p=2 m=2 marked forward only: the first op of its backward, RECV_B0 at position 4 of rank 0, breaks the rule.
constexpr auto bad = [] {
  auto t = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();
  t.params.forward_only = true;
  return t;
}();
static_assert(ctpipe::check<bad>());
