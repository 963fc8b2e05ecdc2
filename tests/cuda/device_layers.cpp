// The device layers of ctpipe/layers/device/ on the stream simulator (support/sim_ops.hpp: their
// kernels are host loops of their own per-index functions, a product a plain loop): GELU, the layer
// norm, the residual add, dropout, the embedding and the cross-entropy give the host layers' bits
// over an extent and never read the rows past it; the linear layer and attention are within 1e-5 of
// the host's (a plain loop here, a BLAS there), the linear layer's bias gradient bitwise, its split
// halves the full backward's bits; a bad token id is a NaN row, then named by report(). Then the
// device GPT (ctpipe/layers/device/gpt.hpp, one block): the host GPT's start to the bit, its first
// losses within 1e-5, and trained through the CUDA executor bitwise alike under one rank, 1F1B (a
// device per rank), interleaved and ZB-V (split backward, a device per rank), eager and graph,
// microbatches of mixed extents, dropout, the head tied to the embedding across stages, with the
// device optimizer; a target that is not a token is named once the step is done, the update
// skipped. In bf16: the linear layer's products those of its rounded weights and operands, its bias
// gradient float's; attention within bf16's reach; the GPT's first losses within 2% of single
// precision's, bitwise alike across the same schedules, its compute copies its rounded parameters
// after every update. And on the NCCL executor (the simulator's stand-in: a process per rank, each
// with its own model on its own device): 1F1B in single precision and ZB-V in bf16, bitwise the
// CUDA executor's; a bad target named by the process of the last stage, the update skipped on every
// process.
#include "support/nccl_sim.hpp"
#include "support/numerics.hpp"  // bitwise_equal, sweep_rule, sweep_clip
#include "support/sim_mlp.hpp"
#include "support/sim_ops.hpp"

#include <ctpipe/cuda/optimizer.hpp>
#include <ctpipe/layers/device/add.hpp>
#include <ctpipe/layers/device/attention.hpp>
#include <ctpipe/layers/device/cross_entropy.hpp>
#include <ctpipe/layers/device/dropout.hpp>
#include <ctpipe/layers/device/embedding.hpp>
#include <ctpipe/layers/device/gelu.hpp>
#include <ctpipe/layers/device/gpt.hpp>
#include <ctpipe/layers/device/layer_norm.hpp>
#include <ctpipe/layers/device/linear.hpp>
#include <ctpipe/layers/device/place.hpp>
#include <ctpipe/model/sequential.hpp>
#include <ctpipe/nccl/executor.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

namespace dl = ctpipe::layers::device;
using ops = sim::device_ops;
using ctpipe::layers::bias;
constexpr auto T = ctpipe::layers::rows::tokens;
constexpr std::size_t rows = 6, in = 5, out = 7;
constexpr int extent = 4;  // of the 6 rows
constexpr float poison = std::numeric_limits<float>::quiet_NaN();

// Host memory the simulator counts as every device's; the device layers' views point into it.
template <std::size_t N>
struct buf {
  std::vector<float> v = std::vector<float>(N, poison);
  float* data() { return v.data(); }
};
// Values in [-1, 1), the rows past the extent NaN (what a layer must never read).
template <std::size_t Rows, std::size_t Cols>
std::vector<float> values(std::uint64_t seed) {
  std::vector<float> v(Rows * Cols, poison);
  std::uint64_t s = seed;
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * Cols; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) * 2.0 - 1.0);
  }
  return v;
}
template <std::size_t Rows, std::size_t Cols>
ctpipe::layers::matrix<Rows, Cols, T> host_matrix(const std::vector<float>& v) {
  ctpipe::layers::matrix<Rows, Cols, T> m{};
  std::memcpy(m.v.data(), v.data(), sizeof(float) * Rows * Cols);
  return m;
}
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// A context on the simulator's stream 0 of device 0, with the extent in "device" memory.
struct on_stream {
  sim::backend::stream_type stream = nullptr;
  int ext = extent;
  std::uint64_t step = 0;
  on_stream() {
    sim::world::get().reset(3);
    REQUIRE(sim::backend::stream_create(&stream, 0) == sim::ok);
  }
  ~on_stream() { (void)sim::backend::stream_destroy(stream); }
  ctpipe::cuda::context device(ctpipe::op_kind op = ctpipe::op_kind::forward) const {
    ctpipe::cuda::context c;
    c.stream = sim::backend::handle(stream);
    c.op = op;
    c.step = &step;
    c.extent = &ext;
    c.host_extent = ext;
    return c;
  }
  ctpipe::context host() const {
    ctpipe::context c;
    c.extent = ext;
    return c;
  }
  void finish() { REQUIRE(sim::backend::synchronize(stream) == sim::ok); }
};

// The rows in use equal bit for bit; those past the extent still NaN (never written).
void check_rows(const std::vector<float>& device, const float* host, std::size_t cols) {
  for (std::size_t i = 0; i < device.size(); ++i) {
    CAPTURE(i);
    if (i / cols < static_cast<std::size_t>(extent))
      REQUIRE(same_bits(device[i], host[i]));
    else
      REQUIRE(std::isnan(device[i]));
  }
}

}  // namespace

TEST_CASE("device GELU, layer norm and residual add (simulated): the host layers' bits over an extent") {
  on_stream s;
  const std::vector<float> x = values<rows, out>(1), dy = values<rows, out>(2), other = values<rows, out>(3);
  const auto hx = host_matrix<rows, out>(x), hdy = host_matrix<rows, out>(dy), ho = host_matrix<rows, out>(other);
  using view = dl::matrix<rows, out, T>;
  std::vector<float> dx(x), y(x), dxo(x);  // (copies of x: the buffers, each a view)
  auto fill_nan = [](std::vector<float>& v) { std::fill(v.begin(), v.end(), poison); };
  {  // GELU
    dl::gelu<ops, rows, out, T> d;
    ctpipe::layers::gelu<rows, out, T> h;
    fill_nan(y), fill_nan(dx);
    view yv{y.data()}, dxv{dx.data()};
    const view xv{const_cast<float*>(x.data())}, dyv{const_cast<float*>(dy.data())};
    d.forward(s.device(), xv, yv);
    d.backward(s.device(), xv, yv, dyv, dxv);
    s.finish();
    typename decltype(h)::output_type hy{};
    typename decltype(h)::input_type hdx{};
    h.forward(s.host(), hx, hy);
    h.backward(s.host(), hx, hy, hdy, hdx);
    check_rows(y, hy.v.data(), out);
    check_rows(dx, hdx.v.data(), out);
  }
  {  // the layer norm: forward, backward, and its split halves
    dl::layer_norm<ops, rows, out, T> d;
    ctpipe::layers::layer_norm<rows, out, T> h;
    std::vector<float> saved(2 * rows, poison);
    using saved_view = ctpipe::cuda::tensor<float, 2 * rows>;
    saved_view sv{saved.data()};
    fill_nan(y), fill_nan(dx);
    view yv{y.data()}, dxv{dx.data()};
    const view xv{const_cast<float*>(x.data())}, dyv{const_cast<float*>(dy.data())};
    d.forward(s.device(), xv, yv, sv);
    d.backward(s.device(), xv, yv, sv, dyv, dxv);
    s.finish();
    const std::vector<float> grads = d.grads.download();
    typename decltype(h)::output_type hy{};
    typename decltype(h)::input_type hdx{};
    typename decltype(h)::saved_type hs{};
    h.forward(s.host(), hx, hy, hs);
    h.backward(s.host(), hx, hy, hs, hdy, hdx);
    check_rows(y, hy.v.data(), out);
    check_rows(dx, hdx.v.data(), out);
    for (std::size_t i = 0; i < grads.size(); ++i) REQUIRE(same_bits(grads[i], h.grads[i]));
    // I then W: the full backward's bits; the gradients accumulate (now twice the one backward's).
    std::vector<float> dx2(x.size(), poison);
    view dx2v{dx2.data()};
    d.backward_input(s.device(), xv, yv, sv, dyv, dx2v);
    d.backward_weight(s.device(), xv, yv, sv, dyv);
    s.finish();
    check_rows(dx2, hdx.v.data(), out);
    h.backward_weight(s.host(), hx, hy, hs, hdy);
    const std::vector<float> twice = d.grads.download();
    for (std::size_t i = 0; i < twice.size(); ++i) REQUIRE(same_bits(twice[i], h.grads[i]));
  }
  {  // the residual add
    dl::add<ops, rows, out, T> d;
    ctpipe::layers::add<rows, out, T> h;
    fill_nan(y), fill_nan(dx), fill_nan(dxo);
    view yv{y.data()};
    const typename decltype(d)::input_type xin{view{const_cast<float*>(x.data())},
                                               view{const_cast<float*>(other.data())}};
    typename decltype(d)::input_type dxin{view{dx.data()}, view{dxo.data()}};
    d.forward(s.device(), xin, yv);
    d.backward(s.device(), xin, yv, view{const_cast<float*>(dy.data())}, dxin);
    s.finish();
    typename decltype(h)::output_type hy{};
    typename decltype(h)::input_type hin{hx, ho}, hdx{};
    h.forward(s.host(), hin, hy);
    h.backward(s.host(), hin, hy, hdy, hdx);
    check_rows(y, hy.v.data(), out);
    check_rows(dx, std::get<0>(hdx).v.data(), out);
    check_rows(dxo, std::get<1>(hdx).v.data(), out);
  }
  {  // dropout at 30%: the host layer's mask (the same task's stream), in training; a copy outside it
    dl::dropout<ops, rows, out, 300, T> d;
    ctpipe::layers::dropout<rows, out, 300, T> h;
    d.stream = h.stream = 5;
    s.step = 9;
    fill_nan(y), fill_nan(dx);
    view yv{y.data()}, dxv{dx.data()};
    const view xv{const_cast<float*>(x.data())}, dyv{const_cast<float*>(dy.data())};
    auto dc = s.device();
    dc.layer = 3, dc.microbatch = 2;
    d.forward(dc, xv, yv);
    d.backward(dc, xv, yv, dyv, dxv);
    s.finish();
    ctpipe::context hc = s.host();
    hc.layer = 3, hc.microbatch = 2, hc.step = 9;
    typename decltype(h)::output_type hy{};
    typename decltype(h)::input_type hdx{};
    h.forward(hc, hx, hy);
    h.backward(hc, hx, hy, hdy, hdx);
    check_rows(y, hy.v.data(), out);
    check_rows(dx, hdx.v.data(), out);
    int zeros = 0;
    for (int i = 0; i < extent * static_cast<int>(out); ++i) zeros += y[static_cast<std::size_t>(i)] == 0.0f ? 1 : 0;
    CHECK(zeros > 0);
    dc.training = false;  // evaluation: y = x
    d.forward(dc, xv, yv);
    s.finish();
    check_rows(y, x.data(), out);
  }
}

TEST_CASE("device linear (simulated): the host layer's within 1e-5, its bias gradient and split halves bitwise") {
  on_stream s;
  using layer = dl::linear<ops, rows, in, out, bias::yes, T>;
  using host = ctpipe::layers::linear<rows, in, out, bias::yes, T>;
  layer d;
  host h;
  h.init(5);
  d.init(5);
  {
    const std::vector<float> p = d.params.download();
    REQUIRE(p.size() == h.params.size());
    for (std::size_t i = 0; i < p.size(); ++i) REQUIRE(same_bits(p[i], h.params[i]));
  }
  const std::vector<float> x = values<rows, in>(4), dy = values<rows, out>(5);
  using xview = dl::matrix<rows, in, T>;
  using yview = dl::matrix<rows, out, T>;
  std::vector<float> y(rows * out, poison), dx(rows * in, poison);
  const xview xv{const_cast<float*>(x.data())};
  const yview dyv{const_cast<float*>(dy.data())};
  yview yv{y.data()};
  xview dxv{dx.data()};
  d.forward(s.device(), xv, yv);
  d.backward(s.device(), xv, yv, dyv, dxv);
  s.finish();
  const auto hx = host_matrix<rows, in>(x);
  const auto hdy = host_matrix<rows, out>(dy);
  host::output_type hy{};
  host::input_type hdx{};
  h.forward(s.host(), hx, hy);
  h.backward(s.host(), hx, hy, hdy, hdx);
  auto near = [](float a, float b) { return std::fabs(a - b) <= 1e-5f * (1.0f + std::fabs(b)); };
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * out; ++i) REQUIRE(near(y[i], hy.v[i]));
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * in; ++i) REQUIRE(near(dx[i], hdx.v[i]));
  // The weight gradient sums over the rows in use only: the NaN rows past the extent reach nothing.
  const std::vector<float> g = d.grads.download();
  for (std::size_t i = 0; i < out * in; ++i) REQUIRE(near(g[i], h.grads[i]));
  for (std::size_t i = out * in; i < g.size(); ++i) REQUIRE(same_bits(g[i], h.grads[i]));  // the bias's
  // I then W: the full backward's bits (the gradients now twice the one backward's).
  std::vector<float> dx2(rows * in, poison);
  xview dx2v{dx2.data()};
  d.backward_input(s.device(), xv, yv, dyv, dx2v);
  d.backward_weight(s.device(), xv, yv, dyv);
  s.finish();
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * in; ++i) REQUIRE(same_bits(dx2[i], dx[i]));
  layer once;  // one backward of a fresh layer, doubled, is the two backwards' sum to the bit
  once.init(5);
  std::vector<float> dx3(rows * in, poison);
  xview dx3v{dx3.data()};
  once.backward(s.device(), xv, yv, dyv, dx3v);
  once.backward(s.device(), xv, yv, dyv, dx3v);
  s.finish();
  const std::vector<float> two = d.grads.download(), again = once.grads.download();
  for (std::size_t i = 0; i < two.size(); ++i) REQUIRE(same_bits(two[i], again[i]));
}

TEST_CASE(
    "device attention (simulated): the host layer's within 1e-5 over an extent, zeros past it, and over rows of "
    "fixed size") {
  on_stream s;
  constexpr std::size_t tokens = 3, seqs = 2, width = 4, heads = 2, n = tokens * seqs;  // extent 4: 2 tokens each
  using layer = dl::causal_attention_qkv<ops, tokens, seqs, width, heads, T>;
  using host = ctpipe::layers::causal_attention_qkv<tokens, seqs, width, heads, T>;
  static_assert(n == rows);
  const std::vector<float> x = values<n, 3 * width>(6), dy = values<n, width>(7);
  std::vector<float> y(n * width, poison), dx(n * 3 * width, poison), saved(seqs * heads * tokens * tokens, poison);
  const layer d;
  const dl::matrix<n, 3 * width, T> xv{const_cast<float*>(x.data())};
  dl::matrix<n, width, T> yv{y.data()};
  dl::matrix<n, 3 * width, T> dxv{dx.data()};
  layer::saved_type sv{saved.data()};
  d.forward(s.device(), xv, yv, sv);
  d.backward(s.device(), xv, yv, sv, dl::matrix<n, width, T>{const_cast<float*>(dy.data())}, dxv);
  s.finish();
  const host h;
  host::output_type hy{};
  host::input_type hdx{};
  host::saved_type hs{};
  const auto hx = host_matrix<n, 3 * width>(x);
  h.forward(s.host(), hx, hy, hs);
  h.backward(s.host(), hx, hy, hs, host_matrix<n, width>(dy), hdx);
  auto near = [](float a, float b) { return std::fabs(a - b) <= 1e-5f * (1.0f + std::fabs(b)); };
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * width; ++i) REQUIRE(near(y[i], hy.v[i]));
  for (std::size_t i = static_cast<std::size_t>(extent) * width; i < y.size(); ++i) REQUIRE(y[i] == 0.0f);
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * 3 * width; ++i) REQUIRE(near(dx[i], hdx.v[i]));
  for (const float p : saved) REQUIRE(std::isfinite(p));  // the rows past the extent: zeros, not their NaN
  // Rows of fixed size: no masked copies, the products read the tensors themselves.
  using fixed_layer = dl::causal_attention_qkv<ops, tokens, seqs, width, heads>;
  using fixed_host = ctpipe::layers::causal_attention_qkv<tokens, seqs, width, heads>;
  std::vector<float> fx = x, fdy = dy;
  for (float& v : fx) v = std::isnan(v) ? 0.25f : v;
  for (float& v : fdy) v = std::isnan(v) ? -0.5f : v;
  const fixed_layer fd;
  dl::matrix<n, width> fyv{y.data()};
  dl::matrix<n, 3 * width> fdxv{dx.data()};
  fixed_layer::saved_type fsv{saved.data()};
  fd.forward(s.device(), dl::matrix<n, 3 * width>{fx.data()}, fyv, fsv);
  fd.backward(s.device(), dl::matrix<n, 3 * width>{fx.data()}, fyv, fsv, dl::matrix<n, width>{fdy.data()}, fdxv);
  s.finish();
  fixed_host::input_type fhx{}, fhdx{};
  fixed_host::output_type fhy{}, fhdy{};
  fixed_host::saved_type fhs{};
  std::copy(fx.begin(), fx.end(), fhx.v.begin());
  std::copy(fdy.begin(), fdy.end(), fhdy.v.begin());
  const fixed_host fh;
  fh.forward(s.host(), fhx, fhy, fhs);
  fh.backward(s.host(), fhx, fhy, fhs, fhdy, fhdx);
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(near(y[i], fhy.v[i]));
  for (std::size_t i = 0; i < dx.size(); ++i) REQUIRE(near(dx[i], fhdx.v[i]));
}

TEST_CASE(
    "device linear and attention in bf16 (simulated): the weights' compute copy rounded, every product of rounded "
    "operands, the bias gradient of float") {
  on_stream s;
  auto near = [](float a, float b, float tolerance) { return std::fabs(a - b) <= tolerance * (1.0f + std::fabs(b)); };
  auto rounded = [](std::vector<float> v) {
    for (float& x : v) x = std::isnan(x) ? x : static_cast<float>(ctpipe::bf16(x));
    return v;
  };
  using layer = dl::linear<ops, rows, in, out, bias::yes, T, dl::precision::bf16>;
  using host = ctpipe::layers::linear<rows, in, out, bias::yes, T>;
  static_assert(ctpipe::has_compute_copy<layer> && !ctpipe::has_compute_copy<dl::linear<ops, rows, in, out>>);
  layer d;
  d.init(5);
  const std::vector<float> w = d.params.download();
  REQUIRE(d.compute_parameters().size() == w.size());
  std::vector<ctpipe::bf16> copy(w.size());
  ops::download(copy.data(), d.compute_parameters().data(), d.compute_parameters().size_bytes());
  for (std::size_t i = 0; i < w.size(); ++i) REQUIRE(copy[i] == ctpipe::bf16(w[i]));
  // The host layer of the rounded weights, on rounded inputs: the device layer's products within
  // 1e-5 (a plain loop here, a BLAS there); the bias's gradient sums dy itself (float), as the host's.
  host h, hb;
  h.init(5);
  hb.init(5);
  const std::vector<float> w16 = rounded(w);
  std::copy(w16.begin(), w16.end(), h.params.begin());
  const std::vector<float> x = values<rows, in>(4), dy = values<rows, out>(5);
  std::vector<float> y(rows * out, poison), dx(rows * in, poison);
  dl::matrix<rows, out, T> yv{y.data()};
  dl::matrix<rows, in, T> dxv{dx.data()};
  const dl::matrix<rows, in, T> xv{const_cast<float*>(x.data())};
  d.forward(s.device(), xv, yv);
  d.backward(s.device(), xv, yv, dl::matrix<rows, out, T>{const_cast<float*>(dy.data())}, dxv);
  s.finish();
  host::output_type hy{};
  host::input_type hdx{};
  h.forward(s.host(), host_matrix<rows, in>(rounded(x)), hy);
  h.backward(s.host(), host_matrix<rows, in>(rounded(x)), hy, host_matrix<rows, out>(rounded(dy)), hdx);
  host::input_type unused{};
  hb.backward(s.host(), host_matrix<rows, in>(x), hy, host_matrix<rows, out>(dy), unused);  // (its bias gradient)
  const std::vector<float> g = d.grads.download();
  bool rounding_seen = false;  // (the f32 layer's outputs differ: the rounding is real)
  {
    using f32_layer = dl::linear<ops, rows, in, out, bias::yes, T>;
    f32_layer f;
    f.init(5);
    std::vector<float> fy(rows * out, poison);
    dl::matrix<rows, out, T> fyv{fy.data()};
    f.forward(s.device(), xv, fyv);
    s.finish();
    for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * out; ++i) {
      REQUIRE(near(y[i], fy[i], 2e-2f));
      rounding_seen = rounding_seen || !near(y[i], fy[i], 1e-5f);
    }
  }
  CHECK(rounding_seen);
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * out; ++i) REQUIRE(near(y[i], hy.v[i], 1e-5f));
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * in; ++i) REQUIRE(near(dx[i], hdx.v[i], 1e-5f));
  for (std::size_t i = 0; i < out * in; ++i) REQUIRE(near(g[i], h.grads[i], 1e-5f));
  for (std::size_t i = out * in; i < g.size(); ++i) REQUIRE(same_bits(g[i], hb.grads[i]));

  // Attention: within bf16's reach of the host layer (its probabilities and dS rounded too), zeros
  // and finite values past the extent.
  constexpr std::size_t tokens = 3, seqs = 2, width = 4, heads = 2, n = tokens * seqs;
  using attention = dl::causal_attention_qkv<ops, tokens, seqs, width, heads, T, dl::precision::bf16>;
  using host_attention = ctpipe::layers::causal_attention_qkv<tokens, seqs, width, heads, T>;
  const std::vector<float> ax = values<n, 3 * width>(6), ady = values<n, width>(7);
  std::vector<float> ay(n * width, poison), adx(n * 3 * width, poison), saved(seqs * heads * tokens * tokens, poison);
  const attention a;
  const dl::matrix<n, 3 * width, T> axv{const_cast<float*>(ax.data())};
  dl::matrix<n, width, T> ayv{ay.data()};
  dl::matrix<n, 3 * width, T> adxv{adx.data()};
  attention::saved_type sv{saved.data()};
  a.forward(s.device(), axv, ayv, sv);
  a.backward(s.device(), axv, ayv, sv, dl::matrix<n, width, T>{const_cast<float*>(ady.data())}, adxv);
  s.finish();
  const host_attention ha;
  host_attention::output_type hay{};
  host_attention::input_type hadx{};
  host_attention::saved_type has{};
  ha.forward(s.host(), host_matrix<n, 3 * width>(ax), hay, has);
  ha.backward(s.host(), host_matrix<n, 3 * width>(ax), hay, has, host_matrix<n, width>(ady), hadx);
  rounding_seen = false;
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * width; ++i) {
    REQUIRE(near(ay[i], hay.v[i], 2e-2f));
    rounding_seen = rounding_seen || !near(ay[i], hay.v[i], 1e-5f);
  }
  CHECK(rounding_seen);
  for (std::size_t i = static_cast<std::size_t>(extent) * width; i < ay.size(); ++i) REQUIRE(ay[i] == 0.0f);
  for (std::size_t i = 0; i < static_cast<std::size_t>(extent) * 3 * width; ++i)
    REQUIRE(near(adx[i], hadx.v[i], 2e-2f));
  for (const float p : saved) REQUIRE(std::isfinite(p));
}

TEST_CASE("device cross-entropy (simulated): the host loss's bits, its sum over an extent and its mean") {
  on_stream s;
  const std::vector<float> z = values<rows, out>(8);
  std::vector<std::int32_t> t(rows, 3);
  for (std::size_t r = 0; r < rows; ++r) t[r] = static_cast<std::int32_t>(r % out);
  std::vector<float> dz(rows * out, poison);
  double loss = 0.0;
  const dl::softmax_cross_entropy<ops, rows, out, T> d;
  dl::matrix<rows, out, T> dzv{dz.data()};
  d(s.device(), dl::matrix<rows, out, T>{const_cast<float*>(z.data())}, {t.data()}, dzv, &loss);
  s.finish();
  const ctpipe::layers::softmax_cross_entropy<rows, out, T> h;
  std::array<int, rows> ht{};
  std::copy(t.begin(), t.end(), ht.begin());
  ctpipe::layers::matrix<rows, out, T> hdz{};
  const double want = h(s.host(), host_matrix<rows, out>(z), ht, hdz);
  CHECK(std::memcmp(&loss, &want, sizeof loss) == 0);
  check_rows(dz, hdz.v.data(), out);
  // Fixed rows: the mean, its gradient over the rows.
  std::vector<float> zf = z, dzf(rows * out, poison);
  for (float& v : zf)
    if (std::isnan(v)) v = 0.5f;
  const dl::softmax_cross_entropy<ops, rows, out> df;
  dl::matrix<rows, out> dzfv{dzf.data()};
  df(s.device(), dl::matrix<rows, out>{zf.data()}, {t.data()}, dzfv, &loss);
  s.finish();
  ctpipe::layers::matrix<rows, out> hf{}, hdzf{};
  std::copy(zf.begin(), zf.end(), hf.v.begin());
  const double mean = ctpipe::layers::softmax_cross_entropy<rows, out>{}(s.host(), hf, ht, hdzf);
  CHECK(std::memcmp(&loss, &mean, sizeof loss) == 0);
  for (std::size_t i = 0; i < dzf.size(); ++i) REQUIRE(same_bits(dzf[i], hdzf.v[i]));
}

TEST_CASE("device embedding (simulated): the host layer's bits, a bad token id a NaN row, then named by report()") {
  on_stream s;
  constexpr std::size_t tokens = 3, seqs = 2, vocab = 5, width = 4, n = tokens * seqs;  // extent 4: 2 tokens each
  using layer = dl::embedding<ops, tokens, seqs, vocab, width, T>;
  using host = ctpipe::layers::embedding<tokens, seqs, vocab, width, T>;
  layer d;
  host h;
  d.init(3);
  h.init(3);
  std::vector<std::int32_t> ids{4, 0, 2, 2, 99, -1};  // the last two past the extent: never read
  const std::vector<float> dy = values<n, width>(9);
  std::vector<float> y(n * width, poison);
  dl::matrix<n, width, T> yv{y.data()};
  layer::input_type xv{ids.data()};
  d.forward(s.device(), xv, yv);
  d.backward(s.device(), xv, yv, dl::matrix<n, width, T>{const_cast<float*>(dy.data())}, xv);
  s.finish();
  host::input_type hx{};
  std::copy(ids.begin(), ids.end(), hx.v.begin());
  host::output_type hy{};
  h.forward(s.host(), hx, hy);
  h.backward(s.host(), hx, hy, host_matrix<n, width>(dy), hx);
  check_rows(y, hy.v.data(), width);
  const std::vector<float> g = d.grads.download();
  for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(same_bits(g[i], h.grads[i]));
  CHECK_NOTHROW(d.report());
  ids[1] = 7;  // row 1 of microbatch 2, on rank 1's stage 3
  auto c = s.device();
  c.rank = 1, c.stage = 3, c.microbatch = 2;
  d.forward(c, xv, yv);
  s.finish();
  CHECK(std::isnan(y[width]));
  CHECK(std::isfinite(y[0]));
  CHECK_THROWS_WITH_AS(d.report(),
                       "rank 1, stage 3: ctpipe::layers::embedding: microbatch 2, row 1: token id 7 is outside the "
                       "vocabulary (0 to 4)",
                       std::out_of_range);
  CHECK_NOTHROW(d.report());  // (reported once)
  // An extent that is not a whole number of tokens per sequence, where the host knows it.
  s.ext = 3;
  CHECK_THROWS_WITH_AS(d.forward(s.device(), xv, yv), doctest::Contains("not a multiple of its 2 sequences"),
                       std::invalid_argument);
}

namespace {

// The GPT of ctpipe/layers/device/gpt.hpp at a tiny size (one block: 16 layers, the head tied to
// the embedding), on the simulator's operations, its dropout at 10%.
constexpr ctpipe::layers::gpt_shape shape{.vocab = 16, .tokens = 4, .batch = 2, .width = 8, .heads = 2, .blocks = 1};
using net = dl::gpt<ops, shape>;
using net16 = dl::gpt<ops, shape, dl::precision::bf16>;  // its products in bf16
using device_model = net::model;
using device_loss = net::loss;
static_assert(std::is_same_v<net16::model::input_type, device_model::input_type> &&
              std::is_same_v<net16::loss::target_type, device_loss::target_type>);
constexpr std::size_t b = net::rows;
static_assert(ctpipe::cuda::is_device_model_v<device_model> && device_model::token_capacity == b);
static_assert(ctpipe::cuda::device_splittable_layer<device_model::layer_type<0>> &&
              ctpipe::cuda::device_splittable_layer<device_model::layer_type<3>>);
constexpr int m = 8;

// Microbatch i's tokens (a token-major pattern the model can learn; row r is token r / 2 of sequence
// r % 2), its targets the next tokens, and its extent in step s: 1 to 4 tokens of each sequence.
std::int32_t token(int i, std::size_t r) {
  return static_cast<std::int32_t>((i * 5 + static_cast<int>(r / 2) * 3 + static_cast<int>(r % 2)) % 16);
}
std::vector<int> gpt_extents(int step) {
  std::vector<int> e(m);
  for (int i = 0; i < m; ++i) e[static_cast<std::size_t>(i)] = 2 * (1 + (i + step) % 4);
  return e;
}
// The data in simulated device memory: token ids on device `first`, targets on `last`.
struct gpt_data {
  sim::buffer ids, next;
  std::vector<device_model::input_type> inputs;
  std::vector<device_loss::target_type> targets;
  gpt_data(int first, int last) : ids(m * b * sizeof(std::int32_t), first), next(m * b * sizeof(std::int32_t), last) {
    for (int i = 0; i < m; ++i) {
      std::int32_t* x = ids.as<std::int32_t>() + static_cast<std::size_t>(i) * b;
      std::int32_t* t = next.as<std::int32_t>() + static_cast<std::size_t>(i) * b;
      for (std::size_t r = 0; r < b; ++r) {
        x[r] = token(i, r);
        t[r] = token(i, r + 2);
      }
      inputs.push_back({x});
      targets.push_back({t});
    }
  }
};

struct run_result {
  std::vector<double> losses;
  std::vector<float> parameters;
};

template <class Net, auto Sched, auto Placement>
using executor_of =
    ctpipe::cuda::basic_executor<test::device::sweep_table<Sched, typename Net::model>(), typename Net::model,
                                 test::device::sweep_stages<Sched, typename Net::model>(), typename Net::loss,
                                 Placement, ctpipe::dispatch::automatic, sim::backend>;

// Every compute copy (bf16) is its parameters rounded, bit for bit.
template <class Model>
void check_compute_copies(Model& model) {
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          auto& l = model.template layer<K>();
          if constexpr (ctpipe::has_compute_copy<std::remove_cvref_t<decltype(l)>>) {
            std::vector<float> w(l.parameters().size());
            std::vector<ctpipe::bf16> c(w.size());
            ops::download(w.data(), l.parameters().data(), l.parameters().size_bytes());
            ops::download(c.data(), l.compute_parameters().data(), l.compute_parameters().size_bytes());
            for (std::size_t i = 0; i < w.size(); ++i) REQUIRE(c[i] == ctpipe::bf16(w[i]));
          }
        }(),
        ...);
  }
  (std::make_index_sequence<Model::size>{});
}

// Three steps of Sched (eager, then two graph steps: a capture and a replay of other extents), each
// ending in the device optimizer's clipped AdamW, from the same start; then (bad_target) a step
// whose microbatch 3 has a target that is not a token.
template <auto Sched, auto Placement, class Net = net>
run_result train(int devices, bool bad_target = false) {
  sim::world::get().reset(11, devices);
  using exec_t = executor_of<Net, Sched, Placement>;
  auto model = std::make_unique<typename Net::model>();
  Net::init(*model, 5);
  Net::set_dropout(*model, 100);
  const int last = exec_t::devices[static_cast<std::size_t>(exec_t::plan.table.rank_of(exec_t::stage_count - 1))];
  gpt_data dd(0, last);
  typename Net::loss loss;
  dl::place<exec_t>(*model, loss);  // each layer's memory on its rank's device, the loss's on the last
  exec_t exec(*model, loss);
  ctpipe::cuda::device_optimizer<exec_t, ctpipe::adamw> opt(exec, test::sweep_rule, test::sweep_clip);
  run_result r;
  for (int step = 0; step < 3; ++step) {
    const auto how = step == 0 ? ctpipe::cuda::launch::eager : ctpipe::cuda::launch::graph;
    const ctpipe::token_losses l = exec.step(dd.inputs, dd.targets, gpt_extents(step), how);
    r.losses.insert(r.losses.end(), l.losses.begin(), l.losses.end());
    REQUIRE(opt.result().applied);
  }
  REQUIRE(sim::world::get().wrong_device_work.empty());
  check_compute_copies(*model);  // (rewritten by the device optimizer after each update)
  r.parameters = test::parameters(*model);
  if (bad_target) {
    // Microbatch 3 uses 2 tokens a sequence; its row 1's target is 99, not a token: the step throws
    // once it is done, naming where, and its update is skipped (the loss's NaN); the next step runs
    // as before.
    std::vector<int> e = gpt_extents(3);
    e[3] = 4;
    dd.targets[3].data[1] = 99;
    const std::string said = "stage " + std::to_string(exec_t::stage_count - 1) +
                             ": ctpipe::layers::softmax_cross_entropy: microbatch 3, token 1: target 99 is not a "
                             "class (0 to 15)";
    CHECK_THROWS_WITH_AS(exec.step(dd.inputs, dd.targets, e, ctpipe::cuda::launch::graph),
                         doctest::Contains(said.c_str()), std::out_of_range);
    CHECK_FALSE(opt.result().applied);
    CHECK(test::bitwise_equal(r.parameters, test::parameters(*model)));
    dd.targets[3].data[1] = 0;
    exec.step(dd.inputs, dd.targets, e, ctpipe::cuda::launch::graph);
    CHECK(opt.result().applied);
  }
  return r;
}

// The same three steps on the NCCL executor (the simulator's stand-in for NCCL): a process per
// rank, each with a model of its own on its own device (made there: its layers allocate on the
// current device), the device optimizer on each; the parameters gathered from the process that
// updates each layer. Then (bad_target) the step whose target is not a token: the process of the
// last stage names it, the update is skipped everywhere.
template <auto Sched, class Net = net>
run_result train_nccl(bool bad_target = false) {
  using model_t = typename Net::model;
  using loss_t = typename Net::loss;
  using exec_t =
      ctpipe::nccl::basic_executor<test::device::sweep_table<Sched, model_t>(), model_t,
                                   test::device::sweep_stages<Sched, model_t>(), loss_t, sim::backend, sim::nccl::net>;
  constexpr int processes = exec_t::ranks;
  sim::world::get().reset(11, processes);
  sim::nccl::state::get().reset();
  const std::vector<sim::nccl::handle*> world = sim::nccl::make_world(processes);
  std::vector<std::unique_ptr<model_t>> models;
  std::vector<std::unique_ptr<loss_t>> losses;
  std::vector<std::unique_ptr<gpt_data>> data;
  std::vector<std::unique_ptr<exec_t>> exec;
  std::vector<std::unique_ptr<ctpipe::cuda::device_optimizer<exec_t, ctpipe::adamw>>> opts;
  for (int q = 0; q < processes; ++q) {
    REQUIRE(sim::backend::set_device(q) == sim::ok);  // (as a process sets its own device first)
    models.push_back(std::make_unique<model_t>());
    Net::init(*models.back(), 5);
    Net::set_dropout(*models.back(), 100);
    losses.push_back(std::make_unique<loss_t>());
    data.push_back(std::make_unique<gpt_data>(q, q));
    exec.push_back(std::make_unique<exec_t>(
        *models.back(), *losses.back(),
        ctpipe::nccl::job<sim::nccl::net>{world[static_cast<std::size_t>(q)], q, processes, q}));
    opts.push_back(std::make_unique<ctpipe::cuda::device_optimizer<exec_t, ctpipe::adamw>>(
        *exec.back(), test::sweep_rule, test::sweep_clip));
  }
  REQUIRE(sim::backend::set_device(0) == sim::ok);
  auto step = [&](const std::vector<int>& e, ctpipe::cuda::launch how) {  // (every process's enqueue)
    for (int q = 0; q < processes; ++q) {
      gpt_data& d = *data[static_cast<std::size_t>(q)];
      exec[static_cast<std::size_t>(q)]->enqueue(d.inputs, d.targets, e, how);
    }
  };
  run_result r;
  for (int s = 0; s < 3; ++s) {
    step(gpt_extents(s), s == 0 ? ctpipe::cuda::launch::eager : ctpipe::cuda::launch::graph);
    std::vector<double> first;
    for (int q = 0; q < processes; ++q) {
      CAPTURE(q);
      const auto got = exec[static_cast<std::size_t>(q)]->wait();
      if (q == 0) first.assign(got.begin(), got.end());
      REQUIRE(std::equal(got.begin(), got.end(), first.begin(), first.end()));  // (every process's)
      REQUIRE(opts[static_cast<std::size_t>(q)]->result().applied);
    }
    r.losses.insert(r.losses.end(), first.begin(), first.end());
  }
  REQUIRE(sim::world::get().wrong_device_work.empty());
  REQUIRE(sim::nccl::state::get().violations.empty());
  // Each layer's parameters from the process that updates it.
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          if constexpr (ctpipe::has_parameters<typename model_t::template layer_type<K>>)
            for (int q = 0; q < processes; ++q)
              if (exec[static_cast<std::size_t>(q)]->updates_layer(K)) {
                auto& l = models[static_cast<std::size_t>(q)]->template layer<K>();
                check_compute_copies(*models[static_cast<std::size_t>(q)]);
                std::vector<float> w(l.parameters().size());
                ops::download(w.data(), l.parameters().data(), l.parameters().size_bytes());
                r.parameters.insert(r.parameters.end(), w.begin(), w.end());
                break;
              }
        }(),
        ...);
  }
  (std::make_index_sequence<model_t::size>{});
  if (bad_target) {
    std::vector<int> e = gpt_extents(3);
    e[3] = 4;
    gpt_data& last = *data[static_cast<std::size_t>(exec_t::plan.table.rank_of(exec_t::stages.stages() - 1))];
    last.targets[3].data[1] = 99;
    step(e, ctpipe::cuda::launch::graph);
    const int named = exec_t::plan.table.rank_of(exec_t::stages.stages() - 1);
    for (int q = 0; q < processes; ++q) {
      CAPTURE(q);
      if (q == named) {
        const std::string said = "rank " + std::to_string(q) + ", stage " +
                                 std::to_string(exec_t::stages.stages() - 1) +
                                 ": ctpipe::layers::softmax_cross_entropy: microbatch 3, token 1: target 99 is not a "
                                 "class (0 to 15)";
        CHECK_THROWS_WITH_AS(exec[static_cast<std::size_t>(q)]->wait(), doctest::Contains(said.c_str()),
                             std::out_of_range);
      } else {  // (the other processes: the global batch's losses, microbatch 3's NaN)
        const auto got = exec[static_cast<std::size_t>(q)]->wait();
        CHECK(std::isnan(got[3]));
      }
      CHECK_FALSE(opts[static_cast<std::size_t>(q)]->result().applied);
    }
    last.targets[3].data[1] = 0;  // and the next step runs as before, on every process
    step(e, ctpipe::cuda::launch::graph);
    for (int q = 0; q < processes; ++q) {
      exec[static_cast<std::size_t>(q)]->wait();
      CHECK(opts[static_cast<std::size_t>(q)]->result().applied);
    }
  }
  return r;
}

bool same(const run_result& a, const run_result& b) {
  return a.losses.size() == b.losses.size() &&
         std::memcmp(a.losses.data(), b.losses.data(), sizeof(double) * a.losses.size()) == 0 &&
         test::bitwise_equal(a.parameters, b.parameters);
}

}  // namespace

TEST_CASE(
    "the device GPT (simulated): the host GPT's start and first losses, bitwise alike under every kind of "
    "schedule, eager and graph, a bad target named") {
  // The host GPT's start, and its first step's losses within 1e-5 (its products a BLAS's).
  sim::world::get().reset(11, 1);
  auto host = std::make_unique<net::host::model>();
  net::host::init(*host, 5);
  net::host::set_dropout(*host, 100);
  {
    auto device = std::make_unique<device_model>();
    net::init(*device, 5);
    auto back = std::make_unique<net::host::model>();
    net::store(*device, *back);
    CHECK(test::bitwise_equal(test::parameters(*back), test::parameters(*host)));
  }
  std::vector<net::host::input_type> hx(m);
  std::vector<net::host::target_type> ht(m);
  for (int i = 0; i < m; ++i)
    for (std::size_t r = 0; r < b; ++r) {
      hx[static_cast<std::size_t>(i)].v[r] = token(i, r);
      ht[static_cast<std::size_t>(i)][r] = token(i, r + 2);
    }
  net::host::loss hl;
  std::vector<double> want(m);
  const std::vector<int> e0 = gpt_extents(0);
  ctpipe::sequential_step(*host, hl, std::span<const net::host::input_type>(hx),
                          std::span<const net::host::target_type>(ht), e0, want);
  const run_result one = train<ctpipe::gpipe(1, m), 0>(1);
  for (int i = 0; i < m; ++i)
    CHECK(std::fabs(one.losses[static_cast<std::size_t>(i)] - want[static_cast<std::size_t>(i)]) <=
          1e-5 * (1.0 + std::fabs(want[static_cast<std::size_t>(i)])));
  for (const double l : one.losses) REQUIRE(std::isfinite(l));
  auto per_token = [&](int step) {
    double sum = 0.0, tokens = 0.0;
    for (int i = 0; i < m; ++i) {
      sum += one.losses[static_cast<std::size_t>(step * m + i)];
      tokens += gpt_extents(step)[static_cast<std::size_t>(i)];
    }
    return sum / tokens;
  };
  CHECK(per_token(2) < per_token(0));  // (it learns: the loss per token after two updates)
  CHECK(same(train<ctpipe::one_f_one_b(2, m), ctpipe::cuda::device_per_rank<2>()>(2), one));
  CHECK(same(train<ctpipe::interleaved(2, m, 2), 0>(1), one));
  CHECK(same(train<ctpipe::zb_v(2, m), ctpipe::cuda::device_per_rank<2>()>(2, true), one));
  CHECK(same(train_nccl<ctpipe::one_f_one_b(2, m)>(true), one));
}

TEST_CASE(
    "the device GPT in bf16 (simulated): its first losses within bf16's reach of single precision's, bitwise alike "
    "under every kind of schedule, eager and graph") {
  const run_result f32 = train<ctpipe::gpipe(1, m), 0>(1);
  const run_result one = train<ctpipe::gpipe(1, m), 0, net16>(1);
  bool rounding_seen = false;
  for (int i = 0; i < m; ++i) {
    const double a = one.losses[static_cast<std::size_t>(i)], b = f32.losses[static_cast<std::size_t>(i)];
    CHECK(std::fabs(a - b) <= 2e-2 * (1.0 + std::fabs(b)));
    rounding_seen = rounding_seen || a != b;
  }
  CHECK(rounding_seen);
  for (const double l : one.losses) REQUIRE(std::isfinite(l));
  CHECK(same(train<ctpipe::one_f_one_b(2, m), ctpipe::cuda::device_per_rank<2>(), net16>(2), one));
  CHECK(same(train<ctpipe::interleaved(2, m, 2), 0, net16>(1), one));
  CHECK(same(train<ctpipe::zb_v(2, m), ctpipe::cuda::device_per_rank<2>(), net16>(2, true), one));
  CHECK(same(train_nccl<ctpipe::zb_v(2, m), net16>(), one));
}
