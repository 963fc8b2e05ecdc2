// The MPI executor's device path: one process and one GPU per pipeline rank (times D replicas),
// device layers, and MPI between the processes, the tensors staged through pinned host memory
// (mpi/detail/staging.hpp): for users with GPUs and MPI but no NCCL (ctpipe/nccl.hpp is the fast
// path). Each process runs its rank's program on the CUDA executor's engine in process mode (that
// rank's streams and buffers, on the process's device), expanded at compile time, chosen once at
// construction. The launch checks, the layout of the grid, the failure notices, the deadlines and
// the step's agreement are the MPI executor's (mpi/detail/session.hpp).
//
//   MPI_Init(&argc, &argv);
//   ctpipe::mpi::device_executor<table, net, stages, loss> exec(model, l, device);
//   auto losses = exec.step(inputs, targets);  // device inputs and targets; the global batch's losses
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <ctpipe/cuda/detail/engine.hpp>
#include <ctpipe/cuda/detail/predictable.hpp>
#include <ctpipe/cuda/detail/process_mode.hpp>
#include <ctpipe/cuda/detail/process_program.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/hang_record.hpp>  // set_record_pass
#include <ctpipe/exec/detail/requirements.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>  // group_colours
#include <ctpipe/mpi/detail/fingerprint.hpp>
#include <ctpipe/mpi/detail/session.hpp>
#include <ctpipe/mpi/detail/staging.hpp>
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi {

/// Runs Table over Model's device layers split by Stages, with device loss Loss, as one process
/// and one GPU per rank per replica of the communicator, on Cuda (ctpipe::cuda::runtime: use
/// ctpipe::mpi::device_executor, ctpipe/mpi/device.hpp). Eager steps only: the host takes part in
/// every hand-off.
template <auto Table, model_type Model, auto Stages, class Loss, class Cuda, dispatch Dispatch = dispatch::automatic>
class basic_device_executor
    : public cuda::detail::process_mode<detail::device_executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch>,
      public cuda::detail::process_place<
          basic_device_executor<Table, Model, Stages, Loss, Cuda, Dispatch>,
          cuda::detail::process_mode<detail::device_executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch>>,
      public ctpipe::detail::executor_face<basic_device_executor<Table, Model, Stages, Loss, Cuda, Dispatch>,
                                           "ctpipe::mpi::device_executor", Model, Loss,
                                           cuda::detail::device_face<ctpipe::detail::no_launch>> {
  using mode = cuda::detail::process_mode<detail::device_executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch>;
  friend class cuda::detail::process_place<basic_device_executor, mode>;
  friend ctpipe::detail::executor_face<basic_device_executor, "ctpipe::mpi::device_executor", Model, Loss,
                                       cuda::detail::device_face<ctpipe::detail::no_launch>>;

 public:
  using input_type = typename mode::input_type;
  using target_type = typename mode::target_type;
  using output_type = typename Model::output_type;
  using stream_type = typename mode::stream_type;

  static_assert(detail::tag_room<mode::stage_count + static_cast<int>(mode::plan.skips.size())>::value);

  /// Collective over `comm`: checks the launch (launch_error on every process), then sets up this
  /// process's rank on `device` (its streams, events, device buffers and pinned staging slots).
  basic_device_executor(Model& model, Loss& loss, int device, MPI_Comm comm = MPI_COMM_WORLD, options o = {})
      : model_(model), loss_(loss), device_(device) {
    held_.session = std::make_unique<detail::session>(comm, mode::ranks, o, fingerprint());
    if (o.ordered_sums)  // (every process agrees on it by now: part of the launch check)
      throw launch_error("ctpipe::mpi::device_executor: options::ordered_sums is for the host path only");
    if constexpr (has_shared_parameters_v<Model>)  // (collective: each shared group's communicator)
      held_.session->add_groups(ctpipe::detail::group_colours<Model, mode::stages>(
          mode::plan.table.stage_rank, mode::ranks, where().rank, where().replica, MPI_UNDEFINED));
    if constexpr (mode::layout.stages.chain_length != mode::stage_count)  // (dualpipe: the pair of processes)
      held_.session->add_groups(
          ctpipe::detail::mirror_colours(mode::layout.stages.chain_length, where().rank, where().replica));
    ctpipe::detail::with_index<ctpipe::detail::ix(mode::ranks)>(
        ctpipe::detail::ix(held_.session->where().rank), [&](auto r) {
          constexpr int R = static_cast<int>(decltype(r)::value);
          ctpipe::detail::set_record_pass<mode::plan.table, R>(held_.session->record(), 0, Table.params.name.view());
          held_.program = std::make_unique<cuda::detail::process_rank<mode, transport_t<R>>>(
              model, loss, held_.session->where().replicas > 1, *held_.session, device,
              std::vector<std::size_t>(mode::fifo_bytes.begin(), mode::fifo_bytes.end()),
              gradient_bytes<R>(model, held_.session->where().replicas), Model::size + 2);
        });
  }
  basic_device_executor(const basic_device_executor&) = delete;
  basic_device_executor& operator=(const basic_device_executor&) = delete;

  // step, evaluate and predict (with extents too, eager): detail::executor_face, each collective.
  // A step runs this replica's microbatches (device views; read where the rank holds the first or
  // the last stage) and returns the global batch's losses on every process (replica d's
  // microbatch i at d x microbatches + i). With extents, a message of one token-major tensor
  // travels at its used rows; every process of the replica gives the same extents (each sizes
  // what it receives by them; where they did not, std::invalid_argument names the microbatch).
  // Faults end a call as on the host path: task_failure where a task failed, peer_failure
  // elsewhere, timeout_error after options::timeout. evaluate and predict run the forward-only
  // table on the rank's streams; the first call allocates the pass's rings and staging slots.
  // predict gives this replica's outputs, microbatch i's into outputs[i], a view of device memory
  // on this process's device, on every process of the replica (the processes that run a last
  // stage give them to the others, through the host).

  /// Where the steps that follow stand for the layers' context (ctpipe::cuda::context), as
  /// ctpipe::cuda::executor's: the next step's number and the index of this replica's microbatch 0
  /// past its own offset (replica d's microbatches start at d x microbatches without being told).
  void set_context_origin(step_origin o) noexcept { held_.program->set_context_origin(o); }
  step_origin context_origin() const noexcept { return held_.program->context_origin(); }

  /// Records the start and end of every task of the training steps that follow, on every process,
  /// until record_steps(false) (which keeps the last recording). Collective: every process calls
  /// it between the same steps. Each process times its rank's tasks on its GPU (a timed event
  /// before and after each task, on the rank's stream; the step walks the table), puts them on
  /// its host's clock (an event waited for before the step: within half that wait), and process 0
  /// gathers every process's times on its clock as the host path does (mpi::executor::
  /// record_steps). Off by default; off, a step runs exactly the code it runs without this (one
  /// test per step). Makes its events and buffers the first time, once.
  void record_steps(bool on) { held_.program->record(on); }
  /// On process 0: replica `replica`'s pipeline in the last recorded step, per rank, per position
  /// of `plan.table`, in seconds from the first process's start of the step (as
  /// mpi::executor::recorded_step). Empty on the other processes and where no step was recorded.
  const measured_step& recorded_step(int replica = 0) const { return held_.program->recorded_step(replica); }
  /// On process 0: how far the recorded step's processes' times may be off one another (seconds:
  /// the clocks' alignment, and twice the largest error of a process's GPU-to-host anchor).
  double recorded_alignment_error() const { return held_.program->recorded_alignment_error(); }

  /// The global batch's tokens of the last step (a model with token-major tensors; else none).
  std::span<const int> tokens() const noexcept { return held_.program->tokens(); }

  const place& where() const noexcept { return held_.session->where(); }
  int rank() const noexcept { return where().rank; }
  int replica() const noexcept { return where().replica; }
  int replicas() const noexcept { return where().replicas; }
  /// The stream this process's rank issues on, and its second stream (pairs F&B).
  stream_type stream() const { return held_.program->stream(); }
  stream_type second_stream() const { return held_.program->second_stream(); }

  /// What every process must agree on (the host path's, with the device tensors' bytes).
  static constexpr std::uint64_t fingerprint() {
    return detail::fingerprint_of<mode::plan, mode::stages>([](int e) {
             return mode::fifo_bytes[ctpipe::detail::ix(2 * e)] + mode::fifo_bytes[ctpipe::detail::ix(2 * e + 1)];
           }) ^
           0x64657669636500ull;  // "device": not to be mixed with host-path processes
  }

 private:
  static constexpr std::string_view executor_name = "ctpipe::mpi::device_executor";
  auto& own_rank() const { return *held_.program; }
  int device() const noexcept { return device_; }
  template <int R>
  using transport_t = detail::staging<Cuda, R, mode::fifos>;

  // The largest gradients of a layer of rank R (the staging buffer of the sums), or 0 where nothing
  // is summed (one replica, and no dualpipe).
  static constexpr bool mirrored = mode::layout.stages.chain_length != mode::stage_count;
  template <int R>
  static std::size_t gradient_bytes(Model& model, int replicas) {
    if (replicas == 1 && !mirrored) return 0;
    std::size_t most = 0;
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      const auto one = [&](auto& l, int k) {
        constexpr int chain = mode::layout.stages.chain_length;
        const int j = mode::stages.stage_of_layer(k);  // (and, dualpipe, its copy at chain + j)
        if constexpr (has_parameters<std::remove_cvref_t<decltype(l)>>)
          if (mode::plan.table.stage_rank[ctpipe::detail::ix(j)] == R ||
              (mirrored && mode::plan.table.stage_rank[ctpipe::detail::ix(chain + j)] == R))
            most = std::max(most, l.gradients().size_bytes());
      };
      (one(model.template layer<L>(), static_cast<int>(L)), ...);
    }
    (std::make_index_sequence<Model::size>{});
    return most;
  }

  // The forward-only pass (evaluate, predict): its own process mode and transport, made at the
  // first call, on the training program's streams; a template (of nothing), so that only an
  // executor whose evaluate() or predict() is called compiles it.
  template <class = void>
  struct forward_pass {
    using mode =
        cuda::detail::process_mode<detail::device_executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch, true>;
    template <int R>
    using transport_t = detail::staging<Cuda, R, mode::fifos>;
  };
  token_losses run_step(const char*, std::span<const input_type> inputs, std::span<const target_type> targets,
                        std::span<const int> extents) {
    held_.program->enqueue(inputs, targets, extents, cuda::launch::eager);
    const std::span<const double> losses = held_.program->wait();
    return {losses, held_.program->tokens()};
  }
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<const output_type> outputs, std::span<const int> extents) {
    using pass = forward_pass<>;
    if (!forward_) {
      std::array<stream_type, ctpipe::detail::ix(mode::ranks) + 1> streams{};
      streams[ctpipe::detail::ix(where().rank)] = held_.program->stream();
      streams.back() = held_.program->origin_stream();
      ctpipe::detail::with_index<ctpipe::detail::ix(mode::ranks)>(ctpipe::detail::ix(where().rank), [&](auto r) {
        constexpr int R = static_cast<int>(decltype(r)::value);
        ctpipe::detail::set_record_pass<pass::mode::plan.table, R>(held_.session->record(), 1,
                                                                   Table.params.name.view());
        forward_ = std::make_unique<
            cuda::detail::process_forward<typename pass::mode, typename pass::template transport_t<R>>>(
            model_, loss_, std::span<const stream_type>(streams), *held_.session, device_,
            std::vector<std::size_t>(pass::mode::fifo_bytes.begin(), pass::mode::fifo_bytes.end()), std::size_t{0});
      });
    }
    const bool predicting = targets.empty();
    const token_losses r = forward_->run(who, inputs, targets, outputs, extents, context_origin());
    if (predicting) share_outputs(outputs);
    return r;
  }
  // After a prediction: each output that a process of this replica wrote, on every process of it
  // (copied to the host, each byte the bitwise OR over the replica's processes, where the others
  // give zeros, and copied back to this process's views).
  void share_outputs(std::span<const output_type> outputs) {
    constexpr std::size_t bytes = output_type::bytes;
    const std::span<const bool> written = forward_->outputs_written();
    std::vector<std::byte> host(bytes * outputs.size());
    for (std::size_t i = 0; i < outputs.size(); ++i)
      if (written[i]) copy_output(host.data() + i * bytes, outputs[i].data, true);
    held_.session->or_within_replica(host, "sharing predict()'s outputs with the processes of the replica");
    for (std::size_t i = 0; i < outputs.size(); ++i)
      if (!written[i]) copy_output(outputs[i].data, host.data() + i * bytes, false);
  }
  void copy_output(void* to, const void* from, bool to_host) {
    const auto s = held_.program->stream();
    const auto st = to_host ? Cuda::copy_to_host_async(to, from, output_type::bytes, s)
                            : Cuda::copy_to_device_async(to, from, output_type::bytes, s);
    if (!Cuda::ok(st) || !Cuda::ok(Cuda::synchronize(s)))
      throw mpi_error(std::string("ctpipe::mpi::device_executor::predict: copying an output ") +
                      (to_host ? "to the host" : "to the device") + " failed: " + Cuda::describe(st));
  }

  Model& model_;
  Loss& loss_;
  int device_;
  detail::held<cuda::detail::rank_base<input_type, target_type, Cuda>> held_;
  std::unique_ptr<cuda::detail::forward_base<input_type, target_type, output_type>> forward_;  // (before held_ ends)
};

}  // namespace ctpipe::mpi
