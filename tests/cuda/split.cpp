// The simulated CUDA executor with split backward and overlapped pairs: the plan at compile time
// (stash copies, grad stashes, a second stream per rank and its events), and which call runs where
// at run time: I calls backward_input, W backward_weight, and the B of a pair F&B runs on the rank's
// second stream while its F runs on the rank's own. DualPipeV and DualPipe at p = 2.
#include "support/sim_numerics.hpp"

#include <doctest/doctest.h>

#include <tuple>
#include <vector>

namespace {

using namespace test::device;
using ctpipe::op_kind;
using ctpipe::cuda::handoff;

// What each layer call saw: the call, the task's stage and microbatch, and the stream.
struct call_record {
  const char* call;
  int stage, microbatch;
  CUstream_st* stream;
};
std::vector<call_record>& calls() {
  static std::vector<call_record> v;
  return v;
}

template <std::size_t In, std::size_t Out, test::activation Act = test::activation::relu>
struct logged : sim_split_dense<test::batch, In, Out, Act> {
  using base = sim_split_dense<test::batch, In, Out, Act>;
  using typename base::input_type;
  using typename base::output_type;
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    calls().push_back({"forward", c.stage, c.microbatch, c.stream});
    base::forward(c, x, y);
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) {
    calls().push_back({"backward", c.stage, c.microbatch, c.stream});
    base::backward(c, x, y, dy, dx);
  }
  void backward_input(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                      input_type& dx) {
    calls().push_back({"backward_input", c.stage, c.microbatch, c.stream});
    base::backward_input(c, x, y, dy, dx);
  }
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type& y,
                       const output_type& dy) {
    calls().push_back({"backward_weight", c.stage, c.microbatch, c.stream});
    base::backward_weight(c, x, y, dy);
  }
};
using logged_mlp =
    ctpipe::model<logged<test::features, test::hidden>, logged<test::hidden, test::hidden>,
                  logged<test::hidden, test::hidden>, logged<test::hidden, test::classes, test::activation::none>>;

constexpr auto dpv = ctpipe::make_table<ctpipe::dualpipe_v(2, 4)>();
using dpv_exec = sim_executor<dpv, 0, ctpipe::dispatch::automatic, logged_mlp>;
constexpr auto zbh1 = ctpipe::make_table<ctpipe::zb_h1(2, 4)>();
using zbh1_exec = sim_executor<zbh1, 0, ctpipe::dispatch::automatic, split_mlp>;
constexpr auto f1b1 = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using f1b1_exec = sim_executor<f1b1, 0, ctpipe::dispatch::automatic, split_mlp>;

// With split backward on one device, a stage copies its input out of the producer's stash (which
// may be reused before the consumer's W); without, it reads it in place.
static_assert(zbh1_exec::issue.forward[0] == handoff::stash_copy);
static_assert(f1b1_exec::issue.forward[0] == handoff::pointer);
static_assert(dpv_exec::issue.forward[1] == handoff::stash_copy);  // the V turn, on rank 1
// A grad stash per stage only with split backward; a second stream's events only with pairs.
static_assert(zbh1_exec::layout.memory.grad_stash_stride[0] > 0 && f1b1_exec::layout.memory.grad_stash_stride[0] == 0);
static_assert(dpv_exec::issue.pairs && !zbh1_exec::issue.pairs);
static_assert(dpv_exec::issue.pair_join_event == dpv_exec::issue.pair_fork_event + 2);
static_assert(dpv_exec::issue.events == dpv_exec::issue.pair_join_event + 2);
static_assert(zbh1_exec::issue.pair_fork_event == -1);
// DualPipe: stage 1 ends the first pipeline and stage 2 starts the second (a copy of stage 0), so
// boundary 1 is none, with no events; each pipeline takes its losses on its last stage's device.
constexpr auto dp = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using dp_exec = sim_executor<dp, ctpipe::cuda::device_per_rank<2>(), ctpipe::dispatch::automatic, split_mlp,
                             ctpipe::partition<split_mlp, 2>()>;
static_assert(dp_exec::mirrored && dp_exec::issue.forward[0] == handoff::ring_copy);
static_assert(dp_exec::issue.forward[1] == handoff::none && dp_exec::issue.backward[1] == handoff::none &&
              dp_exec::issue.sent_forward[1] == -1 && dp_exec::issue.sent_backward[1] == -1);
static_assert(dp_exec::issue.forward[2] == handoff::ring_copy && dp_exec::layout.stages.chain_length == 2);
static_assert(dp_exec::device_bytes()[0] > 0 && dp_exec::device_bytes()[1] > 0);

}  // namespace

TEST_CASE("cuda executor (simulated): dualpipe_v p=2 matches sequential training bitwise (I, W, pairs)") {
  test::device::every_placement<ctpipe::dualpipe_v(2, 4), split_mlp>();
}

// DualPipe: the second pipeline's layers in a mirror model, each stage's two copies summed across
// two devices (a peer copy into a scratch, then the add), eager and graph steps, three
// interleavings: one executor, so that the sanitizer build stays short;
// tests/cuda/numerics_dualpipe.cpp runs every placement and strategy, p = 2 and 4, and tokens.
TEST_CASE("cuda executor (simulated): dualpipe p=2 on two devices matches the two halves' training bitwise") {
  for (unsigned seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    train_device_against_sequential<dp_exec>(2, seed, ctpipe::cuda::launch::eager);
    train_device_against_sequential<dp_exec>(2, seed, ctpipe::cuda::launch::graph);
  }
}

TEST_CASE("cuda executor (simulated): I, W and the pairs F&B run the right calls on the right streams") {
  sim::world::get().reset(7);
  calls().clear();
  logged_mlp pipe = make_mlp<logged_mlp>();
  sim_loss dl;
  const test::data_set d = test::make_data(dpv_exec::microbatches);
  const device_data dd(d);
  const auto streams_before = sim::world::get().streams.size();
  {
    dpv_exec exec(pipe, dl);
    CHECK(sim::world::get().streams.size() == streams_before + 1 + 2 + 2);  // origin, a stream and a second per rank
    const auto losses = exec.step(dd.inputs, dd.targets);
    for (double l : losses) CHECK(l > 0.0);  // every loss written (buffers start as NaN)
    const auto main0 = reinterpret_cast<CUstream_st*>(exec.stream(0)),
               main1 = reinterpret_cast<CUstream_st*>(exec.stream(1));
    // Each (op, stage, microbatch) of the table against the calls logged for it.
    int pairs = 0, inputs = 0, weights = 0;
    for (int r = 0; r < 2; ++r) {
      const auto prog = dpv.program(r);
      const auto own = r == 0 ? main0 : main1;
      for (std::size_t i = 0; i < prog.size(); ++i) {
        const ctpipe::task& x = prog[i];
        const bool pair_b = x.op == op_kind::backward && i > 0 && prog[i - 1].overlapped;
        const char* want = x.op == op_kind::forward           ? "forward"
                           : x.op == op_kind::backward        ? "backward"
                           : x.op == op_kind::backward_input  ? "backward_input"
                           : x.op == op_kind::backward_weight ? "backward_weight"
                                                              : nullptr;
        if (!want) continue;
        int seen = 0;
        for (const auto& c : calls())
          if (c.stage == x.stage && c.microbatch == x.microbatch && std::string(c.call) == want) {
            ++seen;
            CAPTURE(x.stage);
            CAPTURE(x.microbatch);
            if (pair_b)
              CHECK((c.stream != main0 && c.stream != main1));  // the rank's second stream
            else
              CHECK(c.stream == own);
          }
        CHECK(seen == 1);  // one layer per stage (4 layers, 4 stages)
        pairs += pair_b;
        inputs += x.op == op_kind::backward_input;
        weights += x.op == op_kind::backward_weight;
      }
    }
    CHECK(pairs > 0);
    CHECK(inputs > 0);
    CHECK(weights == inputs);
  }
}
