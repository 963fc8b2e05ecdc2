// ctpipe::optimizer, ctpipe::cuda::device_optimizer and checkpoints on the NCCL executor (simulated),
// across D = 2 replicas x P = 2 ranks, one simulated process each: every process updates its rank's
// layers on host copies (below, on its device), the
// norm's terms meet in an ncclAllReduce of the world (collective: each process calls from a thread
// of its own), a NaN in one replica's copy of a gradient skips the step on every process although
// the process that counts that layer sees finite values, and a checkpoint written by the four
// processes (each layer once) loads into the sequential host model and trains on bitwise alike; a
// truncated one is refused on every process, loading nothing.
#include "support/nccl_numerics.hpp"

#include <ctpipe/cuda/checkpoint.hpp>
#include <ctpipe/optim/checkpoint.hpp>

#include <unistd.h>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>

namespace {

using Model = test::device::mlp;
using Host = test::mlp;
constexpr int ranks = 2, replicas = 2, processes = ranks * replicas, m = 4;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(ranks, m)>();
using exec_t = test::nccl::sim_executor<table, Model>;
using Opt = ctpipe::optimizer<Model, ctpipe::adamw>;
using HostOpt = ctpipe::optimizer<Host, ctpipe::adamw>;
using test::nccl::on_every_process;

const test::data_set data = test::make_data(m * replicas);

// The job: each process with its model copy, its replica's microbatches, its executor and its
// optimizer.
struct job {
  std::vector<sim::nccl::handle*> world = sim::nccl::make_world(processes);
  std::vector<Model> models;
  std::vector<test::device::sim_loss> losses{processes};
  std::vector<std::unique_ptr<test::device::device_data>> inputs;
  std::vector<std::unique_ptr<exec_t>> exec;
  std::vector<std::unique_ptr<Opt>> opt;
  explicit job(std::uint64_t seed = 1) {
    for (int q = 0; q < processes; ++q) {
      models.push_back(test::device::make_mlp<Model>(seed));
      const auto first = static_cast<std::ptrdiff_t>(q % replicas * m);
      test::data_set mine;
      mine.inputs.assign(data.inputs.begin() + first, data.inputs.begin() + first + m);
      mine.targets.assign(data.targets.begin() + first, data.targets.begin() + first + m);
      inputs.push_back(std::make_unique<test::device::device_data>(mine, q, q));
    }
    for (int q = 0; q < processes; ++q) {
      exec.push_back(std::make_unique<exec_t>(models[ix(q)], losses[ix(q)],
                                              ctpipe::nccl::job<sim::nccl::net>{world[ix(q)], q, processes, q}));
      opt.push_back(std::make_unique<Opt>(models[ix(q)], *exec[ix(q)], test::sweep_rule, test::sweep_clip));
    }
  }
  static std::size_t ix(int q) { return static_cast<std::size_t>(q); }
  // A step on every process.
  void step() {
    for (int q = 0; q < processes; ++q) exec[ix(q)]->enqueue(inputs[ix(q)]->inputs, inputs[ix(q)]->targets);
    for (int q = 0; q < processes; ++q) exec[ix(q)]->wait();
  }
  // The update on every process (collective).
  std::vector<ctpipe::update_result> update() {
    std::vector<ctpipe::update_result> r(processes);
    on_every_process(processes, [&](int q) { r[ix(q)] = opt[ix(q)]->step(); });
    return r;
  }
  // Process q's rank's parameters, as test::rank_values gives them.
  std::vector<float> parameters(int q) {
    return test::rank_values<exec_t::stages, exec_t::plan.table>(models[ix(q)], exec[ix(q)]->rank(), false);
  }
};

// A step of the sequential reference (the replicas' sums) and its update.
ctpipe::update_result reference(Host& seq, HostOpt& opt) {
  test::loss l;
  test::reference_step(seq, l, data, replicas, m);
  return opt.step();
}

std::vector<float> rank_parameters(Host& seq, int rank) {
  return test::rank_values<exec_t::stages, exec_t::plan.table>(seq, rank, false);
}

// A checkpoint's path in the temporary directory, this process's own.
std::string checkpoint_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()) + ".safetensors")).string();
}

void check_clean() {
  INFO((sim::nccl::state::get().violations.empty() ? std::string() : sim::nccl::state::get().violations[0]));
  CHECK(sim::nccl::state::get().violations.empty());
}

}  // namespace

TEST_CASE(
    "nccl executor (simulated): D = 2 x P = 2: clipped AdamW bitwise the host's, a NaN in one replica's "
    "gradient skips the step on every process") {
  sim::world::get().reset(3, processes);
  sim::nccl::state::get().reset();
  {
    job j;
    Host seq = test::make_mlp();
    HostOpt ref(seq, test::sweep_rule, test::sweep_clip);
    int clipped = 0;
    for (int step = 0; step < 3; ++step) {
      j.step();
      const ctpipe::update_result want = reference(seq, ref);
      for (const ctpipe::update_result& r : j.update()) test::same_update(want, r, clipped);
    }
    CHECK(clipped > 0);
    for (int q = 0; q < processes; ++q)
      CHECK(test::bitwise_equal(rank_parameters(seq, j.exec[job::ix(q)]->rank()), j.parameters(q)));
    // Process 3 is replica 1 of rank 1: it updates the last layer but does not count it in the norm
    // (process 2, replica 0, does, and its copy of the gradient is finite).
    j.step();
    REQUIRE(j.exec[3]->replica() == 1);
    REQUIRE_FALSE(j.exec[3]->counts_layer(Model::size - 1));
    REQUIRE(j.exec[3]->updates_layer(Model::size - 1));
    std::vector<std::vector<float>> before;
    for (int q = 0; q < processes; ++q) before.push_back(j.parameters(q));
    j.models[3].layer<Model::size - 1>().gradients()[0] = std::numeric_limits<float>::quiet_NaN();
    for (const ctpipe::update_result& r : j.update()) CHECK_FALSE(r.applied);
    for (int q = 0; q < processes; ++q) {
      CHECK(test::bitwise_equal(before[job::ix(q)], j.parameters(q)));
      CHECK(j.opt[job::ix(q)]->updates() == 3);
    }
  }
  check_clean();
  CHECK(sim::world::get().live_allocations == 0);
}

TEST_CASE(
    "nccl executor (simulated): a checkpoint of four processes loads into the sequential model and trains on "
    "bitwise alike, a truncated one loads nothing anywhere") {
  const std::string file = checkpoint_file("ctpipe_nccl_");
  sim::world::get().reset(4, processes);
  sim::nccl::state::get().reset();
  {
    job j;
    for (int step = 0; step < 2; ++step) {
      j.step();
      j.update();
    }
    on_every_process(processes, [&](int q) {
      ctpipe::save_checkpoint(file, *j.opt[job::ix(q)], {j.exec[job::ix(q)]->context_origin(), "two steps"});
    });
    for (int step = 2; step < 4; ++step) {  // the run that never stopped
      j.step();
      j.update();
    }
    Host seq = test::make_mlp(99);
    HostOpt ref(seq, test::sweep_rule, test::sweep_clip);
    const ctpipe::training_state s = ctpipe::load_checkpoint(file, ref);
    CHECK(s.origin.step == 2);
    CHECK(s.data == "two steps");
    CHECK(ref.updates() == 2);
    for (int step = 2; step < 4; ++step) CHECK(reference(seq, ref).applied);
    for (int q = 0; q < processes; ++q)
      CHECK(test::bitwise_equal(rank_parameters(seq, j.exec[job::ix(q)]->rank()), j.parameters(q)));

    // A truncated copy: every process refuses it, and no parameter changes.
    const std::string cut = file + ".cut";
    std::filesystem::copy_file(file, cut, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 100);
    std::vector<std::vector<float>> before;
    for (int q = 0; q < processes; ++q) before.push_back(j.parameters(q));
    std::vector<std::string> errors(processes);
    on_every_process(processes, [&](int q) {
      try {
        ctpipe::load_checkpoint(cut, *j.opt[job::ix(q)]);
      } catch (const ctpipe::checkpoint_error& e) {
        errors[job::ix(q)] = e.what();
      }
    });
    for (int q = 0; q < processes; ++q) {
      CAPTURE(q);
      CHECK(errors[job::ix(q)].find("ctpipe checkpoint " + cut) == 0);
      CHECK(test::bitwise_equal(before[job::ix(q)], j.parameters(q)));
      CHECK(j.opt[job::ix(q)]->updates() == 4);
    }
    std::filesystem::remove(cut);
  }
  check_clean();
  std::filesystem::remove(file);
}

// The device optimizer on every process (ctpipe::cuda::device_optimizer: the update ends each step,
// the norm's terms summed in the step's all-reduce): bitwise the host's; a process whose gradients
// are not finite in layers another process counts (its gradient_scale a NaN) skips the update on
// every process; a checkpoint written through its host copies loads into the sequential model; and
// where one process has no device optimizer attached, every process's wait() says so and none
// updates.
TEST_CASE(
    "nccl executor (simulated): D = 2 x P = 2 with the device optimizer: bitwise the host's, a NaN on one "
    "process skips the update on every process, its checkpoint loads into the host model, processes that do not "
    "all attach one are refused") {
  using DevOpt = ctpipe::cuda::device_optimizer<exec_t, ctpipe::adamw>;
  const std::string file = checkpoint_file("ctpipe_nccl_dev_");
  sim::world::get().reset(5, processes);
  sim::nccl::state::get().reset();
  {
    job j;
    j.opt.clear();  // (no host-copy optimizer here)
    std::vector<std::unique_ptr<DevOpt>> dev;
    for (int q = 0; q < processes; ++q)
      dev.push_back(std::make_unique<DevOpt>(*j.exec[job::ix(q)], test::sweep_rule, test::sweep_clip));
    Host seq = test::make_mlp();
    HostOpt ref(seq, test::sweep_rule, test::sweep_clip);
    int clipped = 0;
    for (int step = 0; step < 3; ++step) {
      j.step();
      const ctpipe::update_result want = reference(seq, ref);
      for (int q = 0; q < processes; ++q) test::same_update(want, dev[job::ix(q)]->result(), clipped);
      if (step == 1)
        on_every_process(processes, [&](int q) {
          ctpipe::cuda::save_checkpoint(file, *dev[job::ix(q)], {j.exec[job::ix(q)]->context_origin(), "two steps"});
        });
    }
    CHECK(clipped > 0);
    for (int q = 0; q < processes; ++q)
      CHECK(test::bitwise_equal(rank_parameters(seq, j.exec[job::ix(q)]->rank()), j.parameters(q)));

    // The checkpoint after two steps, in the host model, then its third step: the processes' parameters.
    {
      Host back = test::make_mlp(99);
      HostOpt back_opt(back, test::sweep_rule, test::sweep_clip);
      CHECK(ctpipe::load_checkpoint(file, back_opt).data == "two steps");
      CHECK(back_opt.updates() == 2);
      CHECK(reference(back, back_opt).applied);
      for (int q = 0; q < processes; ++q)
        CHECK(test::bitwise_equal(rank_parameters(back, j.exec[job::ix(q)]->rank()), j.parameters(q)));
    }

    // Process 3 (replica 1 of rank 1) counts none of its layers: its NaN reaches the others only as
    // the norm's non-finite term, and every process skips.
    REQUIRE_FALSE(j.exec[3]->counts_layer(Model::size - 1));
    std::vector<std::vector<float>> before;
    for (int q = 0; q < processes; ++q) before.push_back(j.parameters(q));
    dev[3]->gradient_scale = std::numeric_limits<double>::quiet_NaN();
    j.step();
    for (int q = 0; q < processes; ++q) {
      CAPTURE(q);
      CHECK_FALSE(dev[job::ix(q)]->result().applied);
      CHECK(test::bitwise_equal(before[job::ix(q)], j.parameters(q)));
      CHECK(dev[job::ix(q)]->updates() == 3);
    }
    dev[3]->gradient_scale = 1.0;

    // Process 2 without one: every process is told, and none updates.
    dev[2].reset();
    for (int q = 0; q < processes; ++q)
      j.exec[job::ix(q)]->enqueue(j.inputs[job::ix(q)]->inputs, j.inputs[job::ix(q)]->targets);
    for (int q = 0; q < processes; ++q) {
      CAPTURE(q);
      try {
        j.exec[job::ix(q)]->wait();
        FAIL("no error");
      } catch (const std::logic_error& e) {
        CHECK(std::string(e.what()).find("3 of the 4 processes have a device optimizer attached") != std::string::npos);
        CHECK(std::string(e.what()).find(q == 2 ? "this one has not" : "this one has)") != std::string::npos);
      }
      CHECK(test::bitwise_equal(before[job::ix(q)], j.parameters(q)));
      if (q != 2) CHECK_FALSE(dev[job::ix(q)]->result().applied);
    }
  }
  check_clean();
  CHECK(sim::world::get().live_allocations == 0);
  std::filesystem::remove(file);
}
