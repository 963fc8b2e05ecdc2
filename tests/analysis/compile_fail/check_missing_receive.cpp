// build error: ctpipe::check: an op whose input is on another rank must be preceded by its receive
// build error: table_check_failed<.*missing_receive, 1, 1,
#include <ctpipe/ctpipe.hpp>
#include <utility>
// Rank 1 of 1F1B p=2 m=2 is RECV_F0 F0 B0 SEND_B0 RECV_F1 F1 B1 SEND_B1; swap its two receives.
constexpr auto bad = [] {
  auto t = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();
  std::swap(t.programs[1][0], t.programs[1][4]);
  return t;
}();
static_assert(ctpipe::check<bad>());
