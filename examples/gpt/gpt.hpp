// The GPT example's model, data and options, shared by its translation units (each compiles the
// trainer for some of the schedules: train.hpp).
#pragma once

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/gpt.hpp>

#include "tokenizer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpt_example {

// The model's sizes, set when the example is configured (CMake: -DCTPIPE_GPT_TOKENS=128
// -DCTPIPE_GPT_WIDTH=256 ...; README.md's defaults below).
#ifndef CTPIPE_GPT_TOKENS
#define CTPIPE_GPT_TOKENS 64
#endif
#ifndef CTPIPE_GPT_BATCH
#define CTPIPE_GPT_BATCH 4
#endif
#ifndef CTPIPE_GPT_WIDTH
#define CTPIPE_GPT_WIDTH 64
#endif
#ifndef CTPIPE_GPT_HEADS
#define CTPIPE_GPT_HEADS 4
#endif
#ifndef CTPIPE_GPT_BLOCKS
#define CTPIPE_GPT_BLOCKS 2
#endif

/// A character-level GPT: 96 symbols (newline and printable ASCII); by default context 64, 4
/// sequences a microbatch, width 64, 4 heads, 2 blocks (about 110,000 parameters): small enough to
/// train in minutes on two cores, and for CI to run every schedule.
inline constexpr ctpipe::layers::gpt_shape shape{.vocab = vocabulary,
                                                 .tokens = CTPIPE_GPT_TOKENS,
                                                 .batch = CTPIPE_GPT_BATCH,
                                                 .width = CTPIPE_GPT_WIDTH,
                                                 .heads = CTPIPE_GPT_HEADS,
                                                 .blocks = CTPIPE_GPT_BLOCKS};
using net = ctpipe::layers::gpt<shape>;
inline constexpr int microbatches = 8;  // a step: 8 microbatches of 4 sequences

struct options {
  std::string text, schedule = "1f1b", checkpoint, losses_file, svg, model_file, dump_file;
  int ranks = 2, steps = 200, stop_after = 0, warmup = 20, eval_every = 50, checkpoint_every = 0, sample = 200,
      blas_threads = 1;
  int min_tokens = shape.tokens / 2;  // each microbatch's tokens per sequence: from min_tokens to the context
  double lr = 3e-3, min_lr = 3e-4, weight_decay = 0.1, clip = 1.0;
  unsigned dropout = 0;  // thousandths
  std::uint64_t seed = 1;
  bool resume = false, quiet = false;
  int process = 0, processes = 1;  // under mpirun: this process, and how many
};

/// The text as token ids, split into training and validation (the last tenth).
struct corpus {
  std::vector<std::int32_t> train, validation;
};
corpus load_corpus(const std::string& path);

/// One step's microbatches: inputs, targets (the next character) and extents.
struct batch {
  std::vector<net::input_type> inputs;
  std::vector<net::target_type> targets;
  std::vector<int> extents;
};
/// Step `step`'s training batch: a pure function of (seed, step), so a resumed run draws the same.
void training_batch(const corpus& c, const options& o, int step, batch& b);
/// The validation batch: microbatches of full length at evenly spaced places.
void validation_batch(const corpus& c, batch& b);

/// Trains with the schedule and ranks of `o`; returns the process's exit code. Each
/// train_<schedule> is in its own translation unit.
int train_one_f_one_b(const options& o, const corpus& c);
int train_interleaved(const options& o, const corpus& c);
int train_zb_h1(const options& o, const corpus& c);
int train_v(const options& o, const corpus& c);  // zb-v and dualpipe-v
/// Under mpirun: ranks x replicas processes (schedules_mpi.cpp; built where MPI is found).
int train_mpi(const options& o, const corpus& c);
/// On a GPU, the device GPT through the CUDA executor, each step eager or replayed from a CUDA graph
/// (gpu.cu, the program gpt_gpu): schedule "one", "1f1b" or "zb-v" (two ranks on one device).
int train_gpu(const options& o, const corpus& c, bool graph);
/// The same, its products in bf16 (gpu_bf16.cu).
int train_gpu_bf16(const options& o, const corpus& c, bool graph);

/// Measures the model's layers and writes the planner's model file to o.model_file
/// (model_file.cpp).
int write_model(const options& o, const corpus& c);
/// What 1F1B on 2 ranks measures of its stages (the trainer's executor and partition<>'s stages;
/// full-length microbatches): each stage's first layer, and its compute per microbatch, the median
/// of 5 recorded steps. The model file's calibration (schedules_1f1b.cpp).
struct stage_measures {
  std::vector<int> first;
  std::vector<ctpipe::stage_time> times;
};
stage_measures measure_stages(const options& o, const corpus& c);

/// The learning rate of step `step` (from 0): linear warm-up, then a cosine decay to min_lr.
double learning_rate(const options& o, int step);

/// Writes the loss curve as an SVG picture.
void write_svg(const std::string& path, const std::vector<double>& train,
               const std::vector<std::pair<int, double>>& val);

}  // namespace gpt_example
