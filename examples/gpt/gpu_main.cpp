// The GPT example on a GPU (examples/gpt/gpu.cu trains; this reads the options): the CPU example's
// model, text and batches, through the CUDA executor. Exits 77 where there is no GPU.
//
//   ./build/bin/gpt_gpu --text FILE --schedule zb-v --steps 300 --launch graph
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
  std::string launch = "graph";
  CLI::App app{"Trains the character-level GPT on a GPU through a pipeline schedule (ctpipe)."};
  add_training_options(app, o);
  app.add_option("--schedule", o.schedule, "one (one rank), 1f1b or zb-v (two ranks on the GPU)")
      ->check(CLI::IsMember({"one", "1f1b", "zb-v"}));
  app.add_option("--launch", launch, "eager, or graph (each step replayed from a CUDA graph)")
      ->check(CLI::IsMember({"eager", "graph"}));
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
