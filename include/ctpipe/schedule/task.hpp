// The task IR: one op of one rank's program.
#pragma once

#include <cstdint>
#include <string_view>

namespace ctpipe {

/// What a task does. F, B, I and W are compute ops; the rest move a value between two ranks.
enum class op_kind : std::uint8_t {
  forward,          // F
  backward,         // B: full backward (input and weight gradient)
  backward_input,   // I: input gradient only (split backward, on the critical path)
  backward_weight,  // W: weight gradient only (split backward, needs only its own I)
  send_forward,     // SEND_F: send the activation produced by `stage` to `peer`
  recv_forward,     // RECV_F: receive the activation consumed by `stage` from `peer`
  send_backward,    // SEND_B: send the gradient produced by `stage` to `peer`
  recv_backward,    // RECV_B: receive the gradient consumed by `stage` from `peer`
  // A skip connection's messages, sent straight between the two stages of a crossing (see
  // crossing.hpp) that lie on different ranks: `stage` is this rank's end, `other` the far one.
  send_skip_forward,   // SEND_SKIP_F: send what `stage` produced for the later stage `other`
  recv_skip_forward,   // RECV_SKIP_F: receive what the earlier stage `other` produced for `stage`
  send_skip_backward,  // SEND_SKIP_B: send the gradient `stage` made for the earlier stage `other`
  recv_skip_backward,  // RECV_SKIP_B: receive the gradient the later stage `other` made for `stage`
};

inline constexpr int op_kind_count = 12;

constexpr bool is_compute(op_kind k) { return k <= op_kind::backward_weight; }
constexpr bool is_comm(op_kind k) { return !is_compute(k); }
constexpr bool is_skip(op_kind k) { return k >= op_kind::send_skip_forward; }
constexpr bool is_send(op_kind k) {
  return k == op_kind::send_forward || k == op_kind::send_backward || k == op_kind::send_skip_forward ||
         k == op_kind::send_skip_backward;
}
constexpr bool is_recv(op_kind k) { return is_comm(k) && !is_send(k); }
/// I or B: the op that produces the gradient sent to the previous stage.
constexpr bool is_input_backward(op_kind k) { return k == op_kind::backward || k == op_kind::backward_input; }

/// The short name used in every format: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, SEND_SKIP_F,
/// RECV_SKIP_F, SEND_SKIP_B, RECV_SKIP_B.
constexpr std::string_view op_name(op_kind k) {
  switch (k) {
    case op_kind::forward:
      return "F";
    case op_kind::backward:
      return "B";
    case op_kind::backward_input:
      return "I";
    case op_kind::backward_weight:
      return "W";
    case op_kind::send_forward:
      return "SEND_F";
    case op_kind::recv_forward:
      return "RECV_F";
    case op_kind::send_backward:
      return "SEND_B";
    case op_kind::recv_backward:
      return "RECV_B";
    case op_kind::send_skip_forward:
      return "SEND_SKIP_F";
    case op_kind::recv_skip_forward:
      return "RECV_SKIP_F";
    case op_kind::send_skip_backward:
      return "SEND_SKIP_B";
    case op_kind::recv_skip_backward:
      return "RECV_SKIP_B";
  }
  return "?";
}

/// Parses an op name; returns false when `s` names no op.
constexpr bool parse_op_name(std::string_view s, op_kind& out) {
  for (int i = 0; i < op_kind_count; ++i) {
    if (op_name(static_cast<op_kind>(i)) == s) {
      out = static_cast<op_kind>(i);
      return true;
    }
  }
  return false;
}

/// One op of a rank's program. A structural type: tables of tasks are usable as template arguments.
/// For SEND ops `stage` is the stage that produced the value, for RECV ops the stage that consumes
/// it; `peer` is the other rank (-1 for compute ops); `other`, for a skip message only, the stage at
/// the other end (-1 for every other op: a neighbour's message joins `stage` and the stage next to it).
///
/// `overlapped` marks the first half of an overlapped pair `F&B` (DualPipe): this forward and the
/// full backward right after it in the rank's program run as one task, with a cost of its own. Both
/// halves keep their own stage and microbatch, so every rule about F and B holds for each half; the
/// pair's inputs are all received before it starts and its outputs sent after it ends.
struct task {
  op_kind op = op_kind::forward;
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  std::int32_t peer = -1;
  bool overlapped = false;
  std::int32_t other = -1;

  friend constexpr bool operator==(const task&, const task&) = default;
};

namespace detail {
// Per-op-kind facts as arrays, for the hot loops of verification and analysis: an array lookup
// is part of an expression and costs no constant-evaluation step, a function call costs several
// (clang 14 stops a constant evaluation after 1M steps by default).
inline constexpr bool recv_op[op_kind_count] = {false, false, false, false, false, true,
                                                false, true,  false, true,  false, true};
inline constexpr bool send_op[op_kind_count] = {false, false, false, false, true, false,
                                                true,  false, true,  false, true, false};
inline constexpr bool comm_op[op_kind_count] = {false, false, false, false, true, true,
                                                true,  true,  true,  true,  true, true};
inline constexpr bool skip_op[op_kind_count] = {false, false, false, false, false, false,
                                                false, false, true,  true,  true,  true};
// The skip messages on the producing side of their crossing (`stage` made the value, `other` reads it).
inline constexpr bool skip_at_producer[op_kind_count] = {false, false, false, false, false, false,
                                                         false, false, true,  false, false, true};
// The ops of the backward pass: compute, and the messages that carry gradients (none of them in a
// forward-only table).
inline constexpr bool backward_op[op_kind_count] = {false, true, true,  true,  false, false,
                                                    true,  true, false, false, true,  true};
// The kind of the op a comm op pairs with, and where its stage lies: RECV_F(s) <-> SEND_F(s-1),
// RECV_B(s) <-> SEND_B(s+1); a skip message's partner is at its `other` stage (delta 0: unused).
inline constexpr op_kind partner_op[op_kind_count] = {
    op_kind::forward,           op_kind::backward,          op_kind::backward_input,     op_kind::backward_weight,
    op_kind::recv_forward,      op_kind::send_forward,      op_kind::recv_backward,      op_kind::send_backward,
    op_kind::recv_skip_forward, op_kind::send_skip_forward, op_kind::recv_skip_backward, op_kind::send_skip_backward};
// B or I: the op that consumes the incoming gradient and produces the outgoing one.
inline constexpr bool input_backward_op[op_kind_count] = {false, true,  true,  false, false, false,
                                                          false, false, false, false, false, false};
inline constexpr int partner_delta[op_kind_count] = {0, 0, 0, 0, 1, -1, -1, 1, 0, 0, 0, 0};
constexpr int kind_index(op_kind k) { return static_cast<int>(k); }
}  // namespace detail

constexpr task make_compute(op_kind k, int stage, int microbatch) { return task{k, stage, microbatch, -1}; }

/// The first half of an overlapped pair F&B: the forward of (stage, microbatch), to be followed
/// directly by the full backward it runs with.
constexpr task make_overlapped_forward(int stage, int microbatch) {
  return task{op_kind::forward, stage, microbatch, -1, true};
}

}  // namespace ctpipe
