// ctpipe's side of the GPT comparison with PyTorch (bench/pytorch_gpt.sh): trains the GPT of
// examples/gpt (size "tiny") or a larger one where matrix products dominate (size "small": width
// 256, 4 heads, context 128, 4 blocks) for N steps with one schedule, and prints one JSON line
// (median step time, first and last loss per token). `--dump FILE` writes the initial parameters
// and every step's token ids instead, so that bench/pytorch_gpt.py starts from the same point.
// Both sides: 8 microbatches of 4 full-length sequences a step, dropout 0, GELU's tanh form,
// AdamW (lr 1e-3, weight decay 0.01) after clipping at a global norm of 1, the loss the mean over
// the step's tokens, and OpenBLAS through libblas.so.3 at one thread per rank.
//
// Usage: bench_gpt_pipe --size tiny|small (--runner seq|1f1b|zb-v --steps N | --dump FILE)
//                       [--text FILE] [--threads T]
#include "dump.hpp"  // examples/gpt: the comparison's starting point
#include "gpt.hpp"   // examples/gpt: the tiny shape and the tokenizer

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/gpt.hpp>

#include <dlfcn.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr ctpipe::layers::gpt_shape small_shape{
    .vocab = gpt_example::vocabulary, .tokens = 128, .batch = 4, .width = 256, .heads = 4, .blocks = 4};
constexpr int microbatches = 8;

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <ctpipe::layers::gpt_shape G>
struct data {
  using net = ctpipe::layers::gpt<G>;
  std::vector<std::vector<typename net::input_type>> inputs;    // [step][microbatch]
  std::vector<std::vector<typename net::target_type>> targets;  // (the next token)
  data(const std::vector<std::int32_t>& ids, int steps) {
    const std::size_t span = ids.size() - G.tokens - 1;
    for (int s = 0; s < steps; ++s) {
      inputs.emplace_back(microbatches);
      targets.emplace_back(microbatches);
      for (int i = 0; i < microbatches; ++i)
        for (std::size_t b = 0; b < G.batch; ++b) {
          const std::size_t at = mix((static_cast<std::uint64_t>(s) * 64 + static_cast<unsigned>(i)) * 16 + b) % span;
          for (std::size_t t = 0; t < G.tokens; ++t) {
            inputs[s][i].v[t * G.batch + b] = ids[at + t];
            targets[s][i][t * G.batch + b] = ids[at + t + 1];
          }
        }
    }
  }
};

template <ctpipe::layers::gpt_shape G>
std::unique_ptr<typename ctpipe::layers::gpt<G>::model> make_model() {
  auto m = std::make_unique<typename ctpipe::layers::gpt<G>::model>();
  ctpipe::layers::gpt<G>::init(*m, 1);
  return m;
}

template <ctpipe::layers::gpt_shape G, auto Schedule>
int train(const std::vector<std::int32_t>& ids, int steps, const char* runner, const char* size) {
  using net = ctpipe::layers::gpt<G>;
  constexpr auto stages = ctpipe::partition<typename net::model, Schedule.stages()>();
  constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<typename net::model, stages>()>();
  const data<G> d(ids, steps);
  auto m = make_model<G>();
  typename net::loss loss;
  ctpipe::host_executor<table, typename net::model, stages, typename net::loss> exec(*m, loss);
  ctpipe::optimizer opt(*m, ctpipe::adamw{.lr = 1e-3}, {.max_norm = 1.0});
  const std::vector<int> extents(microbatches, static_cast<int>(net::rows));
  std::vector<double> times, losses;
  for (int s = 0; s < steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    const ctpipe::token_losses l = exec.step(d.inputs[s], d.targets[s], extents);
    opt.step(1.0 / static_cast<double>(l.total_tokens()));
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    losses.push_back(l.per_token());
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  std::printf(
      "{\"runner\": \"%s\", \"size\": \"%s\", \"threads\": %d, \"steps\": %d, \"step_ms_median\": %.4f, "
      "\"step_ms_min\": %.4f, \"loss_first\": %.7f, \"loss_last\": %.7f}\n",
      runner, size, decltype(exec)::ranks, steps, sorted[sorted.size() / 2], sorted.front(), losses.front(),
      losses.back());
  return 0;
}

// The comparison's starting point for PyTorch (examples/gpt/dump.hpp).
template <ctpipe::layers::gpt_shape G>
int dump(const std::vector<std::int32_t>& ids, int steps, const char* path) {
  const data<G> d(ids, steps);
  auto m = make_model<G>();
  gpt_example::dump out;
  out.shape = G;
  out.microbatches = microbatches;
  out.steps = steps;
  ctpipe::for_each_parameter(
      *m, [&](std::span<float> p, std::span<float>) { out.parameters.emplace_back(p.begin(), p.end()); });
  out.parameters.pop_back();  // the head: tied to the embedding's wte
  for (const auto& step : d.inputs)
    for (const auto& x : step) out.ids.insert(out.ids.end(), x.v.begin(), x.v.end());
  for (const auto& step : d.targets)
    for (const auto& t : step) out.targets.insert(out.targets.end(), t.begin(), t.end());
  if (!gpt_example::write_dump(path, out)) {
    std::fprintf(stderr, "bench_gpt_pipe: cannot write %s\n", path);
    return 2;
  }
  return 0;
}

template <ctpipe::layers::gpt_shape G>
int run(const std::string& runner, const std::vector<std::int32_t>& ids, int steps, const char* dump_to,
        const char* size) {
  if (dump_to != nullptr) return dump<G>(ids, steps, dump_to);
  if (runner == "seq") return train<G, ctpipe::one_f_one_b(1, microbatches)>(ids, steps, "ctpipe, 1 rank", size);
  if (runner == "1f1b") return train<G, ctpipe::one_f_one_b(2, microbatches)>(ids, steps, "ctpipe 1F1B p=2", size);
  if (runner == "zb-v") return train<G, ctpipe::zb_v(2, microbatches)>(ids, steps, "ctpipe ZB-V p=2", size);
  std::fprintf(stderr, "bench_gpt_pipe: --runner is seq, 1f1b or zb-v, not '%s'\n", runner.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string size = "tiny", runner = "seq", text = "/usr/share/games/fortunes/songs-poems";
  const char* dump_to = nullptr;
  int steps = 50, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--size")
      size = argv[i + 1];
    else if (k == "--runner")
      runner = argv[i + 1];
    else if (k == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (k == "--text")
      text = argv[i + 1];
    else if (k == "--dump")
      dump_to = argv[i + 1];
    else if (k == "--threads")
      threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_gpt_pipe: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (steps < 1) {
    std::fprintf(stderr, "bench_gpt_pipe: --steps must be at least 1\n");
    return 2;
  }
  using set_fn = void (*)(int);  // OpenBLAS's threads per rank, where the BLAS is OpenBLAS
  if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(threads);
  try {
    const std::vector<std::int32_t> ids = gpt_example::read_ids(text);
    if (size == "tiny") return run<gpt_example::shape>(runner, ids, steps, dump_to, "tiny");
#ifndef CTPIPE_BENCH_BUILD_ONLY  // (bench/CMakeLists.txt: CI compiles the tiny size only)
    if (size == "small") return run<small_shape>(runner, ids, steps, dump_to, "small");
#endif
    std::fprintf(stderr, "bench_gpt_pipe: --size is tiny or small, not '%s'\n", size.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt_pipe: %s\n", e.what());
    return 1;
  }
}
