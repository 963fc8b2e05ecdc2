// Checkpoints across processes: the sweeps' model (a tied head across processes, dropout, mixed
// lengths) trained with clipped AdamW by the MPI executor at P = 4, checkpointed at step 10 of 20
// into one file that the four processes write together (each its own layers, the shared weights
// once), then resumed at P = 4, at P = 2 (two pipelines of two processes, each loading the whole
// run) and sequentially in every process: the rest of the run bitwise equal to the sequential run
// that never stopped. A checkpoint of another model is refused on every process, nothing loaded.
#include "mpi_numerics.hpp"

#include <ctpipe/optim/checkpoint.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

using Model = test::block_mlp;
using Loss = test::loss_for<Model>;
using Input = Model::input_type;
using Opt = ctpipe::optimizer<Model, ctpipe::adamw>;
constexpr int m = test::microbatches;

constexpr auto four_stages = test::even_stages<Model, 4>();
constexpr auto four = test::table_for<ctpipe::one_f_one_b(4, m), Model, four_stages>();
using exec4 = ctpipe::mpi::executor<four, Model, four_stages, Loss, ctpipe::dispatch::table_walk>;
constexpr auto two_stages = test::even_stages<Model, 2>();
constexpr auto two = test::table_for<ctpipe::one_f_one_b(2, m), Model, two_stages>();
using exec2 = ctpipe::mpi::executor<two, Model, two_stages, Loss, ctpipe::dispatch::table_walk>;

const auto data = test::make_data<Input>(m);

// One file name for the whole job: process 0's.
std::string shared_file(const char* what) {
  long id = static_cast<long>(::getpid());
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / ("ctpipe_" + std::string(what) + "_" + std::to_string(id))).string();
}

}  // namespace

TEST_SUITE("np4") {
  TEST_CASE("mpi checkpoint: written by 4 processes at step 10, resumed at P = 4, P = 2 and sequentially, bitwise") {
    const std::string file = shared_file("resume") + ".safetensors";
    // The run that never stopped, sequentially, in every process.
    Model ref = test::make_mlp<Model>();
    Opt ref_opt(ref, test::sweep_rule, test::sweep_clip);
    test::train_steps<exec4>(nullptr, ref, ref_opt, data, 0, 20);
    {
      Model model = test::make_mlp<Model>();
      Loss l;
      exec4 exec(model, l, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60)});
      Opt opt(model, exec, test::sweep_rule, test::sweep_clip);
      test::train_steps(&exec, model, opt, data, 0, 10);
      ctpipe::save_checkpoint(file, opt, {exec.context_origin(), "sample 120"});
    }
    const auto resume = [&]<class Exec>(Exec*, MPI_Comm comm) {
      Model model = test::make_mlp<Model>(99);
      Loss l;
      Exec exec(model, l, comm, {.timeout = std::chrono::seconds(60)});
      Opt opt(model, exec, test::sweep_rule, test::sweep_clip);
      const ctpipe::training_state s = ctpipe::load_checkpoint(file, opt);
      CHECK(s.origin.step == 10);
      CHECK(s.data == "sample 120");
      exec.set_context_origin(s.origin);
      test::train_steps(&exec, model, opt, data, 10, 20);
      CHECK(test::bitwise_equal(test::rank_values<Exec::stages, Exec::table>(model, exec.rank(), false),
                                test::rank_values<Exec::stages, Exec::table>(ref, exec.rank(), false)));
    };
    SUBCASE("P = 4") { resume(static_cast<exec4*>(nullptr), MPI_COMM_WORLD); }
    SUBCASE("P = 2, two pipelines side by side") {
      int world = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &world);
      MPI_Comm half = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, world / 2, world, &half);
      resume(static_cast<exec2*>(nullptr), half);
      MPI_Comm_free(&half);
    }
    SUBCASE("sequentially, in every process") {
      Model model = test::make_mlp<Model>(99);
      Opt opt(model, test::sweep_rule, test::sweep_clip);
      CHECK(ctpipe::load_checkpoint(file, opt).origin.step == 10);
      test::train_steps<exec4>(nullptr, model, opt, data, 10, 20);
      CHECK(test::bitwise_equal(test::parameters(model), test::parameters(ref)));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    if (world == 0) std::filesystem::remove(file);
  }

  TEST_CASE("mpi checkpoint: a checkpoint of another model is refused on every process, nothing loaded") {
    const std::string file = shared_file("other") + ".safetensors";
    int world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    if (world == 0) {
      test::untied_block_mlp other = test::make_mlp<test::untied_block_mlp>();
      ctpipe::optimizer o(other, test::sweep_rule);
      ctpipe::save_checkpoint(file, o);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    Model model = test::make_mlp<Model>();
    const std::vector<float> before = test::parameters(model);
    Loss l;
    exec4 exec(model, l, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60)});
    Opt opt(model, exec, test::sweep_rule, test::sweep_clip);
    try {
      (void)ctpipe::load_checkpoint(file, opt);
      FAIL("loaded");
    } catch (const ctpipe::checkpoint_error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      // Every process reads the whole header, and names the head's first tensor that differs.
      CHECK(what.find("tensor \"layers.9.") != std::string::npos);
    }
    CHECK(test::bitwise_equal(before, test::parameters(model)));
    MPI_Barrier(MPI_COMM_WORLD);
    if (world == 0) std::filesystem::remove(file);
  }

  TEST_CASE("mpi checkpoint: a damaged byte is refused on every process, naming the tensor where it is read") {
    const std::string file = shared_file("damaged") + ".safetensors";
    int world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    if (world == 0) {
      Model whole = test::make_mlp<Model>(5);
      Opt o(whole, test::sweep_rule, test::sweep_clip);
      ctpipe::save_checkpoint(file, o);
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(-1, std::ios::end);  // the last byte: the last layer's optimizer state, held by process 3
      const char c = static_cast<char>(f.get());
      f.seekp(-1, std::ios::end);
      f.put(static_cast<char>(c ^ 0x10));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    Model model = test::make_mlp<Model>();
    const std::vector<float> before = test::parameters(model);
    Loss l;
    exec4 exec(model, l, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60)});
    Opt opt(model, exec, test::sweep_rule, test::sweep_clip);
    try {
      (void)ctpipe::load_checkpoint(file, opt);
      FAIL("loaded");
    } catch (const ctpipe::checkpoint_error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      if (exec.rank() == 3)
        CHECK(what.find("\" is damaged: its checksum is ") != std::string::npos);
      else
        CHECK(what.find("another process could not load its part") != std::string::npos);
    }
    CHECK(test::bitwise_equal(before, test::parameters(model)));
    MPI_Barrier(MPI_COMM_WORLD);
    if (world == 0) std::filesystem::remove(file);
  }
}
