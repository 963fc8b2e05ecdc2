// The buffers of the hand-written straight-line baseline (bench/gen_straight_line.cpp writes the
// programs): the same layer, loss and stash slots as the executor's.
#pragma once
#include "tick.hpp"

#include <array>

namespace bench {

struct straight_line_state {
  tick layer;
  count_loss loss;
  const tick::input_type* in = nullptr;
  const int* targets = nullptr;
  double* losses = nullptr;
  std::array<tick::input_type, 4> x{};
  std::array<tick::output_type, 4> y{};
  tick::output_type dy{};
  tick::input_type dx{};
};

#define CTPIPE_STRAIGHT_LINE(M) void straight_line_##M(straight_line_state& s);
CTPIPE_STRAIGHT_LINE(8)
CTPIPE_STRAIGHT_LINE(32)
CTPIPE_STRAIGHT_LINE(128)
CTPIPE_STRAIGHT_LINE(512)
CTPIPE_STRAIGHT_LINE(2048)
#undef CTPIPE_STRAIGHT_LINE

}  // namespace bench
