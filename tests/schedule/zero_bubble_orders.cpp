// PyTorch's interleaved zero bubble (ZB1P) written a second way, as PyTorch's generator states its
// rule: one loop over op indices with a counter per stage, forwards visiting chunk
// (op / M) mod v, backwards chunk v-1 - ((op - warm-up) / M) mod v, and each W taking the stage of
// the oldest backward without its W. ctpipe's generator (grouped slots) must give the same
// per-rank compute order for every (p, m, v) both accept, p <= 8, m <= 32, v <= 4.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "support/test_util.hpp"

namespace {

std::vector<ctpipe::task> zb1p_reference(int p, int m, int v, int r) {
  using ctpipe::op_kind;
  const int rounds = std::max(1, m / p), per_round = m / rounds;
  const int warmup = std::min((v - 1) * per_round + (p - 1 - r), m * v);
  const int total = m * v;  // forwards (and backwards) of this rank
  auto forward_stage = [&](int op) { return ((op / per_round) % v) * p + r; };
  auto backward_stage = [&](int op) { return (v - 1 - ((op - warmup) / per_round) % v) * p + r; };
  std::map<int, int> next_f, next_b, next_w;  // per stage: the next microbatch of each kind
  std::vector<int> backward_ops;              // op index of every backward so far
  std::size_t weights = 0;
  std::vector<ctpipe::task> out;
  auto push = [&](op_kind k, int stage, std::map<int, int>& next) {
    out.push_back(ctpipe::make_compute(k, stage, next[stage]++));
  };
  auto weight = [&] { push(op_kind::backward_weight, backward_stage(backward_ops[weights++]), next_w); };
  for (int op = 0; op < warmup + total; ++op) {
    if (op < warmup) {
      push(op_kind::forward, forward_stage(op), next_f);
      continue;
    }
    if (op < total) push(op_kind::forward, forward_stage(op), next_f);  // the 1F1B phase: F, then I
    push(op_kind::backward_input, backward_stage(op), next_b);
    backward_ops.push_back(op);
    if (op - warmup >= r) weight();
  }
  while (weights < backward_ops.size()) weight();
  return out;
}

}  // namespace

TEST_CASE("interleaved zero bubble equals PyTorch's ZB1P rule for every p <= 8, m <= 32, v <= 4") {
  int compared = 0;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m)
      for (int v = 1; v <= 4; ++v) {
        const auto s = ctpipe::interleaved_zero_bubble(p, m, v);
        if (!ctpipe::validate(s).ok()) continue;
        const auto t = ctpipe::generate_compute(s);
        for (int r = 0; r < p; ++r) {
          const auto ref = zb1p_reference(p, m, v, r);
          const auto got = t.program(r);
          if (!std::equal(got.begin(), got.end(), ref.begin(), ref.end()))
            FAIL_CHECK("p=", p, " m=", m, " v=", v, " rank ", r, ": ", test::compute_order(t, r, true));
        }
        ++compared;
      }
  CHECK(compared > 500);
  MESSAGE("schedules compared: ", compared);
}
