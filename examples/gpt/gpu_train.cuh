// The GPT example on a GPU: the same model, text, batches, learning-rate schedule and per-token
// loss as the CPU example (examples/gpt/main.cpp), its layers the device twins
// (ctpipe/layers/device/gpt.hpp over ctpipe::cuda::gpu_ops: cuBLAS products and CUDA kernels), their
// products in single precision or bf16, through the CUDA executor: one rank, or two ranks on one
// device (1F1B or ZB-V), each step issued eagerly or replayed from a CUDA graph, AdamW with clipping
// on the device at the end of each step. Its checkpoints are the CPU example's (the same tensors and
// state, float in both precisions): one trainer resumes the other's where the shapes match. The
// trainer, for nvcc: gpu.cu and gpu_bf16.cu instantiate it for one precision each (two files, built
// side by side); gpu_main.cpp reads the options.
#pragma once

#include "dump.hpp"
#include "gpt.hpp"

#include <ctpipe/cuda.hpp>
#include <ctpipe/cuda/checkpoint.hpp>
#include <ctpipe/cuda/gpu_ops.hpp>
#include <ctpipe/cuda/optimizer.hpp>
#include <ctpipe/layers/device/gpt.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace gpt_example::gpu {

using ctpipe::layers::device::precision;
template <precision P>
using net = ctpipe::layers::device::gpt<ctpipe::cuda::gpu_ops, shape, P>;
using dnet = net<precision::f32>;  // (its inputs and targets those of both precisions)

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A step's microbatches in device memory: one buffer of ids and one of targets, each microbatch a
// view into them (the same addresses every step, so a captured graph replays).
struct device_batch {
  std::int32_t* ids = nullptr;
  std::int32_t* next = nullptr;
  std::vector<dnet::model::input_type> inputs;
  std::vector<dnet::loss::target_type> targets;
  device_batch() {
    check(cudaMalloc(reinterpret_cast<void**>(&ids), microbatches * dnet::rows * sizeof(std::int32_t)), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&next), microbatches * dnet::rows * sizeof(std::int32_t)), "cudaMalloc");
    for (std::size_t i = 0; i < microbatches; ++i) {
      inputs.push_back({ids + i * dnet::rows});
      targets.push_back({next + i * dnet::rows});
    }
  }
  ~device_batch() {
    cudaFree(ids);
    cudaFree(next);
  }
  device_batch(const device_batch&) = delete;
  device_batch& operator=(const device_batch&) = delete;
  /// Copies a host batch in (its ids and targets), between steps.
  void upload(const batch& b) {
    for (std::size_t i = 0; i < microbatches; ++i) {
      check(cudaMemcpy(ids + i * dnet::rows, b.inputs[i].v.data(), dnet::rows * sizeof(std::int32_t),
                       cudaMemcpyHostToDevice),
            "cudaMemcpy");
      check(cudaMemcpy(next + i * dnet::rows, b.targets[i].data(), dnet::rows * sizeof(std::int32_t),
                       cudaMemcpyHostToDevice),
            "cudaMemcpy");
    }
  }
};

// The run's start for PyTorch (--dump: dump.hpp): the model's initial parameters, from the
// device, and every step's tokens.
template <class Model>
void write_start(const options& o, const corpus& c, Model& model) {
  dump d;
  d.shape = shape;
  d.microbatches = microbatches;
  d.steps = o.steps;
  ctpipe::for_each_parameter(model, [&](std::span<float> p, std::span<float>) {
    d.parameters.emplace_back(p.size());
    ctpipe::cuda::gpu_ops::download(d.parameters.back().data(), p.data(), p.size_bytes());
  });
  d.parameters.pop_back();  // the head: tied to the embedding's table
  batch b;
  for (int step = 0; step < o.steps; ++step) {
    training_batch(c, o, step, b);
    for (std::size_t i = 0; i < microbatches; ++i) {
      d.ids.insert(d.ids.end(), b.inputs[i].v.begin(), b.inputs[i].v.end());
      d.targets.insert(d.targets.end(), b.targets[i].begin(), b.targets[i].end());
    }
  }
  if (!write_dump(o.dump_file, d)) throw std::runtime_error("cannot write " + o.dump_file);
}

// Trains with Schedule on one device, its products in precision P; the CPU example's loop without
// the sample.
template <auto Schedule, precision P>
int train(const options& o, const corpus& c, ctpipe::cuda::launch how) {
  using dnet = net<P>;
  using model_type = typename dnet::model;
  using loss_type = typename dnet::loss;
  constexpr int stage_count = Schedule.stages();  // (named first: nvcc 13 mistranslates it in the argument list)
  constexpr auto stages = ctpipe::partition<model_type, stage_count>();
  constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<model_type, stages>()>();
  using executor = ctpipe::cuda::executor<table, model_type, stages, loss_type>;
  auto model = std::make_unique<model_type>();
  dnet::init(*model, o.seed);  // the CPU example's start
  dnet::set_dropout(*model, o.dropout);
  if (!o.dump_file.empty()) write_start(o, c, *model);
  loss_type loss;
  executor exec(*model, loss);
  ctpipe::cuda::gpu_ops::prepare(exec);  // every stream's cuBLAS handle, before a captured first step
  ctpipe::cuda::device_optimizer opt(exec, ctpipe::adamw{.lr = o.lr, .weight_decay = o.weight_decay},
                                     ctpipe::clipping{.max_norm = o.clip});
  int first = 0;
  if (o.resume) {
    const ctpipe::training_state s = ctpipe::cuda::load_checkpoint(o.checkpoint, opt);
    exec.set_context_origin(s.origin);
    first = std::stoi(s.data);
    std::printf("resumed from %s at step %d\n", o.checkpoint.c_str(), first);
  }
  std::FILE* log = o.losses_file.empty() ? nullptr : std::fopen(o.losses_file.c_str(), o.resume ? "a" : "w");
  batch host_batch, val_batch;
  validation_batch(c, val_batch);
  device_batch train_data, val_data;
  val_data.upload(val_batch);
  double val = 0.0;
  long long tokens = 0;
  std::vector<double> step_ms;
  std::uint64_t kernels = 0;
  double first_loss = 0.0, last_loss = 0.0;
  const auto start = std::chrono::steady_clock::now();
  for (int step = first; step < o.steps; ++step) {
    training_batch(c, o, step, host_batch);
    train_data.upload(host_batch);
    long long step_tokens = 0;
    for (const int e : host_batch.extents) step_tokens += e;
    opt.rule.lr = learning_rate(o, step);
    opt.gradient_scale = 1.0 / static_cast<double>(step_tokens);  // the mean over the step's tokens
    const std::uint64_t launched = ctpipe::cuda::gpu_ops::launches();
    const auto step_start = std::chrono::steady_clock::now();
    const ctpipe::token_losses l = exec.step(train_data.inputs, train_data.targets, host_batch.extents, how);
    step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start).count());
    if (step == first) kernels = ctpipe::cuda::gpu_ops::launches() - launched;  // (the first step issues them all)
    tokens += step_tokens;
    if (step == first) first_loss = l.per_token();
    last_loss = l.per_token();
    const bool last = step + 1 == o.steps, evaluated = (o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last;
    if (evaluated) val = exec.evaluate(val_data.inputs, val_data.targets, val_batch.extents).per_token();
    if (log != nullptr) {
      std::fprintf(log, "%d %a", step + 1, l.per_token());
      if (evaluated) std::fprintf(log, " %a", val);
      std::fprintf(log, "\n");
    }
    if (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0)
      ctpipe::cuda::save_checkpoint(o.checkpoint, opt, {exec.context_origin(), std::to_string(step + 1)});
    if (!o.quiet && ((step + 1) % 10 == 0 || last)) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %5d/%d  loss %.4f  val %.4f  %9.0f tokens/s%s\n", step + 1, o.steps, l.per_token(), val,
                  static_cast<double>(tokens) / seconds, opt.result().applied ? "" : "  (update skipped)");
      std::fflush(stdout);
    }
  }
  if (log != nullptr) std::fclose(log);
  std::vector<double> rest(step_ms.begin() + (step_ms.size() > 1 ? 1 : 0), step_ms.end());
  std::sort(rest.begin(), rest.end());
  const double median = rest.empty() ? 0.0 : rest[rest.size() / 2];
  std::printf("trained: %d steps, validation loss %.4f, %s steps, %s\n", o.steps, val,
              how == ctpipe::cuda::launch::graph ? "graph" : "eager", P == precision::bf16 ? "bf16" : "fp32");
  // One line for scripts/gpu.sh's comparison: the first step (a graph's capture included), the
  // median of the others, tokens a second at that median, the layers' products and kernels a step,
  // the first and last steps' losses per token.
  std::printf(
      "gpt_gpu: first step %.3f ms, step median %.4f ms, %.0f tokens/s, %llu kernels a step, loss first %.6f last "
      "%.6f\n",
      step_ms.empty() ? 0.0 : step_ms.front(), median,
      median > 0.0 ? static_cast<double>(microbatches * shape.tokens * shape.batch) / (median / 1000.0) : 0.0,
      static_cast<unsigned long long>(kernels), first_loss, last_loss);
  return 0;
}

/// Trains with o.schedule in precision P (-1: not one of this trainer's).
template <precision P>
int train_in(const options& o, const corpus& c, bool graph) {
  const auto how = graph ? ctpipe::cuda::launch::graph : ctpipe::cuda::launch::eager;
  if (o.schedule == "one") return train<ctpipe::gpipe(1, microbatches), P>(o, c, how);
  if (o.schedule == "1f1b") return train<ctpipe::one_f_one_b(2, microbatches), P>(o, c, how);
  if (o.schedule == "zb-v") return train<ctpipe::zb_v(2, microbatches), P>(o, c, how);
  return -1;
}

}  // namespace gpt_example::gpu
