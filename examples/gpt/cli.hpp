// The options both GPT trainers take (the CPU example's main.cpp, the GPU one's gpu_main.cpp): text,
// steps, the learning-rate schedule, clipping, dropout, lengths, validation, checkpoints, losses,
// seed. Each trainer adds its own.
#pragma once

#include "gpt.hpp"

#include <CLI/CLI.hpp>

namespace gpt_example {

inline void add_training_options(CLI::App& app, options& o) {
  app.add_option("--text", o.text, "Text file to train on (default: Debian's fortunes, songs and poems)");
  app.add_option("--steps", o.steps, "Training steps (8 microbatches of 4 sequences each)")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "Peak learning rate (AdamW)");
  app.add_option("--min-lr", o.min_lr, "Learning rate at the end of the cosine decay");
  app.add_option("--warmup", o.warmup, "Warm-up steps")->check(CLI::NonNegativeNumber);
  app.add_option("--weight-decay", o.weight_decay, "AdamW's weight decay");
  app.add_option("--clip", o.clip, "Global gradient norm clipping (0: none)");
  app.add_option("--dropout", o.dropout, "Dropout rate in thousandths")->check(CLI::Range(0u, 999u));
  app.add_option("--min-tokens", o.min_tokens, "Shortest microbatch, tokens per sequence (up to the context)")
      ->check(CLI::Range(1, static_cast<int>(shape.tokens)));
  app.add_option("--eval-every", o.eval_every, "Validation every N steps (0: at the end only)");
  app.add_option("--checkpoint", o.checkpoint, "Checkpoint file (safetensors)");
  app.add_option("--checkpoint-every", o.checkpoint_every, "Write the checkpoint every N steps");
  app.add_flag("--resume", o.resume, "Resume from --checkpoint");
  app.add_option("--losses", o.losses_file, "Write each step's losses (hexadecimal floats) to this file");
  app.add_option("--seed", o.seed, "Seed of the parameters and the batches");
  app.add_flag("--quiet", o.quiet, "No progress lines");
}

}  // namespace gpt_example
