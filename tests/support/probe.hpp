// A probe of saved state, for the executors' tests: the identity, with a saved state its forward
// stamps with its context (microbatch, layer, step) and every reader checks, counting writes and
// reads; a state read by the wrong microbatch, layer or step, or a W that does not find what its I
// kept, is counted as wrong. And a recorder of the context every call gets. On the simulated
// device both run inside the kernels (sim_of<probe>, sim_of<recorder>).
#pragma once
#include "mlp.hpp"  // microbatches

#include <ctpipe/layers/dense.hpp>  // matrix
#include <ctpipe/model/context.hpp>
#include <ctpipe/schedule/task.hpp>  // op_kind

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace test {

using ctpipe::layers::matrix;

// What the probes of one step saw.
struct probe_counts {
  std::atomic<int> writes{0};  // saved by an F (a recomputed forward writes again, not counted)
  std::atomic<int> full{0};    // read by a B
  std::atomic<int> input{0};   // read (and kept) by an I
  std::atomic<int> weight{0};  // read by a W
  std::atomic<int> wrong{0};   // read a state that is not its own microbatch's, layer's and step's
  void reset() {
    for (auto* c : {&writes, &full, &input, &weight, &wrong}) c->store(0);
  }
};
inline probe_counts counts;

// The identity, with a saved state stamped by its forward: the microbatch, step and layer it is for.
template <std::size_t Rows, std::size_t Cols>
struct probe {
  using input_type = matrix<Rows, Cols>;
  using output_type = matrix<Rows, Cols>;
  struct saved_type {
    int microbatch = -1, layer = -1;
    std::uint64_t step = ~std::uint64_t{0};
    int read_by_input = 0;
    bool operator==(const saved_type&) const = default;
  };
  static constexpr double cost = 1.0;

  void forward(const ctpipe::context& c, const input_type& x, output_type& y, saved_type& s) const {
    y = x;
    s = {c.microbatch, c.layer, c.step, 0};
    if (c.op == ctpipe::op_kind::forward) ++counts.writes;
  }
  static void check(const ctpipe::context& c, const saved_type& s) {
    if (s.microbatch != c.microbatch || s.layer != c.layer || s.step != c.step) ++counts.wrong;
  }
  void backward(const ctpipe::context& c, const input_type&, const output_type&, const saved_type& s,
                const output_type& dy, input_type& dx) const {
    check(c, s);
    ++counts.full;
    dx = dy;
  }
  void backward_input(const ctpipe::context& c, const input_type&, const output_type&, saved_type& s,
                      const output_type& dy, input_type& dx) const {
    check(c, s);
    ++counts.input;
    ++s.read_by_input;  // what the W must find
    dx = dy;
  }
  void backward_weight(const ctpipe::context& c, const input_type&, const output_type&, const saved_type& s,
                       const output_type&) const {
    check(c, s);
    if (s.read_by_input != 1) ++counts.wrong;  // its I's state, kept
    ++counts.weight;
  }
};

// A layer that records the context of every call it gets, per microbatch and op.
struct seen_call {
  int rank = -1, stage = -1, layer = -1, microbatch = -1;
  std::uint64_t step = 0;
};
inline seen_call seen[microbatches][4];  // [microbatch][op: F, B, I, W]

template <std::size_t Rows, std::size_t Cols>
struct recorder {
  using input_type = matrix<Rows, Cols>;
  using output_type = matrix<Rows, Cols>;
  static constexpr double cost = 1.0;
  static void note(const ctpipe::context& c) {
    seen[c.microbatch % microbatches][static_cast<int>(c.op)] = {c.rank, c.stage, c.layer, c.microbatch, c.step};
  }
  void forward(const ctpipe::context& c, const input_type& x, output_type& y) const {
    note(c);
    y = x;
  }
  void backward(const ctpipe::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) const {
    note(c);
    dx = dy;
  }
};

// Every microbatch's F and B of the last step were seen at (rank, stage, layer), with the global
// microbatch first + i, at step `step`.
inline void check_seen(int rank, int stage, int layer, int first, std::uint64_t step) {
  for (int i = 0; i < microbatches; ++i)
    for (int op : {0, 1}) {
      CAPTURE(i);
      CAPTURE(op);
      const seen_call& s = seen[(first + i) % microbatches][op];
      CHECK(s.rank == rank);
      CHECK(s.stage == stage);
      CHECK(s.layer == layer);
      CHECK(s.microbatch == first + i);
      CHECK(s.step == step);
    }
}

}  // namespace test
