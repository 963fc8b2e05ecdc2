// What every recorded step must show, whichever executor recorded it (the host executor's
// record_steps, the MPI executor's on process 0): every task ran once, within the step, in its
// rank's order; every receive ended after its send began, up to `slack` seconds (how far the
// clocks of two processes may be apart: 0 for one process).
#pragma once

#include <doctest/doctest.h>

#include <cstddef>

#include <ctpipe/analysis/measured.hpp>

namespace test {

template <class Table>
void check_record(const Table& t, const ctpipe::measured_step& m, double slack = 0.0) {
  REQUIRE(static_cast<int>(m.ranks.size()) == t.ranks());
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    const auto& row = m.ranks[static_cast<std::size_t>(r)];
    REQUIRE(row.size() == prog.size());
    for (std::size_t i = 0; i < row.size(); ++i) {
      CAPTURE(r);
      CAPTURE(i);
      CHECK(row[i].ran());
      CHECK(row[i].start >= 0.0);
      CHECK(row[i].end >= row[i].start);
      if (i > 0) CHECK(row[i].start >= row[i - 1].end);
      if (ctpipe::is_recv(prog[i].op)) {
        // Its send: on the peer, the op that pairs with it.
        const auto peer = t.program(prog[i].peer);
        for (std::size_t k = 0; k < peer.size(); ++k)
          if (ctpipe::is_send(peer[k].op) &&
              peer[k].stage == prog[i].stage + (prog[i].op == ctpipe::op_kind::recv_forward ? -1 : 1) &&
              peer[k].microbatch == prog[i].microbatch && peer[k].peer == r)
            CHECK(row[i].end + slack >= m.ranks[static_cast<std::size_t>(prog[i].peer)][k].start);
      }
    }
  }
}

}  // namespace test
