// The GPT example on a GPU (examples/gpt/gpu.cu trains; this reads the options): the CPU example's
// model, text and batches, through the CUDA executor. Exits 77 where there is no GPU.
//
//   ./build/bin/gpt_gpu --text FILE --schedule zb-v --steps 300 --launch graph
#include "gpt.hpp"

#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  using namespace gpt_example;
  options o;
  o.text = "/usr/share/games/fortunes/songs-poems";
  o.schedule = "one";
  std::string launch = "graph";
  CLI::App app{"Trains the character-level GPT on a GPU through a pipeline schedule (ctpipe)."};
  app.add_option("--text", o.text, "Text file to train on (default: Debian's fortunes, songs and poems)");
  app.add_option("--schedule", o.schedule, "one (one rank), 1f1b or zb-v (two ranks on the GPU)")
      ->check(CLI::IsMember({"one", "1f1b", "zb-v"}));
  app.add_option("--launch", launch, "eager, or graph (each step replayed from a CUDA graph)")
      ->check(CLI::IsMember({"eager", "graph"}));
  app.add_option("--steps", o.steps, "Training steps (8 microbatches of 4 sequences each)")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "Peak learning rate (AdamW)");
  app.add_option("--min-lr", o.min_lr, "Learning rate at the end of the cosine decay");
  app.add_option("--warmup", o.warmup, "Warm-up steps")->check(CLI::NonNegativeNumber);
  app.add_option("--clip", o.clip, "Global gradient norm clipping (0: none)");
  app.add_option("--dropout", o.dropout, "Dropout rate in thousandths")->check(CLI::Range(0u, 999u));
  app.add_option("--min-tokens", o.min_tokens, "Shortest microbatch, tokens per sequence (up to the context)")
      ->check(CLI::Range(1, static_cast<int>(shape.tokens)));
  app.add_option("--eval-every", o.eval_every, "Validation every N steps (0: at the end only)");
  app.add_option("--checkpoint", o.checkpoint, "Checkpoint file (safetensors; the CPU example's)");
  app.add_option("--checkpoint-every", o.checkpoint_every, "Write the checkpoint every N steps");
  app.add_flag("--resume", o.resume, "Resume from --checkpoint");
  app.add_option("--losses", o.losses_file, "Write each step's losses (hexadecimal floats) to this file");
  app.add_option("--seed", o.seed, "Seed of the parameters and the batches");
  app.add_flag("--quiet", o.quiet, "No progress lines");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "gpt_gpu: %s\n", e.what());
    return 2;
  }
  if ((o.resume || o.checkpoint_every > 0) && o.checkpoint.empty()) {
    std::fprintf(stderr, "gpt_gpu: --resume and --checkpoint-every need --checkpoint FILE\n");
    return 2;
  }
  if (o.resume && !std::filesystem::exists(o.checkpoint)) {
    std::fprintf(stderr, "gpt_gpu: --resume: no checkpoint at '%s'\n", o.checkpoint.c_str());
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("gpt_gpu: no CUDA device here; nothing to run (exit 77: skipped)");
    return 77;
  }
  try {
    const corpus c = load_corpus(o.text);
    std::printf("gpt_gpu: %zu training characters, %s, %d steps, %s\n", c.train.size(), o.schedule.c_str(), o.steps,
                launch.c_str());
    return train_gpu(o, c, launch == "graph");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_gpu: %s\n", e.what());
    return 1;
  }
}
