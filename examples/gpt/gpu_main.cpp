// The GPT example on a GPU (examples/gpt/gpu.cu trains; this reads the options): the CPU example's
// model, text and batches, through the CUDA executor. Exits 77 where there is no GPU.
//
//   ./build/bin/gpt_gpu --text FILE --schedule zb-v --steps 300 --launch graph --precision bf16
#include "cli.hpp"
#include "gpt.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  using namespace gpt_example;
  options o;
  o.text = "/usr/share/games/fortunes/songs-poems";
  o.schedule = "one";
  std::string launch = "graph", precision = "fp32";
  CLI::App app{"Trains the character-level GPT on a GPU through a pipeline schedule (ctpipe)."};
  add_training_options(app, o);
  app.add_option("--schedule", o.schedule, "one (one rank), 1f1b or zb-v (two ranks on the GPU)")
      ->check(CLI::IsMember({"one", "1f1b", "zb-v"}));
  app.add_option("--launch", launch, "eager, or graph (each step replayed from a CUDA graph)")
      ->check(CLI::IsMember({"eager", "graph"}));
  app.add_option("--precision", precision, "fp32 (IEEE single precision products), or bf16 (bf16 products, float sums)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--dump", o.dump_file,
                 "Write the initial parameters and every step's tokens to FILE, for bench/pytorch_gpt_gpu.py "
                 "--from (needs --min-tokens at the context and --dropout 0)");
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
  if (!o.dump_file.empty() && (o.min_tokens != static_cast<int>(shape.tokens) || o.dropout != 0 || o.resume)) {
    std::fprintf(stderr, "gpt_gpu: --dump needs --min-tokens %zu (every sequence whole), --dropout 0 and no --resume\n",
                 shape.tokens);
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
    std::printf("gpt_gpu: %zu training characters, %s, %d steps, %s, %s\n", c.train.size(), o.schedule.c_str(), o.steps,
                launch.c_str(), precision.c_str());
    return precision == "bf16" ? train_gpu_bf16(o, c, launch == "graph") : train_gpu(o, c, launch == "graph");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_gpu: %s\n", e.what());
    return 1;
  }
}
