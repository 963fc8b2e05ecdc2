// build error: ctpipe::check: the table must run to completion, and here every rank left waits on a receive
// build error: table_check_failed<.*deadlock, 0, 5,
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <algorithm>
// Rank 0 of 1F1B p=2 m=2 is F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1: hold SEND_F1 back to the end.
constexpr auto bad = [] {
  auto t = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();
  std::rotate(t.programs[0].begin() + 3, t.programs[0].begin() + 4, t.programs[0].begin() + 8);
  return t;
}();
static_assert(ctpipe::check<bad>());
