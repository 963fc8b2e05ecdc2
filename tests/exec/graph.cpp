// Models shaped like graphs on the host executor, past what the numerics sweeps' residual model
// (test::block_mlp) reaches: a layer with two outputs read on another stage, a tensor read by four
// layers on three stages (two of them on a stage that is not the farthest: their gradients travel
// apart, so that the sum is sequential_step's to the bit), the model's input read past three
// stages (a skip message whose gradient message is empty), skip connections within one rank
// (interleaved, V), recomputing stages, split backward. Every step bitwise equal to sequential
// training.
#include "support/numerics.hpp"

#include <ctpipe/detail/each.hpp>
#include <ctpipe/exec/detail/graph_walk.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using ctpipe::back, ctpipe::from, ctpipe::node;
using test::batch, test::features, test::hidden, test::classes;
using m_h = ctpipe::layers::matrix<batch, hidden>;
using m_f = ctpipe::layers::matrix<batch, features>;

// Two outputs: (x, 2x).
struct fork {
  using input_type = m_h;
  using output_type = ctpipe::tensors<m_h, m_h>;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const {
    auto& [a, b] = y;
    for (std::size_t i = 0; i < x.v.size(); ++i) {
      a.v[i] = x.v[i];
      b.v[i] = 2.0f * x.v[i];
    }
  }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    const auto& [da, db] = dy;
    for (std::size_t i = 0; i < dx.v.size(); ++i) dx.v[i] = da.v[i] + 2.0f * db.v[i];
  }
};

// y = a + (b in the first `features` columns): the model's input joins late.
struct mix {
  using input_type = ctpipe::tensors<m_h, m_f>;
  using output_type = m_h;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const {
    const auto& [a, b] = x;
    y = a;
    for (std::size_t r = 0; r < batch; ++r)
      for (std::size_t c = 0; c < features; ++c) y(r, c) += b(r, c);
  }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    auto& [da, db] = dx;
    da = dy;
    for (std::size_t r = 0; r < batch; ++r)
      for (std::size_t c = 0; c < features; ++c) db(r, c) = dy(r, c);
  }
};

using add = ctpipe::layers::add<batch, hidden>;
using dense_h = test::dense<batch, hidden, hidden, test::activation::none>;
using fan = ctpipe::model<test::dense<batch, features, hidden>,                          // 0: h0
                          fork,                                                          // 1: (h0, 2 h0)
                          node<dense_h, from<1, 0>>,                                     // 2
                          node<add, back<1>, from<1, 1>>,                                // 3: 2 + fork's second
                          node<add, back<1>, from<0>>,                                   // 4: 3 + h0
                          ctpipe::layers::layer_norm<batch, hidden>,                     // 5
                          node<add, back<1>, from<0>>,                                   // 6: 5 + h0
                          dense_h,                                                       // 7
                          node<mix, back<1>, from<-1>>,                                  // 8: 7 + the model's input
                          node<add, back<1>, from<0>>,                                   // 9: 8 + h0
                          test::dense<batch, hidden, classes, test::activation::none>>;  // 10

// Five stages: {0, 1} {2, 3} {4, 5, 6} {7, 8} {9, 10}. h0 goes to stages 2 and 4 (skip messages)
// and the model's input to stage 3; fork's two outputs both go to stage 1.
constexpr auto five = ctpipe::stage_bounds<fan, 0, 2, 4, 7, 9, 11>();
static_assert(ctpipe::model_crossings<fan, five>() == std::array{ctpipe::crossing{0, 2, sizeof(m_h)},
                                                                 ctpipe::crossing{0, 3, sizeof(m_f)},
                                                                 ctpipe::crossing{0, 4, sizeof(m_h)}});
using wiring = ctpipe::detail::graph_wiring<fan, five>;
// Stage 1 takes both of fork's outputs in one message, and sends back one gradient for each.
static_assert(wiring::wire_count(0, 1) == 2 && wiring::term_count(1, 0) == 2);
// Stage 2 reads h0 twice but stage 4 reads it too: its two contributions go back apart; stage 4,
// the farthest reader, sends one; the model's input needs none.
static_assert(wiring::wire_count(0, 2) == 1 && wiring::term_count(2, 0) == 2);
static_assert(wiring::wire_count(0, 4) == 1 && wiring::term_count(4, 0) == 1);
static_assert(wiring::wire_count(0, 3) == 1 && wiring::term_count(3, 0) == 0);
static_assert(wiring::term_starts(4, 0, 0) && !wiring::term_starts(2, 0, 0) && !wiring::term_starts(2, 0, 1));

// Each tensor's gradient as the graph walk sums it (exec/detail/graph_walk.hpp, the one order of
// every backend), written out: the stages' B walked from the last (a later stage's gradient
// message comes first), each contribution named "dL.P" (layer L's input part P), copied where it
// starts what it goes to, "(x + y)" where it is added. Keyed by (layer, output part). The walk
// hands each step's constants to plain functions (the strings are compiled once).
class sum_writer {
 public:
  using sums = std::map<std::pair<int, int>, std::string>;
  // Stage s takes term t of stage b's gradient message.
  void term(int b, int s, int t, ctpipe::detail::part_link to) {
    into(grads_[{to.layer, to.output}], to.starts, messages_.at({b, s}).at(static_cast<std::size_t>(t)));
  }
  // Stage s's layer's input part's gradient, into its source's (the message back has `terms`).
  void contribution(int s, int layer, int part, int terms, ctpipe::detail::part_link to) {
    const std::string c = "d" + std::to_string(layer) + "." + std::to_string(part);
    if (to.stage < 0) return into(grads_[{to.layer, to.output}], to.starts, c);
    auto& m = messages_[{s, to.stage}];
    m.resize(static_cast<std::size_t>(terms));
    into(m.at(static_cast<std::size_t>(to.term)), to.starts, c);
  }
  const sums& result() const { return grads_; }

 private:
  static void into(std::string& to, bool starts, const std::string& c) { to = starts ? c : "(" + to + " + " + c + ")"; }
  sums grads_;
  std::map<std::pair<int, int>, std::vector<std::string>> messages_;  // (from, to): the terms
};

template <class Model, auto Stages>
sum_writer::sums walked_sums() {
  constexpr auto crossings = ctpipe::model_crossings<Model, Stages>();
  using walk = ctpipe::detail::graph_walk<Model, Stages, crossings>;
  constexpr int n = Stages.stages();
  sum_writer w;
  ctpipe::detail::each<n>([&](auto r) {
    constexpr int S = n - 1 - decltype(r)::value;
    walk::template backward<S>(
        [&](auto sender) {
          walk::template each_term<decltype(sender)::value, S>(
              [&](auto t, auto l) { w.term(decltype(sender)::value, S, decltype(t)::value, decltype(l)::value); });
        },
        [](auto) {}, [](auto) {},
        [&](auto layer, auto p, auto l) {
          constexpr ctpipe::detail::part_link to = decltype(l)::value;
          w.contribution(S, decltype(layer)::value, decltype(p)::value,
                         to.stage >= 0 ? walk::wiring::term_count(S, to.stage) : 0, to);
        });
  });
  return w.result();
}

// The same sums as sequential_step makes them: each tensor's readers in the backward's order (the
// last reader first, a reader's input parts in order), the first copied, each next one added.
template <class Model>
std::map<std::pair<int, int>, std::string> sequential_sums() {
  std::map<std::pair<int, int>, std::vector<ctpipe::edge>> readers;
  for (const ctpipe::edge& e : Model::edges)
    if (e.producer >= 0) readers[{e.producer, e.output}].push_back(e);
  std::map<std::pair<int, int>, std::string> sums;
  for (auto& [tensor, es] : readers) {
    std::sort(es.begin(), es.end(), [](const ctpipe::edge& x, const ctpipe::edge& y) {
      return x.consumer > y.consumer || (x.consumer == y.consumer && x.input < y.input);
    });
    std::string s;
    for (const ctpipe::edge& e : es) {
      const std::string c = "d" + std::to_string(e.consumer) + "." + std::to_string(e.input);
      s = s.empty() ? c : "(" + s + " + " + c + ")";
    }
    sums[tensor] = s;
  }
  return sums;
}

template <auto Schedule, auto Stages, ctpipe::dispatch D = ctpipe::dispatch::table_walk>
void train(int steps = 30) {
  test::train_against_sequential<test::table_for<Schedule, fan, Stages>(), Stages, D, fan>(steps);
}

}  // namespace

TEST_CASE("the graph walk sums every gradient in sequential_step's order, whatever the partition") {
  // h0 (layer 0's output) has four readers, on up to four stages; fork's second output one on the
  // next stage. The order of each sum is the backends' one order (host and CUDA alike).
  const auto expected = sequential_sums<fan>();
  CHECK(expected.at({0, 0}) == "(((d9.1 + d6.1) + d4.1) + d1.0)");
  CHECK(walked_sums<fan, five>() == expected);
  CHECK(walked_sums<fan, ctpipe::stage_bounds<fan, 0, 2, 6, 9, 11>()>() == expected);
  CHECK(walked_sums<fan, ctpipe::stage_bounds<fan, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11>()>() == expected);
  CHECK(walked_sums<fan, ctpipe::stage_bounds<fan, 0, 11>()>() == expected);
  CHECK(walked_sums<test::block_mlp, ctpipe::partition<test::block_mlp, 4>()>() == sequential_sums<test::block_mlp>());
}

TEST_CASE("host executor: a graph model whose tensors skip stages trains bitwise, 1F1B and ZB-H1 on five ranks") {
  SUBCASE("1F1B, unrolled") { train<ctpipe::one_f_one_b(5, 10), five, ctpipe::dispatch::unrolled>(); }
  SUBCASE("ZB-H1 (split backward)") { train<ctpipe::zb_h1(5, 10), five>(); }
  SUBCASE("GPipe, stages 1 and 2 recomputing") {
    train<ctpipe::gpipe(5, 10), five.with_recompute(1).with_recompute(2)>();
  }
}

TEST_CASE("host executor: skip messages between stages on one rank, interleaved and ZB-V") {
  // Four stages {0, 1} {2..5} {6, 7, 8} {9, 10}, stage s on rank s % 2 (interleaved) or in a V
  // (ZB-V: 0 and 3 on rank 0): h0 goes to stage 2 on its own rank (interleaved) and to stage 3.
  constexpr auto four = ctpipe::stage_bounds<fan, 0, 2, 6, 9, 11>();
  static_assert(ctpipe::model_crossings<fan, four>().size() == 2);
  SUBCASE("interleaved") { train<ctpipe::interleaved(2, 8, 2), four>(); }
  SUBCASE("interleaved, stage 2 recomputing") { train<ctpipe::interleaved(2, 8, 2), four.with_recompute(2)>(); }
  SUBCASE("ZB-V") { train<ctpipe::zb_v(2, 8), four>(); }
  SUBCASE("one rank") { train<ctpipe::one_f_one_b(1, 4), ctpipe::stage_bounds<fan, 0, 11>()>(); }
}

// How many ops of kind `op` a table holds.
template <auto Table>
constexpr int count_ops(ctpipe::op_kind op) {
  int n = 0;
  for (int r = 0; r < Table.ranks(); ++r)
    for (const ctpipe::task& t : Table.program(r)) n += t.op == op;
  return n;
}

TEST_CASE("host executor: a skip from stage 0 to stage 3 at p = 4, sent straight, 1F1B, interleaved and ZB-V") {
  // block_mlp as the partitioner splits it at four stages: {0} {1} {2} {3..9}; layer 3 reads layer
  // 0's output, which skips stages 1 and 2. The neighbours' messages carry one tensor each (the
  // skipped one is not relayed), the skip message one; the table sends it once a microbatch, each
  // way, from rank 0 to rank 3 and back.
  constexpr auto four = ctpipe::partition<test::block_mlp, 4>();
  static_assert(four.first == std::array{0, 1, 2, 3, 10});
  static_assert(ctpipe::model_crossings<test::block_mlp, four>() == std::array{ctpipe::crossing{0, 3, sizeof(m_h)}});
  using g = ctpipe::detail::graph_stage_types<test::block_mlp, four>;
  static_assert(sizeof(g::message_t<1, 2>) == sizeof(m_h) && sizeof(g::message_t<2, 3>) == sizeof(m_h) &&
                sizeof(g::message_t<0, 3>) == sizeof(m_h));
  constexpr auto t = test::table_for<ctpipe::one_f_one_b(4, 8), test::block_mlp, four>();
  static_assert(
      count_ops<t>(ctpipe::op_kind::send_skip_forward) == 8 && count_ops<t>(ctpipe::op_kind::recv_skip_forward) == 8 &&
      count_ops<t>(ctpipe::op_kind::send_skip_backward) == 8 && count_ops<t>(ctpipe::op_kind::recv_skip_backward) == 8);
  SUBCASE("1F1B") { test::train_against_sequential<t, four, ctpipe::dispatch::unrolled, test::block_mlp>(20); }
  // Eight stages (interleaved, ZB-V), one layer each but the last: layer 0 on stage 0 reads into
  // layer 3 on stage 3, and layer 3's output into layer 8 on stage 7.
  constexpr auto eight = ctpipe::stage_bounds<test::block_mlp, 0, 1, 2, 3, 4, 5, 6, 7, 10>();
  static_assert(ctpipe::model_crossings<test::block_mlp, eight>() ==
                std::array{ctpipe::crossing{0, 3, sizeof(m_h)}, ctpipe::crossing{3, 7, sizeof(m_h)}});
  SUBCASE("interleaved") {
    constexpr auto ti = test::table_for<ctpipe::interleaved(4, 8, 2), test::block_mlp, eight>();
    test::train_against_sequential<ti, eight, ctpipe::dispatch::table_walk, test::block_mlp>(20);
  }
  SUBCASE("ZB-V") {
    // V placement: stages 0 and 7 on rank 0, 3 and 4 on rank 3: the skip 3 -> 7 goes from rank 3 to
    // rank 0, and 0 -> 3 from rank 0 to rank 3.
    constexpr auto tv = test::table_for<ctpipe::zb_v(4, 8), test::block_mlp, eight>();
    static_assert(tv.stage_rank[0] == 0 && tv.stage_rank[3] == 3 && tv.stage_rank[7] == 0);
    test::train_against_sequential<tv, eight, ctpipe::dispatch::table_walk, test::block_mlp>(20);
  }
}

TEST_CASE("host executor: graph stages count what they keep in activation_bytes") {
  // Recomputing keeps only what a stage took in, per slot: less than every layer's tensors.
  constexpr auto s = ctpipe::stage_bounds<fan, 0, 2, 4, 7, 9, 11>();
  constexpr auto t = test::table_for<ctpipe::one_f_one_b(5, 10), fan, s>();
  using kept = ctpipe::host_executor<t, fan, s, test::loss>;
  using recomputed = ctpipe::host_executor<t, fan, s.with_recompute(2), test::loss>;
  CHECK(recomputed::activation_bytes()[2] < kept::activation_bytes()[2]);
  CHECK(recomputed::activation_bytes()[0] == kept::activation_bytes()[0]);
}
