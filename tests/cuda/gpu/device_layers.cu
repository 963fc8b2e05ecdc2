// The device layers of ctpipe/layers/device/ on a real GPU (ctpipe::cuda::gpu_ops: cuBLAS products,
// CUDA kernels; exit 77 where there is no GPU): each layer against the host layer on the same
// inputs (GELU and the layer norm within 1e-5 to 1e-4, the GPU fusing multiply-adds the host rounds
// twice; the linear layer and causal attention within 1e-4 relative, cuBLAS summing in another
// order; the residual add exact), and a small model of them (dropout, and a residual across
// stages, one linear layer in bf16) trained through the CUDA executor with the device optimizer:
// 1F1B at p = 2 eager, then captured and replayed, ZB-V at p = 2 (split backward) from a graph
// step, bitwise alike and bitwise one rank's. In bf16 (cuBLAS's bf16 products, float sums): the
// linear layer within 1e-4 of the host layer of rounded weights and operands, attention within 2e-2
// of the host's.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <ctpipe/cuda.hpp>
#include <ctpipe/cuda/gpu_ops.hpp>
#include <ctpipe/cuda/optimizer.hpp>
#include <ctpipe/layers/device/add.hpp>
#include <ctpipe/layers/device/attention.hpp>
#include <ctpipe/layers/device/dropout.hpp>
#include <ctpipe/layers/device/gelu.hpp>
#include <ctpipe/layers/device/layer_norm.hpp>
#include <ctpipe/layers/device/linear.hpp>
#include <ctpipe/layers/device/place.hpp>
#include <ctpipe/model/bf16.hpp>

#include "layers.hpp"  // the example's device loss

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

namespace dl = ctpipe::layers::device;
using ops = ctpipe::cuda::gpu_ops;
using ctpipe::layers::bias;
constexpr std::size_t rows = 16, width = 64, classes = 8;
constexpr int microbatches = 8;

std::vector<float> values(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(seed >> 40) / static_cast<double>(1ull << 24) * 2.0 - 1.0);
  }
  return v;
}
bool near(const std::vector<float>& a, const float* b, float tolerance) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= tolerance * (1.0f + std::fabs(b[i])))) return false;
  return true;
}

struct on_gpu {
  cudaStream_t stream = nullptr;
  on_gpu() { mlp_gpu::cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate"); }
  ~on_gpu() { cudaStreamDestroy(stream); }
  ctpipe::cuda::context device() const {
    ctpipe::cuda::context c;
    c.stream = stream;
    return c;
  }
  void finish() const { mlp_gpu::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
};

}  // namespace

TEST_CASE("gpu: device layers against the host layers") {
  on_gpu g;
  const std::vector<float> x = values(rows * width, 1), dy = values(rows * width, 2), o = values(rows * width, 3);
  mlp_gpu::device_floats dx_(rows * width), dy_(rows * width), do_(rows * width), y_(rows * width), dxo_(rows * width),
      dxd_(rows * width), saved_(2 * rows);
  dx_.upload(x);
  dy_.upload(dy);
  do_.upload(o);
  using view = dl::matrix<rows, width>;
  const view xv{dx_.data()}, dyv{dy_.data()}, ov{do_.data()};
  view yv{y_.data()}, dxv{dxd_.data()}, dxov{dxo_.data()};
  ctpipe::layers::matrix<rows, width> hx{}, hdy{}, ho{};
  std::copy(x.begin(), x.end(), hx.v.begin());
  std::copy(dy.begin(), dy.end(), hdy.v.begin());
  std::copy(o.begin(), o.end(), ho.v.begin());
  {
    dl::gelu<ops, rows, width> d;
    ctpipe::layers::gelu<rows, width> h;
    d.forward(g.device(), xv, yv);
    d.backward(g.device(), xv, yv, dyv, dxv);
    g.finish();
    ctpipe::layers::matrix<rows, width> hy{}, hdx{};
    h.forward(ctpipe::context{}, hx, hy);
    h.backward(ctpipe::context{}, hx, hy, hdy, hdx);
    CHECK(near(y_.download(), hy.v.data(), 1e-5f));
    CHECK(near(dxd_.download(), hdx.v.data(), 1e-5f));
  }
  {
    dl::layer_norm<ops, rows, width> d;
    ctpipe::layers::layer_norm<rows, width> h;
    ctpipe::cuda::tensor<float, 2 * rows> s{saved_.data()};
    d.forward(g.device(), xv, yv, s);
    d.backward(g.device(), xv, yv, s, dyv, dxv);
    g.finish();
    ctpipe::layers::matrix<rows, width> hy{}, hdx{};
    decltype(h)::saved_type hs{};
    h.forward(hx, hy, hs);
    h.backward(hx, hy, hs, hdy, hdx);
    CHECK(near(y_.download(), hy.v.data(), 1e-5f));
    CHECK(near(dxd_.download(), hdx.v.data(), 1e-4f));
    CHECK(near(d.grads.download(), h.grads.data(), 1e-4f));
  }
  {
    dl::add<ops, rows, width> d;
    const dl::add<ops, rows, width>::input_type in{xv, ov};
    dl::add<ops, rows, width>::input_type din{dxv, dxov};
    d.forward(g.device(), in, yv);
    d.backward(g.device(), in, yv, dyv, din);
    g.finish();
    std::vector<float> sum(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + o[i];
    CHECK(y_.download() == sum);
    CHECK(dxd_.download() == dy);
    CHECK(dxo_.download() == dy);
  }
  {
    dl::linear<ops, rows, width, classes> d;
    ctpipe::layers::linear<rows, width, classes> h;
    h.init(4);
    d.init(4);
    mlp_gpu::device_floats ly(rows * classes), ldy(rows * classes);
    const std::vector<float> gy = values(rows * classes, 5);
    ldy.upload(gy);
    dl::matrix<rows, classes> lyv{ly.data()};
    d.forward(g.device(), xv, lyv);
    d.backward(g.device(), xv, lyv, dl::matrix<rows, classes>{ldy.data()}, dxv);
    g.finish();
    ctpipe::layers::matrix<rows, classes> hy{}, hgy{};
    std::copy(gy.begin(), gy.end(), hgy.v.begin());
    ctpipe::layers::matrix<rows, width> hdx{};
    h.forward(ctpipe::context{}, hx, hy);
    h.backward(ctpipe::context{}, hx, hy, hgy, hdx);
    CHECK(near(ly.download(), hy.v.data(), 1e-4f));
    CHECK(near(dxd_.download(), hdx.v.data(), 1e-4f));
    CHECK(near(d.grads.download(), h.grads.data(), 1e-4f));
  }
  {  // causal attention: 2 sequences of 8 tokens, 4 heads of 4 features (its input q, k, v: 3 x 16 columns)
    constexpr std::size_t tokens = 8, seqs = 2, w = 16;
    dl::causal_attention_qkv<ops, tokens, seqs, w, 4> d;
    ctpipe::layers::causal_attention_qkv<tokens, seqs, w, 4> h;
    const std::vector<float> ax = values(rows * 3 * w, 6), ady = values(rows * w, 7);
    mlp_gpu::device_floats gx(rows * 3 * w), gy(rows * w), gdy(rows * w), gdx(rows * 3 * w),
        gs(seqs * 4 * tokens * tokens);
    gx.upload(ax);
    gdy.upload(ady);
    using in_view = dl::matrix<rows, 3 * w>;
    using out_view = dl::matrix<rows, w>;
    out_view yv2{gy.data()};
    in_view dxv2{gdx.data()};
    decltype(d)::saved_type sv{gs.data()};
    d.forward(g.device(), in_view{gx.data()}, yv2, sv);
    d.backward(g.device(), in_view{gx.data()}, yv2, sv, out_view{gdy.data()}, dxv2);
    g.finish();
    decltype(h)::input_type hx2{}, hdx2{};
    decltype(h)::output_type hy2{}, hdy2{};
    decltype(h)::saved_type hs{};
    std::copy(ax.begin(), ax.end(), hx2.v.begin());
    std::copy(ady.begin(), ady.end(), hdy2.v.begin());
    h.forward(ctpipe::context{}, hx2, hy2, hs);
    h.backward(ctpipe::context{}, hx2, hy2, hs, hdy2, hdx2);
    CHECK(near(gy.download(), hy2.v.data(), 1e-4f));
    CHECK(near(gdx.download(), hdx2.v.data(), 1e-4f));
    // In bf16: within bf16's reach.
    dl::causal_attention_qkv<ops, tokens, seqs, w, 4, ctpipe::layers::rows::fixed, dl::precision::bf16> d16;
    d16.forward(g.device(), in_view{gx.data()}, yv2, sv);
    d16.backward(g.device(), in_view{gx.data()}, yv2, sv, out_view{gdy.data()}, dxv2);
    g.finish();
    CHECK(near(gy.download(), hy2.v.data(), 2e-2f));
    CHECK(near(gdx.download(), hdx2.v.data(), 2e-2f));
  }
  {  // a linear layer in bf16: the host layer's of rounded weights and operands
    dl::linear<ops, rows, width, classes, bias::yes, ctpipe::layers::rows::fixed, dl::precision::bf16> d;
    ctpipe::layers::linear<rows, width, classes> h;
    h.init(4);
    d.init(4);
    auto rounded = [](std::vector<float> v) {
      for (float& e : v) e = static_cast<float>(ctpipe::bf16(e));
      return v;
    };
    const std::vector<float> w16 = rounded(d.params.download());
    std::copy(w16.begin(), w16.begin() + classes * width, h.params.begin());  // (the bias read as float)
    mlp_gpu::device_floats ly(rows * classes), ldy(rows * classes);
    const std::vector<float> gy = values(rows * classes, 5), x16 = rounded(x), gy16 = rounded(gy);
    ldy.upload(gy);
    dl::matrix<rows, classes> lyv{ly.data()};
    d.forward(g.device(), xv, lyv);
    d.backward_input(g.device(), xv, lyv, dl::matrix<rows, classes>{ldy.data()}, dxv);
    d.backward_weight(g.device(), xv, lyv, dl::matrix<rows, classes>{ldy.data()});
    g.finish();
    ctpipe::layers::matrix<rows, classes> hy{}, hgy{};
    ctpipe::layers::matrix<rows, width> hx16{}, hdx{};
    std::copy(gy16.begin(), gy16.end(), hgy.v.begin());
    std::copy(x16.begin(), x16.end(), hx16.v.begin());
    h.forward(ctpipe::context{}, hx16, hy);
    h.backward(ctpipe::context{}, hx16, hy, hgy, hdx);
    CHECK(near(ly.download(), hy.v.data(), 1e-4f));
    CHECK(near(dxd_.download(), hdx.v.data(), 1e-4f));
    const std::vector<float> grads = d.grads.download();
    CHECK(near(std::vector<float>(grads.begin(), grads.begin() + classes * width), h.grads.data(), 1e-4f));
  }
}

namespace {

using model =
    ctpipe::model<dl::linear<ops, rows, width, width>, dl::gelu<ops, rows, width>, dl::dropout<ops, rows, width, 100>,
                  dl::layer_norm<ops, rows, width>,
                  dl::linear<ops, rows, width, width, bias::yes, ctpipe::layers::rows::fixed, dl::precision::bf16>,
                  ctpipe::node<dl::add<ops, rows, width>, ctpipe::back<1>, ctpipe::back<3>>, dl::gelu<ops, rows, width>,
                  dl::linear<ops, rows, width, classes, bias::no>>;
using loss = mlp_gpu::softmax_cross_entropy<rows, classes>;

struct data {
  mlp_gpu::device_floats x{microbatches * rows * width};
  mlp_gpu::device_buffer<int> t{microbatches * rows};
  std::vector<model::input_type> inputs;
  std::vector<loss::target_type> targets;
  data() {
    x.upload(values(microbatches * rows * width, 9));
    std::vector<int> h(microbatches * rows);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<int>((i * 7) % classes);
    t.upload(h);
    for (int i = 0; i < microbatches; ++i) {
      inputs.push_back({x.data() + static_cast<std::size_t>(i) * rows * width});
      targets.push_back({t.data() + static_cast<std::size_t>(i) * rows});
    }
  }
};

struct result {
  std::vector<double> losses;
  std::vector<float> parameters;
  bool operator==(const result&) const = default;
};

// Three steps of Schedule (the first as `how`, the next two graph steps: a capture and a replay),
// each ending in the device optimizer's clipped AdamW. One executor type per schedule (nvcc's front
// end mistranslates an executor type named again in a second function).
// The model in 1, 2 or 4 stages of equal layer counts (its residual then crosses stages).
template <int S>
consteval auto stages() {
  if constexpr (S == 1)
    return ctpipe::stage_bounds<model, 0, 8>();
  else if constexpr (S == 2)
    return ctpipe::stage_bounds<model, 0, 4, 8>();
  else
    return ctpipe::stage_bounds<model, 0, 2, 4, 6, 8>();
}
template <auto Schedule>
result train(ctpipe::cuda::launch how) {
  constexpr auto plan = stages<Schedule.stages()>();
  constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<model, plan>()>();
  using executor = ctpipe::cuda::executor<table, model, plan, loss>;
  const data d;
  model m;
  std::uint64_t seed = 1;
  ctpipe::for_each_layer(m, [&](auto& l) {
    if constexpr (requires { l.init(seed); }) l.init(seed++);
  });
  loss l;
  executor exec(m, l);
  ops::prepare(exec);
  ctpipe::cuda::device_optimizer opt(exec, ctpipe::adamw{.lr = 0.003}, ctpipe::clipping{.max_norm = 0.5});
  result r;
  for (int step = 0; step < 3; ++step) {
    const auto losses = exec.step(d.inputs, d.targets, step == 0 ? how : ctpipe::cuda::launch::graph);
    r.losses.insert(r.losses.end(), losses.begin(), losses.end());
  }
  ctpipe::for_each_layer(m, [&](auto& layer) {
    if constexpr (requires { layer.params.download(); }) {
      const std::vector<float> p = layer.params.download();
      r.parameters.insert(r.parameters.end(), p.begin(), p.end());
    }
  });
  return r;
}

}  // namespace

TEST_CASE("gpu: a model of device layers trains bitwise alike under 1F1B, ZB-V and one rank, eager and graph") {
  const result one = train<ctpipe::gpipe(1, microbatches)>(ctpipe::cuda::launch::eager);
  for (const double l : one.losses) REQUIRE(std::isfinite(l));
  CHECK(train<ctpipe::one_f_one_b(2, microbatches)>(ctpipe::cuda::launch::eager) == one);
  CHECK(train<ctpipe::zb_v(2, microbatches)>(ctpipe::cuda::launch::graph) == one);
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("ctpipe_gpu_device_layer_tests: no CUDA device here: skipped (exit 77)");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
