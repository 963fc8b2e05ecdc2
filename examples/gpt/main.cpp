// A character-level GPT trained on real text through a pipeline: the model of
// ctpipe/layers/gpt.hpp, one thread per rank, any schedule this program compiles. See README.md's
// "GPT" section and docs/gpt.md.
//
//   ./build/bin/gpt --schedule zb-v --ranks 2 --steps 400 --svg loss.svg
#include "cli.hpp"
#include "gpt.hpp"

#include <dlfcn.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#if CTPIPE_GPT_MPI
#include <mpi.h>
#endif

namespace {
// OpenBLAS's threads per rank, where the BLAS is OpenBLAS (its own function, found at run time so
// that any libblas links).
void set_blas_threads(int n) {
  using set_fn = void (*)(int);
  if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}
// Whether an MPI launcher started this process as one of several (Open MPI, MPICH, Hydra, Slurm).
bool under_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* n = std::getenv(v); n != nullptr && std::atoi(n) > 1) return true;
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace gpt_example;
  options o;
  const bool mpi = under_mpirun();
#if CTPIPE_GPT_MPI
  if (mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &o.process);
    MPI_Comm_size(MPI_COMM_WORLD, &o.processes);
  }
  struct finalize {
    bool on;
    ~finalize() {
      if (on) MPI_Finalize();
    }
  } finalize_mpi{mpi};
#else
  if (mpi) {
    std::fprintf(stderr, "gpt: started by mpirun, but this build has no MPI (install libopenmpi-dev and rebuild)\n");
    return 2;
  }
#endif
  const auto fail = [&](const std::string& message) {  // one line, from one process
    if (o.process == 0) std::fprintf(stderr, "gpt: %s\n", message.c_str());
    return 2;
  };
  o.text = "/usr/share/games/fortunes/songs-poems";
  CLI::App app{"Trains a character-level GPT with a pipeline schedule (ctpipe)."};
  add_training_options(app, o);
  app.add_option("--schedule", o.schedule, "1f1b, interleaved, zb-h1, zb-v or dualpipe-v")
      ->check(CLI::IsMember({"1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe-v"}));
  app.add_option("--ranks", o.ranks,
                 "Pipeline ranks: threads, or under mpirun processes per replica (replicas: processes / ranks)");
  app.add_option("--stop-after", o.stop_after, "Stop after this step, as if interrupted (to try --resume)");
  app.add_option("--sample", o.sample, "Characters to generate at the end");
  app.add_option("--svg", o.svg, "Write the loss curve as an SVG picture");
  app.add_option("--blas-threads", o.blas_threads, "BLAS threads per rank")->check(CLI::PositiveNumber);
  app.add_option("--write-model", o.model_file,
                 "Measure the layers (1, 2, 4, 8 sequences a microbatch) and write the planner's model file; "
                 "no training");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return o.process == 0 ? app.exit(e) : 0;
    return fail(e.what());
  }
  if ((o.resume || o.checkpoint_every > 0) && o.checkpoint.empty())
    return fail("--resume and --checkpoint-every need --checkpoint FILE");
  if (o.resume && !std::filesystem::exists(o.checkpoint))
    return fail("--resume: no checkpoint at '" + o.checkpoint + "'");
  set_blas_threads(o.blas_threads);
  try {
    const corpus c = load_corpus(o.text);
    if (!o.model_file.empty()) {
      if (mpi) return fail("--write-model runs alone, not under mpirun");
      return write_model(o, c);
    }
    if (o.process == 0)
      std::printf("gpt: %zu training and %zu validation characters, %s on %d rank(s) x %d replica(s), %d steps\n",
                  c.train.size(), c.validation.size(), o.schedule.c_str(), o.ranks, o.processes / std::max(1, o.ranks),
                  o.steps);
    int rc = -1;
    if (mpi)
#if CTPIPE_GPT_MPI
      rc = o.ranks > 0 ? train_mpi(o, c) : -1;
#else
      rc = -1;
#endif
    else if (o.schedule == "1f1b")
      rc = train_one_f_one_b(o, c);
    else if (o.schedule == "interleaved")
      rc = train_interleaved(o, c);
    else if (o.schedule == "zb-h1")
      rc = train_zb_h1(o, c);
    else
      rc = train_v(o, c);
    if (rc == -1 && mpi)
      return fail("--schedule " + o.schedule + " --ranks " + std::to_string(o.ranks) + " on " +
                  std::to_string(o.processes) +
                  " processes is not compiled in (under mpirun: 1f1b and zb-v at 2 ranks x 1 or 2 replicas, 1f1b at 4 "
                  "ranks x 1)");
    if (rc == -1)
      return fail("--schedule " + o.schedule + " --ranks " + std::to_string(o.ranks) +
                  " is not compiled in (1f1b: 1, 2, 4 ranks; zb-h1: 2, 4; interleaved, zb-v, dualpipe-v: 2)");
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt: process %d: %s\n", o.process, e.what());
#if CTPIPE_GPT_MPI
    if (mpi) MPI_Abort(MPI_COMM_WORLD, 1);  // the others may wait in a collective
#endif
    return 1;
  }
}
