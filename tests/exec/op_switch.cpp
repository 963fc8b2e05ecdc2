// The op switch every backend shares (ctpipe/exec/detail/op_switch.hpp): each message op's route
// (its crossing, direction, end and far stage), the route's op back, and the primitive each op
// reaches.
#include <ctpipe/exec/detail/op_switch.hpp>

#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace {

using ctpipe::op_kind;
using ctpipe::detail::op_of;
using ctpipe::detail::route;
using ctpipe::detail::route_of;

constexpr bool same(route a, route b) {
  return a.send == b.send && a.backward == b.backward && a.skip == b.skip && a.lower == b.lower && a.upper == b.upper &&
         a.here == b.here && a.far == b.far;
}

// A chain's messages cross the boundary below or above stage 5.
static_assert(same(route_of(op_kind::send_forward, 5, -1), {true, false, false, 5, 6, 5, 6}));
static_assert(same(route_of(op_kind::recv_forward, 5, -1), {false, false, false, 4, 5, 5, 4}));
static_assert(same(route_of(op_kind::send_backward, 5, -1), {true, true, false, 4, 5, 5, 4}));
static_assert(same(route_of(op_kind::recv_backward, 5, -1), {false, true, false, 5, 6, 5, 6}));
static_assert(route_of(op_kind::recv_forward, 5, -1).boundary() == 4);
static_assert(route_of(op_kind::recv_backward, 5, -1).boundary() == 5);
// A skip crossing from stage 2 to stage 7, seen from each end: always (lower 2, upper 7).
static_assert(same(route_of(op_kind::send_skip_forward, 2, 7), {true, false, true, 2, 7, 2, 7}));
static_assert(same(route_of(op_kind::recv_skip_forward, 7, 2), {false, false, true, 2, 7, 7, 2}));
static_assert(same(route_of(op_kind::send_skip_backward, 7, 2), {true, true, true, 2, 7, 7, 2}));
static_assert(same(route_of(op_kind::recv_skip_backward, 2, 7), {false, true, true, 2, 7, 2, 7}));
// A value goes up, a gradient down.
static_assert(route_of(op_kind::send_skip_forward, 2, 7).from() == 2 &&
              route_of(op_kind::send_skip_forward, 2, 7).to() == 7);
static_assert(route_of(op_kind::send_skip_backward, 7, 2).from() == 7 &&
              route_of(op_kind::send_skip_backward, 7, 2).to() == 2);
// Every message op's route gives the op back.
static_assert([] {
  for (int k = 0; k < ctpipe::op_kind_count; ++k) {
    const auto op = static_cast<op_kind>(k);
    if (ctpipe::is_comm(op) && op_of(route_of(op, 3, 6)) != op) return false;
  }
  return true;
}());

// A backend that writes down which primitive each task reached. Checked: whether its model is
// one that builds (false: a model that broke one of its rules, whose tasks the switch leaves out).
template <bool Checked>
struct recorder {
  static constexpr bool model_checked = Checked;
  std::vector<std::string> calls;
  template <int R, op_kind Op, int S, class A>
  void run_compute(const A&) {
    calls.push_back("compute " + std::to_string(R) + " " + std::to_string(static_cast<int>(Op)) + " " +
                    std::to_string(S));
  }
  template <int R, route M, class A>
  void send(const A&) {
    calls.push_back("send " + std::to_string(R) + " " + std::to_string(M.lower) + "-" + std::to_string(M.upper) +
                    (M.backward ? " back" : " fwd") + (M.skip ? " skip" : ""));
  }
  template <int R, route M, class A>
  void receive(const A&) {
    calls.push_back("receive " + std::to_string(R) + " " + std::to_string(M.lower) + "-" + std::to_string(M.upper) +
                    (M.backward ? " back" : " fwd") + (M.skip ? " skip" : ""));
  }
};

}  // namespace

template <bool Checked>
std::vector<std::string> switch_five_tasks() {
  recorder<Checked> b;
  const int args = 0;
  ctpipe::detail::run_op<1, op_kind::backward_input, 3, -1>(b, args);
  ctpipe::detail::run_op<1, op_kind::send_backward, 3, -1>(b, args);
  ctpipe::detail::run_op<2, op_kind::recv_forward, 4, -1>(b, args);
  ctpipe::detail::run_op<0, op_kind::send_skip_forward, 1, 4>(b, args);
  ctpipe::detail::run_op<2, op_kind::recv_skip_backward, 1, 4>(b, args);
  return b.calls;
}

TEST_CASE("the op switch: a compute op reaches the backend's compute, a message its send or receive of the route") {
  const std::vector<std::string> want{"compute 1 2 3", "send 1 2-3 back", "receive 2 3-4 fwd", "send 0 1-4 fwd skip",
                                      "receive 2 1-4 back skip"};
  CHECK(switch_five_tasks<true>() == want);
}

TEST_CASE("the op switch: a backend whose model broke one of its rules reaches no primitive") {
  CHECK(switch_five_tasks<false>().empty());
}
