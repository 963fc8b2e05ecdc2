// Uneven work per microbatch (microbatch_scaled), at run time and at compile time.
#include <doctest/doctest.h>

#include <array>
#include <vector>

#include "support/test_util.hpp"

TEST_CASE("uneven work: microbatch_scaled multiplies each microbatch's ops") {
  const auto t = ctpipe::generate(ctpipe::gpipe(1, 3));
  const std::vector<double> factors{1.0, 2.0};  // microbatch 2: past the list, 1
  const ctpipe::microbatch_scaled scaled{ctpipe::cost_model{.forward = 1, .backward = 2}, factors};
  CHECK(scaled.of(0) == 1.0);
  CHECK(scaled.of(1) == 2.0);
  CHECK(scaled.of(2) == 1.0);
  CHECK(ctpipe::analyse(t, scaled).makespan == 3.0 * (1 + 2 + 1));
  // Messages keep their time unless asked; an overlapped pair keeps its ratio to its parts.
  const ctpipe::microbatch_scaled msgs{ctpipe::cost_model{.comm = 0.5, .overlap = 1.5}, factors, true};
  const ctpipe::task f{ctpipe::op_kind::forward, 0, 1}, b{ctpipe::op_kind::backward, 0, 1};
  const ctpipe::task send{ctpipe::op_kind::send_forward, 0, 1, 1};
  CHECK(msgs.message(send) == 1.0);
  CHECK(scaled.message(send) == 0.0);
  CHECK(msgs.pair(f, b) == doctest::Approx(2.0 * 1.5));
  // Two ranks: the heavy microbatch delays the others behind it.
  const auto two = ctpipe::generate(ctpipe::one_f_one_b(2, 2));
  const std::vector<double> heavy{1.0, 3.0};
  CHECK(ctpipe::analyse(two, ctpipe::microbatch_scaled{ctpipe::cost_model{.forward = 1, .backward = 2}, heavy})
            .makespan == 19.0);
}

TEST_CASE("uneven work at compile time") {
  static constexpr std::array<double, 4> factors{1.0, 0.5, 0.5, 2.0};
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
  constexpr auto even = ctpipe::analyse(table, ctpipe::cost_model{.forward = 1, .backward = 2});
  constexpr auto uneven =
      ctpipe::analyse(table, ctpipe::microbatch_scaled{ctpipe::cost_model{.forward = 1, .backward = 2}, factors});
  // The same total work (factors sum to 4), a longer step: the heavy last microbatch drains alone.
  static_assert(uneven.busy[0] == even.busy[0]);
  static_assert(uneven.makespan > even.makespan);
  CHECK(uneven.makespan > even.makespan);
}
