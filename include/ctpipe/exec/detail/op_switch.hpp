// The switch over a task's op, written once for every backend: a compute op (F, B, I, W) runs the
// backend's compute; each of the eight message ops becomes one route (which crossing, which way,
// sent or received, the stage at the far end), and the backend's send or receive of that route.
// A backend (the host engine, the MPI engine, the CUDA engine for the CUDA, NCCL and MPI device
// executors) gives three primitives, each a template of the rank and the op or route, and says
// whether its model is one that builds (model_checked):
//
//   b.template run_compute<R, Op, S>(a);   // stage S's F, B, I or W
//   b.template send<R, M>(a);              // route M's message, from this stage
//   b.template receive<R, M>(a);           // route M's message, into this stage
//
// What a message of a route carries is one rule too: the shared host compute's sent_message and
// sent_extent for the host and MPI engines, the CUDA engine's message layout for its own.
#pragma once

#include <ctpipe/schedule/task.hpp>  // op_kind

namespace ctpipe::detail {

/// Where a message op's message travels: across the boundary between stages `lower` and
/// `lower + 1` (a chain's neighbours), or across a graph model's skip crossing from `lower` to
/// `upper`; forward (an activation, from lower up) or backward (a gradient, from upper down);
/// sent by this task's stage `here` or received by it from `far`.
struct route {
  bool send = false;      // this task sends the message (else it receives it)
  bool backward = false;  // a gradient, from `upper` down to `lower` (else an activation, up)
  bool skip = false;      // a skip crossing (else the boundary between `lower` and `lower + 1`)
  int lower = 0, upper = 0;
  int here = 0, far = 0;

  /// The stage boundary a chain message crosses (its lower stage).
  constexpr int boundary() const noexcept { return lower; }
  /// The stage that sends the message, and the one that receives it.
  constexpr int from() const noexcept { return backward ? upper : lower; }
  constexpr int to() const noexcept { return backward ? lower : upper; }
};

/// The route of message op `op` of stage `s` (`other`: a skip message's far stage).
constexpr route route_of(op_kind op, int s, int other) noexcept {
  switch (op) {
    case op_kind::send_forward:
      return {true, false, false, s, s + 1, s, s + 1};
    case op_kind::recv_forward:
      return {false, false, false, s - 1, s, s, s - 1};
    case op_kind::send_backward:
      return {true, true, false, s - 1, s, s, s - 1};
    case op_kind::recv_backward:
      return {false, true, false, s, s + 1, s, s + 1};
    case op_kind::send_skip_forward:
      return {true, false, true, s, other, s, other};
    case op_kind::recv_skip_forward:
      return {false, false, true, other, s, s, other};
    case op_kind::send_skip_backward:
      return {true, true, true, other, s, s, other};
    case op_kind::recv_skip_backward:
      return {false, true, true, s, other, s, other};
    default:
      return {};
  }
}

/// The message op of route `m` (route_of's inverse).
constexpr op_kind op_of(route m) noexcept {
  if (m.skip)
    return m.send ? (m.backward ? op_kind::send_skip_backward : op_kind::send_skip_forward)
                  : (m.backward ? op_kind::recv_skip_backward : op_kind::recv_skip_forward);
  return m.send ? (m.backward ? op_kind::send_backward : op_kind::send_forward)
                : (m.backward ? op_kind::recv_backward : op_kind::recv_forward);
}

/// Task Op of stage S on rank R (Other: a skip message's far stage), with arguments `a`, on
/// backend `b`. A backend whose model broke one of its own rules (Backend::model_checked false:
/// the model has said which, once, and holds stand-ins for its layers) builds no task, so that the
/// rule's message stays the build's only error on every backend.
template <int R, op_kind Op, int S, int Other, class Backend, class Args>
inline void run_op(Backend& b, const Args& a) {
  if constexpr (!Backend::model_checked) {
    (void)b;
    (void)a;
  } else if constexpr (is_compute(Op)) {
    b.template run_compute<R, Op, S>(a);
  } else {
    constexpr route m = route_of(Op, S, Other);
    if constexpr (m.send)
      b.template send<R, m>(a);
    else
      b.template receive<R, m>(a);
  }
}

}  // namespace ctpipe::detail
