// Compile-time behaviour of the model layer: the layer concept, the partitioner, stage bounds,
// boundary types, and the execution plan's slots.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <doctest/doctest.h>

#include <type_traits>

namespace {

using ctpipe::layers::dense;
using ctpipe::layers::matrix;

// A layer with a given cost and no parameters (identity on a 1x1 matrix).
template <int Cost>
struct cost_layer {
  using input_type = matrix<1, 1>;
  using output_type = matrix<1, 1>;
  static constexpr double cost = Cost;
  void forward(const input_type& x, output_type& y) const { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const { dx = dy; }
};

static_assert(ctpipe::layer<dense<2, 3, 4>>);
static_assert(ctpipe::has_parameters<dense<2, 3, 4>>);
static_assert(ctpipe::layer<cost_layer<1>>);
static_assert(!ctpipe::has_parameters<cost_layer<1>>);
static_assert(!ctpipe::layer<int>);
// A model that keeps every rule says so; the rules' messages are the compile-fail tests.
static_assert(ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>>::checked);
static_assert(ctpipe::splittable_layer<dense<2, 3, 4>>);  // the reference layer splits its backward (I, W)
static_assert(!ctpipe::splittable_layer<cost_layer<1>>);
// Which layers mean to split (model<...> then holds them to both signatures): any member named
// backward_input or backward_weight, overloaded or a template too; a final class by its one overload.
static_assert(ctpipe::declares_split_backward<dense<2, 3, 4>> && !ctpipe::declares_split_backward<cost_layer<1>>);
static_assert(!ctpipe::declares_split_backward<int>);
struct split_template {
  template <class T>
  void backward_weight(const T&) {}
};
struct split_final final {
  void backward_input(int) {}
};
struct plain_final final {};
static_assert(ctpipe::declares_split_backward<split_template> && ctpipe::declares_split_backward<split_final>);
static_assert(!ctpipe::declares_split_backward<plain_final>);
static_assert(ctpipe::loss_function<ctpipe::layers::softmax_cross_entropy<2, 4>, matrix<2, 4>>);
static_assert(!ctpipe::loss_function<ctpipe::layers::softmax_cross_entropy<2, 4>, matrix<2, 5>>);

struct no_cost {
  using input_type = matrix<1, 1>;
  using output_type = matrix<1, 1>;
  void forward(const input_type&, output_type&) const {}
  void backward(const input_type&, const output_type&, const output_type&, input_type&) const {}
};
static_assert(!ctpipe::layer<no_cost>);
struct run_time_cost : no_cost {
  static inline double cost = 1.0;  // not a constant: the partitioner could not read it
};
static_assert(!ctpipe::has_constant_cost<run_time_cost> && !ctpipe::layer<run_time_cost>);

using chain = ctpipe::model<dense<2, 3, 5>, dense<2, 5, 7>, dense<2, 7, 4>>;
static_assert(chain::size == 3);
static_assert(std::is_same_v<chain::input_type, matrix<2, 3>> && std::is_same_v<chain::output_type, matrix<2, 4>>);
static_assert(std::is_same_v<ctpipe::boundary_t<chain, 0>, matrix<2, 3>>);
static_assert(std::is_same_v<ctpipe::boundary_t<chain, 2>, matrix<2, 7>>);
static_assert(std::is_same_v<ctpipe::boundary_t<chain, 3>, matrix<2, 4>>);
static_assert(std::is_same_v<ctpipe::boundaries_t<chain, 1, 2>, std::tuple<matrix<2, 5>, matrix<2, 7>>>);
static_assert(
    std::is_same_v<ctpipe::activations_t<chain>, std::tuple<matrix<2, 3>, matrix<2, 5>, matrix<2, 7>, matrix<2, 4>>>);
static_assert(chain::costs[1] == 2.0 * 2 * 5 * 7);

// Partition: minimise the largest stage.
using costs = ctpipe::model<cost_layer<4>, cost_layer<1>, cost_layer<1>, cost_layer<1>, cost_layer<1>, cost_layer<4>>;
constexpr auto two = ctpipe::partition<costs, 2>();
static_assert(two.first == std::array<int, 3>{0, 3, 6});  // 6 | 6
static_assert(two.max_stage_cost == 6.0 && two.cost == std::array<double, 2>{6.0, 6.0});
constexpr auto three = ctpipe::partition<costs, 3>();
static_assert(three.first == std::array<int, 4>{0, 1, 5, 6});  // 4 | 4 | 4
static_assert(three.max_stage_cost == 4.0);
static_assert(ctpipe::partition<costs, 6>().max_stage_cost == 4.0);
static_assert(ctpipe::partition<costs, 1>().first == std::array<int, 2>{0, 6});
// A boundary cost above every stage's cost dominates.
static_assert(ctpipe::partition<costs, 3>(10.0).max_stage_cost == 10.0);
static_assert(ctpipe::partition<costs, 2>(3.0).first == std::array<int, 3>{0, 3, 6});
// Equal optima: the earliest boundaries.
using flat = ctpipe::model<cost_layer<1>, cost_layer<1>, cost_layer<1>>;

// for_each_layer: every layer once, in order, each with its own type (no Hana in user code).
constexpr double sum_of_costs_in_order() {
  costs m;
  double sum = 0, weight = 1;
  ctpipe::for_each_layer(m, [&](auto& l) {
    sum += weight * std::remove_cvref_t<decltype(l)>::cost;
    weight *= 10;
  });
  return sum;
}
static_assert(sum_of_costs_in_order() == 4 + 10 + 100 + 1000 + 10000 + 400000);
// Host layers are not device layers: the model layer's hook leaves them to the host rules.
static_assert(!ctpipe::device_layer_traits<dense<2, 3, 4>>::claimed);
static_assert(!ctpipe::has_device_layer_v<chain>);
static_assert(ctpipe::partition<flat, 2>().first == std::array<int, 3>{0, 1, 3});
// A brute force over every split agrees for 4 stages of a lopsided model.
using lopsided = ctpipe::model<cost_layer<7>, cost_layer<2>, cost_layer<9>, cost_layer<1>, cost_layer<3>, cost_layer<8>,
                               cost_layer<2>, cost_layer<5>>;
constexpr double brute_force_4() {
  double best = 1e300;
  for (int a = 1; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b)
      for (int c = b + 1; c < 8; ++c) {
        const int cut[5] = {0, a, b, c, 8};
        double worst = 0;
        for (int s = 0; s < 4; ++s) {
          double sum = 0;
          for (int l = cut[s]; l < cut[s + 1]; ++l) sum += lopsided::costs[static_cast<std::size_t>(l)];
          worst = sum > worst ? sum : worst;
        }
        best = worst < best ? worst : best;
      }
  return best;
}
static_assert(ctpipe::partition<lopsided, 4>().max_stage_cost == brute_force_4());
// Priced by the bytes each stage sends: negligibly, the same split; on `chain` (layer costs 60, 140,
// 112), the cut after layer 1 (its 2 x 7 floats) at 5 a byte costs more than the stage it saves.
static_assert(ctpipe::partition<lopsided, 4>(0.0, 1e-9).first == ctpipe::partition<lopsided, 4>().first);
static_assert(ctpipe::partition<chain, 2>().first == std::array<int, 3>{0, 2, 3});
static_assert(ctpipe::partition<chain, 2>(0.0, 5.0).first == std::array<int, 3>{0, 1, 3});
static_assert(ctpipe::partition<chain, 2>(0.0, 5.0).max_stage_cost == 252.0);  // 140 + 112
static_assert(ctpipe::partition<chain, 2>(100.0, 5.0).max_stage_cost == 100.0 + 5.0 * sizeof(matrix<2, 5>) &&
              100.0 + 5.0 * sizeof(matrix<2, 5>) > 252.0);

// Explicit bounds and recomputation flags.
constexpr auto bounds = ctpipe::stage_bounds<costs, 0, 2, 6>();
static_assert(bounds.first == std::array<int, 3>{0, 2, 6} && bounds.cost == std::array<double, 2>{5.0, 7.0});
static_assert(bounds.stage_of_layer(0) == 0 && bounds.stage_of_layer(1) == 0 && bounds.stage_of_layer(2) == 1 &&
              bounds.stage_of_layer(5) == 1);
static_assert(!bounds.recompute[0] && bounds.with_recompute(1).recompute == std::array<bool, 2>{false, true});
static_assert(bounds.recompute_all().recompute == std::array<bool, 2>{true, true});

// The execution plan: stash slots per stage follow liveness (1F1B: p - s on stage s; GPipe: m).
constexpr auto plan_1f1b = ctpipe::make_execution_plan<ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>()>();
static_assert(plan_1f1b.stash_slots == std::array<int, 4>{4, 3, 2, 1});
static_assert(plan_1f1b.channel_capacity[0] >= 1 && plan_1f1b.channel_capacity[3] == 0);
// A step's messages across each boundary between ranks, each way (what a receiving rank posts
// ahead): every microbatch once; none across a rank's own boundary; a forward-only table's
// gradients none; DualPipe's two chains half the microbatches each, none across their joint.
static_assert(plan_1f1b.forward_messages == std::array<int, 4>{8, 8, 8, 0} &&
              plan_1f1b.backward_messages == std::array<int, 4>{8, 8, 8, 0});
static_assert(
    ctpipe::make_execution_plan<ctpipe::make_forward_table<ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>()>()>()
        .backward_messages == std::array<int, 4>{});
constexpr auto plan_dualpipe = ctpipe::make_execution_plan<ctpipe::make_table<ctpipe::dualpipe(4, 8)>()>();
static_assert(plan_dualpipe.forward_messages == std::array<int, 8>{4, 4, 4, 0, 4, 4, 4, 0} &&
              plan_dualpipe.backward_messages == plan_dualpipe.forward_messages);
constexpr auto plan_gpipe = ctpipe::make_execution_plan<ctpipe::make_table<ctpipe::gpipe(4, 8)>()>();
static_assert(plan_gpipe.stash_slots == std::array<int, 4>{8, 8, 8, 8});
// make_lowered_table lowers a compute table to make_table's table, and a lowered one to itself.
static_assert(ctpipe::same_programs(ctpipe::make_lowered_table<ctpipe::make_compute_table<ctpipe::gpipe(4, 8)>()>(),
                                    ctpipe::make_table<ctpipe::gpipe(4, 8)>()));
static_assert(ctpipe::same_programs(ctpipe::make_lowered_table<ctpipe::make_table<ctpipe::interleaved(2, 4, 2)>()>(),
                                    ctpipe::make_table<ctpipe::interleaved(2, 4, 2)>()));
// A compute table is lowered by the plan: same as planning the lowered table.
static_assert(ctpipe::make_execution_plan<ctpipe::make_compute_table<ctpipe::gpipe(4, 8)>()>().slots ==
              plan_gpipe.slots);
// p = 1 with two chunks: stages hand over on the same rank, through local slots.
constexpr auto plan_local = ctpipe::make_execution_plan<ctpipe::make_table<ctpipe::interleaved(1, 4, 2)>()>();
static_assert(plan_local.local_forward_slots[0] >= 1 && plan_local.local_backward_slots[0] >= 1);
static_assert(plan_local.channel_capacity[0] == 0);
static_assert(plan_local.forward_messages == std::array<int, 2>{} &&
              plan_local.backward_messages == std::array<int, 2>{});
static_assert(plan_local.backward_in_order == std::array<bool, 2>{true, true});

// A rank's program as the executor core runs it: its distinct (rank, op, stage) codes in order of
// first use, and one entry a task carrying the task's microbatch and slots.
constexpr auto plan_small = ctpipe::make_execution_plan<ctpipe::make_table<ctpipe::one_f_one_b(2, 3)>()>();
constexpr auto walk_0 = ctpipe::detail::make_rank_program<plan_small, 0>();
constexpr auto walk_1 = ctpipe::detail::make_rank_program<plan_small, 1>();
using ctpipe::op_kind;
using ctpipe::detail::task_code;
static_assert(walk_0.codes == std::array<task_code, 4>{{{0, op_kind::forward, 0},
                                                        {0, op_kind::send_forward, 0},
                                                        {0, op_kind::recv_backward, 0},
                                                        {0, op_kind::backward, 0}}});
static_assert(walk_1.codes == std::array<task_code, 4>{{{1, op_kind::recv_forward, 1},
                                                        {1, op_kind::forward, 1},
                                                        {1, op_kind::backward, 1},
                                                        {1, op_kind::send_backward, 1}}});
// A long program (one rank's 1,024 tasks: GPipe's 512 Fs, then its 512 Bs) stays within both
// compilers' constexpr step limits: counting its codes compares each task with the codes found so
// far, not with the earlier tasks (each B with the 512 Fs before it passed clang's 1,048,576 steps).
constexpr auto long_tasks = [] {
  std::array<ctpipe::detail::program_task<ctpipe::detail::task_args>, 1024> t{};
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = {{0, i < 512 ? op_kind::forward : op_kind::backward, 0, -1}, {static_cast<int>(i % 512), 0, -1, -1, -1}};
  return t;
}();
constexpr auto long_program = ctpipe::detail::make_program<long_tasks>();
static_assert(long_program.code_count == 2 && long_program.entries[1023].code == 1 &&
              long_program.entries[1023].args.microbatch == 511);
static_assert(walk_0.entries.size() == static_cast<std::size_t>(plan_small.table.length[0]));
constexpr bool walk_matches_plan(int r, const auto& w) {
  for (std::size_t i = 0; i < w.entries.size(); ++i) {
    const ctpipe::task& t = plan_small.table.programs[static_cast<std::size_t>(r)][i];
    const auto& e = w.entries[i];
    const task_code& c = w.codes[static_cast<std::size_t>(e.code)];
    if (c.rank != r || c.op != t.op || c.stage != t.stage ||
        !(e.args == ctpipe::detail::args_of(t, plan_small.slots[static_cast<std::size_t>(r)][i])))
      return false;
  }
  return true;
}
static_assert(walk_matches_plan(0, walk_0) && walk_matches_plan(1, walk_1));
static_assert(walk_0.entries[4].args ==
              ctpipe::detail::task_args{0, -1, -1, -1, 0});  // RECV_B of microbatch 0: message 0

}  // namespace

TEST_CASE("model: the partition and plan values are also right at run time") {
  CHECK(ctpipe::partition<lopsided, 4>().max_stage_cost == brute_force_4());
  CHECK(plan_1f1b.table.size() == ctpipe::generate(ctpipe::one_f_one_b(4, 8)).size());
}
