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
#include <type_traits>
#include <vector>

#include <ctpipe/cuda/detail/process_program.hpp>
#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/requirements.hpp>
#include <ctpipe/mpi/detail/session.hpp>
#include <ctpipe/mpi/detail/staging.hpp>
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/executor.hpp>  // fingerprint_of
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi {

/// Runs Table over Model's device layers split by Stages, with device loss Loss, as one process
/// and one GPU per rank per replica of the communicator, on Cuda (ctpipe::cuda::runtime: use
/// ctpipe::mpi::device_executor, ctpipe/mpi/device.hpp). Eager steps only: the host takes part in
/// every hand-off.
template <auto Table, model_type Model, auto Stages, class Loss, class Cuda, dispatch Dispatch = dispatch::automatic>
class basic_device_executor {
 public:
  static constexpr auto plan = make_execution_plan<Table>();
  static constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_ranks);
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_stages);
  /// Stages (a stand-in where Stages breaks a rule: its static_assert has said which).
  static constexpr auto stages = ctpipe::detail::usable_stages<Model, stage_count, Stages>();
  static constexpr int microbatches = Table.params.microbatches;
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;
  using stream_type = typename Cuda::stream_type;

  static_assert(cuda::is_device_model_v<Model>,
                "ctpipe::mpi::device_executor: every layer must be a device layer (forward(const "
                "ctpipe::cuda::context&, x, y) on device tensors); host layers run on ctpipe::mpi::executor");
  static_assert(cuda::device_loss_function<Loss, output_type>,
                "ctpipe::mpi::device_executor: Loss must have a target_type and void operator()(const "
                "ctpipe::cuda::context&, const output_type& y, const target_type& t, output_type& dy, double* loss)");
  static_assert(std::is_trivially_copyable_v<input_type> && std::is_trivially_copyable_v<target_type>,
                "ctpipe::mpi::device_executor: input_type and target_type must be trivially copyable views");
  static_assert(ctpipe::detail::executor_requirements<ctpipe::detail::executor_kind::mpi, Table, Model, Stages,
                                                      stage_count, ctpipe::detail::backward_in_order(plan)>::value);
  static_assert(std::ranges::none_of(Stages.recompute, [](bool b) { return b; }),
                "ctpipe::mpi::device_executor: Stages: recomputation is not supported by the device executors yet");
  static_assert(stage_count < 16384, "ctpipe::mpi::device_executor: at most 16,383 stages (two MPI tags per boundary)");

  /// Each rank is a process of its own: in the layout, a device of its own.
  static constexpr auto issue =
      cuda::make_issue_plan<plan, cuda::device_per_rank<ctpipe::detail::ix(ranks)>().device>();
  static constexpr auto layout =
      cuda::detail::device::make_layout<Model, stages, plan, issue, ctpipe::detail::ix(ranks)>();
  static constexpr auto fifos = [] {
    detail::staged_layout<ctpipe::detail::ix(stage_count)> f{};
    f.stage_rank = plan.table.stage_rank;
    f.capacity = plan.channel_capacity;
    f.microbatches = microbatches;
    return f;
  }();
  static constexpr dispatch dispatch_strategy = resolve_dispatch(
      Dispatch, ctpipe::detail::ix(*std::ranges::max_element(plan.table.length)), cuda::automatic_unroll_limit);

  /// Collective over `comm`: checks the launch (launch_error on every process), then sets up this
  /// process's rank on `device` (its streams, events, device buffers and pinned staging slots).
  basic_device_executor(Model& model, Loss& loss, int device, MPI_Comm comm = MPI_COMM_WORLD, options o = {}) {
    session_ = std::make_unique<detail::session>(comm, ranks, o, fingerprint());
    if (o.ordered_sums)  // (every process agrees on it by now: part of the launch check)
      throw launch_error("ctpipe::mpi::device_executor: options::ordered_sums is for the host path only");
    ctpipe::detail::with_index<ctpipe::detail::ix(ranks)>(ctpipe::detail::ix(session_->where().rank), [&](auto r) {
      program_ = std::make_unique<rank_program<static_cast<int>(decltype(r)::value)>>(model, loss, *session_, device);
    });
  }
  basic_device_executor(const basic_device_executor&) = delete;
  basic_device_executor& operator=(const basic_device_executor&) = delete;
  /// After a timeout_error, MPI may still write the pinned slots: then they are left allocated.
  ~basic_device_executor() {
    if (session_ && session_->broken()) {
      (void)program_.release();
      (void)session_.release();
    }
  }

  /// One training step of this replica's microbatches (device views; read where the rank holds the
  /// first or the last stage). Returns the global batch's losses on every process (replica d's
  /// microbatch i at d x microbatches + i). Faults end the step as on the host path: task_failure
  /// where a task failed, peer_failure elsewhere, timeout_error after options::timeout.
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets) {
    return program_->step(inputs, targets);
  }

  const place& where() const noexcept { return session_->where(); }
  int rank() const noexcept { return where().rank; }
  int replica() const noexcept { return where().replica; }
  int replicas() const noexcept { return where().replicas; }
  /// The stream this process's rank issues on, and its second stream (pairs F&B).
  stream_type stream() const { return program_->stream(); }
  stream_type second_stream() const { return program_->second_stream(); }

  /// What every process must agree on (the host path's, with the device tensors' bytes).
  static constexpr std::uint64_t fingerprint() {
    constexpr auto bytes = boundary_bytes();
    return detail::fingerprint_of<plan, stages>([&](int b) { return bytes[ctpipe::detail::ix(b)]; }) ^
           0x64657669636500ull;  // "device": not to be mixed with host-path processes
  }

 private:
  static constexpr std::array<std::uint64_t, ctpipe::detail::ix(stage_count)> boundary_bytes() {
    std::array<std::uint64_t, ctpipe::detail::ix(stage_count)> b{};
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((b[K] = cuda::detail::device::tensor_bytes_at<Model, ctpipe::detail::ix(stages.first[K + 1])>()), ...);
    }
    (std::make_index_sequence<ctpipe::detail::ix(stage_count > 1 ? stage_count - 1 : 0)>{});
    return b;
  }

  static constexpr auto bytes_of_boundary = boundary_bytes();
  template <int R>
  using transport_t = detail::staging<Cuda, R, fifos>;
  template <int R>
  using engine_t = cuda::detail::device::engine<Model, stages, Loss, Cuda, layout, transport_t<R>>;

  struct rank_base {
    virtual ~rank_base() = default;
    virtual std::span<const double> step(std::span<const input_type>, std::span<const target_type>) = 0;
    virtual stream_type stream() const = 0;
    virtual stream_type second_stream() const = 0;
  };

  // The largest gradients of a layer of rank R (the staging buffer of the sums).
  template <int R>
  static std::size_t gradient_bytes(Model& model) {
    std::size_t most = 0;
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      const auto one = [&](auto& l, int k) {
        if constexpr (has_parameters<std::remove_cvref_t<decltype(l)>>)
          if (plan.table.stage_rank[ctpipe::detail::ix(stages.stage_of_layer(k))] == R)
            most = std::max(most, l.gradients().size_bytes());
      };
      (one(model.template layer<L>(), static_cast<int>(L)), ...);
    }
    (std::make_index_sequence<Model::size>{});
    return most;
  }

  template <int R>
  struct rank_program final : rank_base {
    transport_t<R> tr;
    engine_t<R> en;
    Model& model;
    bool sums;
    rank_program(Model& m, Loss& loss, detail::session& s, int device)
        : tr(s, device, std::vector<std::size_t>(bytes_of_boundary.begin(), bytes_of_boundary.end()),
             gradient_bytes<R>(m)),
          en(m, loss, &tr),
          model(m),
          sums(s.where().replicas > 1) {}
    std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets) override {
      en.enqueue(inputs, targets, cuda::launch::eager, [this] {
        cuda::detail::process_program<plan, issue, R>::template run<dispatch_strategy, stages>(en, tr, model, sums);
      });
      return en.wait();
    }
    stream_type stream() const override { return en.stream(R); }
    stream_type second_stream() const override { return en.second_stream(R); }
  };

  std::unique_ptr<detail::session> session_;
  std::unique_ptr<rank_base> program_;
};

}  // namespace ctpipe::mpi
