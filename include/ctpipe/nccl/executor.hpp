// The NCCL executor: one process per pipeline rank, each with its own GPU, launched by mpirun,
// srun or torchrun as `ranks` processes of one program. Each process runs its rank's program as
// the CUDA executor runs a rank (the same engine, in process mode: that rank's streams and buffers
// only, device layers, one CUDA graph per step if asked), and hands tensors to the other ranks with
// ncclSend and ncclRecv: one communicator and one stream per direction of each boundary between
// two ranks (nccl/detail/transport.hpp says why, and why no group calls are needed). The rank's
// program is chosen once, at construction; a step is expanded at compile time as in the CUDA
// executor.
//
//   ncclComm_t world = ...;  // every process: ctpipe::nccl::init_over_mpi (nccl/mpi_bootstrap.hpp)
//   ctpipe::nccl::executor<table, net, stages, loss> exec(model, l, {world, process, processes, 0});
//   auto losses = exec.step(inputs, targets, ctpipe::cuda::launch::graph);  // every microbatch's loss
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ctpipe/cuda/detail/process_program.hpp>
#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/requirements.hpp>
#include <ctpipe/exec/failure.hpp>
#include <ctpipe/exec/grid.hpp>
#include <ctpipe/nccl/detail/transport.hpp>

namespace ctpipe::nccl {

/// The job as NCCL knows it: a communicator of every process, this process's number in it, their
/// count, and the CUDA device this process runs on.
template <class Net>
struct job {
  typename Net::comm_type world{};
  int process = 0;
  int processes = 1;
  int device = 0;
};

/// The NCCL executor's options.
struct options {
  /// How long wait() waits for a step before it aborts the executor's communicators and throws
  /// timeout_error (a peer died or hangs). Long enough for the slowest step.
  std::chrono::milliseconds timeout = std::chrono::seconds(600);
};

/// A process count or communicator that does not fit the table: thrown by every process, at
/// construction.
class launch_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

template <class Input, class Target, class Stream>
struct rank_base {
  virtual ~rank_base() = default;
  virtual Stream stream() const = 0;
  virtual Stream second_stream() const = 0;
  virtual void enqueue(std::span<const Input> inputs, std::span<const Target> targets, cuda::launch how) = 0;
  virtual std::span<const double> wait() = 0;
  virtual int graph_captures() const noexcept = 0;
};

}  // namespace detail

/// Runs Table over Model's device layers split by Stages, with device loss Loss, as one process per
/// rank, on Cuda (ctpipe::cuda::runtime) and Net (ctpipe::nccl::runtime). Use
/// ctpipe::nccl::executor (ctpipe/nccl.hpp).
template <auto Table, model_type Model, auto Stages, class Loss, class Cuda, class Net,
          dispatch Dispatch = dispatch::automatic>
class basic_executor {
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
                "ctpipe::nccl::executor: every layer must be a device layer (forward(const ctpipe::cuda::context&, x, "
                "y) on device tensors)");
  static_assert(cuda::device_loss_function<Loss, output_type>,
                "ctpipe::nccl::executor: Loss must have a target_type and void operator()(const "
                "ctpipe::cuda::context&, const output_type& y, const target_type& t, output_type& dy, double* loss)");
  static_assert(std::is_trivially_copyable_v<input_type> && std::is_trivially_copyable_v<target_type>,
                "ctpipe::nccl::executor: input_type and target_type must be trivially copyable views");
  static_assert(ctpipe::detail::executor_requirements<ctpipe::detail::executor_kind::nccl, Table, Model, Stages,
                                                      stage_count, ctpipe::detail::backward_in_order(plan)>::value);
  static_assert(std::ranges::none_of(Stages.recompute, [](bool b) { return b; }),
                "ctpipe::nccl::executor: Stages: recomputation is not supported by the device executors yet");

  /// Each rank is a process of its own: in the layout, a device of its own.
  static constexpr auto issue =
      cuda::make_issue_plan<plan, cuda::device_per_rank<ctpipe::detail::ix(ranks)>().device>();
  static constexpr auto layout =
      cuda::detail::device::make_layout<Model, stages, plan, issue, ctpipe::detail::ix(ranks)>();
  static constexpr auto fifos = [] {
    detail::fifo_layout<ctpipe::detail::ix(stage_count)> f{};
    f.stage_rank = plan.table.stage_rank;
    f.capacity = plan.channel_capacity;
    f.microbatches = microbatches;
    return f;
  }();
  /// Unrolled where the longest rank program has at most cuda::automatic_unroll_limit tasks.
  static constexpr dispatch dispatch_strategy = resolve_dispatch(
      Dispatch, ctpipe::detail::ix(*std::ranges::max_element(plan.table.length)), cuda::automatic_unroll_limit);

  /// Collective over the job (every process constructs its executor): checks the process count,
  /// makes a communicator for every direction of every boundary between two ranks (Net::split of
  /// `j.world`), then sets up this process's rank: its streams, events and buffers on `j.device`.
  /// The model and the loss must outlive the executor.
  basic_executor(Model& model, Loss& loss, job<Net> j, options o = {}) {
    if (o.timeout.count() <= 0) throw launch_error("ctpipe::nccl::executor: options::timeout must be positive");
    if (j.processes < ranks || j.processes % ranks != 0)
      throw launch_error("ctpipe::nccl::executor: launched as " + std::to_string(j.processes) +
                         " processes, but the table has " + std::to_string(ranks) +
                         " ranks: start ranks x replicas processes (" + std::to_string(ranks) + ", " +
                         std::to_string(2 * ranks) + ", ...)");
    if (j.process < 0 || j.process >= j.processes)
      throw launch_error("ctpipe::nccl::executor: process " + std::to_string(j.process) + " of " +
                         std::to_string(j.processes));
    where_ = place_of(j.process, ranks, j.processes / ranks);
    std::vector<typename Net::comm_type> comms = split_fifos(j, where_);
    typename Net::comm_type peers{};
    check_split(Net::split(j.world, where_.rank, where_.replica, &peers), "the communicator of a rank's replicas");
    ctpipe::detail::with_index<ctpipe::detail::ix(ranks)>(ctpipe::detail::ix(where_.rank), [&](auto r) {
      program_ = std::make_unique<rank_program<static_cast<int>(decltype(r)::value)>>(model, loss, j, where_,
                                                                                      std::move(comms), peers, o);
    });
  }
  basic_executor(const basic_executor&) = delete;
  basic_executor& operator=(const basic_executor&) = delete;

  /// Issues one training step of this process's rank and returns without waiting. `inputs` and
  /// `targets`: device views, one per microbatch (read where the rank holds the first or the last
  /// stage). launch::graph captures the step into a CUDA graph at the first graph step (after one
  /// eager exchange with every peer: NCCL connects to a peer at the first call, which a capture
  /// cannot hold) and replays it.
  void enqueue(std::span<const input_type> inputs, std::span<const target_type> targets,
               cuda::launch how = cuda::launch::eager) {
    program_->enqueue(inputs, targets, how);
  }
  /// Waits for the step (up to options::timeout: then timeout_error); returns the losses of the
  /// global batch, on every process: D x
  /// microbatches, replica d's microbatch i at d x microbatches + i. With D > 1 each stage's
  /// gradients are then the sum over the replicas (ncclAllReduce, started as soon as the stage's
  /// last backward of the step has run, on a stream of their own).
  ///
  /// A task that throws ends the step on every process, at its end: this process's task_failure
  /// where it failed, peer_failure elsewhere (naming the failed rank, replica, stage, microbatch and
  /// op); the failed process runs the rest of its step hollow (its sends and receives, no compute)
  /// so that no other waits forever, and the executor stays usable.
  std::span<const double> wait() { return program_->wait(); }
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets,
                               cuda::launch how = cuda::launch::eager) {
    enqueue(inputs, targets, how);
    return wait();
  }
  /// This process's place: its pipeline rank and replica (ctpipe/exec/grid.hpp).
  const place& where() const noexcept { return where_; }
  int rank() const noexcept { return where_.rank; }
  int replica() const noexcept { return where_.replica; }
  int replicas() const noexcept { return where_.replicas; }
  int graph_captures() const noexcept { return program_->graph_captures(); }
  /// The stream this process's rank issues on, and its second stream (the B of an overlapped pair
  /// F&B; the first for a table without pairs): a layer that binds a library handle to a stream
  /// (cuBLAS) needs one for each.
  stream_type stream() const { return program_->stream(); }
  stream_type second_stream() const { return program_->second_stream(); }

  /// The directions of boundaries that cross between ranks, in the order every process splits their
  /// communicators: FIFO 2b + d (d = 0 activations, 1 gradients).
  static constexpr int fifo_count = 2 * (stage_count - 1);

 private:
  template <int R>
  using transport_t = detail::transport<Cuda, Net, R, fifos>;
  template <int R>
  using engine_t = cuda::detail::device::engine<Model, stages, Loss, Cuda, layout, transport_t<R>>;

  static void check_split(typename Net::status s, const std::string& what) {
    if (!Net::ok(s)) throw error("ncclCommSplit", Net::describe(s), "making " + what);
  }
  // Every process calls Net::split once per crossing FIFO, in the same order (a collective of the
  // world): the FIFO's two processes of each replica with the replica as colour (its sender first),
  // every other without colour.
  static std::vector<typename Net::comm_type> split_fifos(const job<Net>& j, const place& w) {
    std::vector<typename Net::comm_type> comms(ctpipe::detail::ix(fifo_count > 0 ? fifo_count : 0));
    for (int b = 0; b + 1 < stage_count; ++b) {
      if (!fifos.crosses(b)) continue;
      for (int d = 0; d < 2; ++d) {
        const bool sends = fifos.sender(b, d) == w.rank, receives = fifos.receiver(b, d) == w.rank;
        check_split(Net::split(j.world, sends || receives ? w.replica : Net::no_colour, sends ? 0 : 1,
                               &comms[ctpipe::detail::ix(2 * b + d)]),
                    "the communicator of stages " + std::to_string(b) + " and " + std::to_string(b + 1));
      }
    }
    return comms;
  }

  template <int R>
  struct rank_program final : detail::rank_base<input_type, target_type, stream_type> {
    transport_t<R> tr;
    engine_t<R> en;
    Model& model;
    bool sums;
    bool exchanged = false;
    rank_program(Model& m, Loss& loss, const job<Net>& j, const place& w, std::vector<typename Net::comm_type> comms,
                 typename Net::comm_type peers, const options& o)
        : tr(j.device, std::move(comms), j.world, peers, w.process, w.processes, w.replicas, w.replica, o.timeout),
          en(m, loss, &tr),
          model(m),
          sums(w.replicas > 1) {}
    void enqueue(std::span<const input_type> inputs, std::span<const target_type> targets, cuda::launch how) override {
      if (how == cuda::launch::graph && !exchanged) {
        tr.exchange_once(en.origin_stream());
        exchanged = true;
      }
      en.enqueue(inputs, targets, how, [this] {
        cuda::detail::process_program<plan, issue, R>::template run<dispatch_strategy, stages>(en, tr, model, sums);
      });
    }
    std::span<const double> wait() override {
      const std::span<const double> losses = en.wait();
      if (en.failed_task().failed) std::rethrow_exception(en.failed_task().error);
      const double* st = tr.statuses();
      constexpr std::size_t n = transport_t<R>::status_words;
      for (int q = 0; q < tr.processes(); ++q) {
        const double* x = st + n * ctpipe::detail::ix(q);
        if (x[0] != 0.0)
          throw peer_failure(
              ctpipe::detail::executor_name(ctpipe::detail::executor_kind::nccl), q, static_cast<int>(x[1]),
              static_cast<int>(x[2]),
              task{static_cast<op_kind>(static_cast<int>(x[5])), static_cast<int>(x[3]), static_cast<int>(x[4]), -1},
              "the failed process's own task_failure gives the layer's message");
      }
      return losses;
    }
    int graph_captures() const noexcept override { return en.graph_captures(); }
    stream_type stream() const override { return en.stream(R); }
    stream_type second_stream() const override { return en.second_stream(R); }
  };

  place where_{};
  std::unique_ptr<detail::rank_base<input_type, target_type, stream_type>> program_;
};

}  // namespace ctpipe::nccl
