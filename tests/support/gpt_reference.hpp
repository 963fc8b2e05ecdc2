// A straightforward GPT in double precision, written from the model's definition with plain loops
// and nothing of ctpipe's layers: the reference the tests hold ctpipe's GPT (ctpipe/layers/gpt.hpp)
// to. It reads the parameters of a ctpipe GPT (the spans of its layers with parameters, in layer
// order), with the head tied to the token table, and gives one microbatch's loss: the sum of its
// tokens' cross-entropy. Its gradients are taken by central differences, which double precision
// makes accurate to many more digits than float32 gradients need.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace test_support {

struct gpt_reference {
  std::size_t vocab, tokens, batch, width, heads, blocks;
  // The model's parameters, as doubles, per layer with parameters in layer order: the embedding
  // (wte, wpe), per block the two layer norms and four linear layers, the final norm (the head's
  // own copy is not read: it is tied to wte).
  std::vector<std::vector<double>> p;

  template <class Spans>
  void load(const Spans& spans) {
    p.clear();
    for (const auto& s : spans) p.emplace_back(s.begin(), s.end());
  }

  // Microbatch loss: `ids` and `targets` token-major (row t * batch + b), `t` tokens per sequence.
  double loss(const std::int32_t* ids, const int* targets, std::size_t t) const {
    const std::size_t n = t * batch, W = width;
    const auto& wte = p[0];
    std::vector<double> h(n * W);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t k = 0; k < W; ++k)
        h[r * W + k] = wte[static_cast<std::size_t>(ids[r]) * W + k] + wte[(vocab + r / batch) * W + k];
    std::size_t layer = 1;
    for (std::size_t blk = 0; blk < blocks; ++blk) {
      const auto a = norm(h, n, p[layer]);
      const auto qkv = affine(a, n, W, 3 * W, p[layer + 1]);
      const auto o = attention(qkv, t);
      const auto y = affine(o, n, W, W, p[layer + 2]);
      for (std::size_t i = 0; i < n * W; ++i) h[i] += y[i];
      const auto a2 = norm(h, n, p[layer + 3]);
      auto f = affine(a2, n, W, 4 * W, p[layer + 4]);
      for (double& v : f) v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      const auto y2 = affine(f, n, 4 * W, W, p[layer + 5]);
      for (std::size_t i = 0; i < n * W; ++i) h[i] += y2[i];
      layer += 6;
    }
    const auto x = norm(h, n, p[layer]);
    double sum = 0.0;
    for (std::size_t r = 0; r < n; ++r) {
      std::vector<double> logits(vocab);
      double mx = -1e300;
      for (std::size_t v = 0; v < vocab; ++v) {
        double z = 0.0;
        for (std::size_t k = 0; k < W; ++k) z += x[r * W + k] * wte[v * W + k];
        logits[v] = z;
        mx = z > mx ? z : mx;
      }
      double e = 0.0;
      for (double z : logits) e += std::exp(z - mx);
      sum += std::log(e) + mx - logits[static_cast<std::size_t>(targets[r])];
    }
    return sum;
  }

 private:
  std::vector<double> norm(const std::vector<double>& x, std::size_t n, const std::vector<double>& gb) const {
    const std::size_t W = width;
    std::vector<double> y(n * W);
    for (std::size_t r = 0; r < n; ++r) {
      double mean = 0.0, var = 0.0;
      for (std::size_t k = 0; k < W; ++k) mean += x[r * W + k];
      mean /= static_cast<double>(W);
      for (std::size_t k = 0; k < W; ++k) var += (x[r * W + k] - mean) * (x[r * W + k] - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(W) + 1e-5);
      for (std::size_t k = 0; k < W; ++k) y[r * W + k] = (x[r * W + k] - mean) * inv * gb[k] + gb[W + k];
    }
    return y;
  }
  // y = x W^T + b, W (out x in) then b (out) in wb.
  static std::vector<double> affine(const std::vector<double>& x, std::size_t n, std::size_t in, std::size_t out,
                                    const std::vector<double>& wb) {
    std::vector<double> y(n * out);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        double z = wb[out * in + o];
        for (std::size_t i = 0; i < in; ++i) z += x[r * in + i] * wb[o * in + i];
        y[r * out + o] = z;
      }
    return y;
  }
  std::vector<double> attention(const std::vector<double>& qkv, std::size_t t) const {
    const std::size_t W = width, hw = width / heads;
    std::vector<double> o(t * batch * W);
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t hd = 0; hd < heads; ++hd)
        for (std::size_t i = 0; i < t; ++i) {
          const double* q = &qkv[(i * batch + b) * 3 * W + hd * hw];
          std::vector<double> s(i + 1);
          double mx = -1e300;
          for (std::size_t j = 0; j <= i; ++j) {
            const double* k = &qkv[(j * batch + b) * 3 * W + W + hd * hw];
            double d = 0.0;
            for (std::size_t c = 0; c < hw; ++c) d += q[c] * k[c];
            s[j] = d / std::sqrt(static_cast<double>(hw));
            mx = s[j] > mx ? s[j] : mx;
          }
          double e = 0.0;
          for (double& v : s) e += (v = std::exp(v - mx));
          for (std::size_t c = 0; c < hw; ++c) {
            double sum = 0.0;
            for (std::size_t j = 0; j <= i; ++j) sum += s[j] / e * qkv[(j * batch + b) * 3 * W + 2 * W + hd * hw + c];
            o[(i * batch + b) * W + hd * hw + c] = sum;
          }
        }
    return o;
  }
};

}  // namespace test_support
