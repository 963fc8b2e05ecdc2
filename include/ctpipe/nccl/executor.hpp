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
//   auto eval = exec.evaluate(inputs, targets);  // forward only, collective: the global batch's losses
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ctpipe/cuda/detail/engine.hpp>
#include <ctpipe/cuda/detail/predictable.hpp>
#include <ctpipe/cuda/detail/process_mode.hpp>
#include <ctpipe/cuda/detail/process_program.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/requirements.hpp>
#include <ctpipe/exec/detail/shared_sums.hpp>  // group_colours
#include <ctpipe/exec/failure.hpp>
#include <ctpipe/exec/grid.hpp>
#include <ctpipe/nccl/detail/transport.hpp>
#include <ctpipe/nccl/errors.hpp>

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
  /// The hang report's folder (docs/hang_report.md; empty: the environment's CTPIPE_REPORT_DIR,
  /// and where that is unset too, no report): each process writes where it stands there when a
  /// step times out, fails or is stopped by another's failure, and as the executor ends. Where
  /// it stands is where its GPU stopped: an event after each task of its rank finds it.
  std::string report_dir{};
};

/// Runs Table over Model's device layers split by Stages, with device loss Loss, as one process per
/// rank, on Cuda (ctpipe::cuda::runtime) and Net (ctpipe::nccl::runtime). Use
/// ctpipe::nccl::executor (ctpipe/nccl.hpp).
///
/// It is ctpipe::optimizer's place (cuda/detail/process_mode.hpp: process_place):
/// `ctpipe::optimizer opt(model, exec, rule, clip)` updates this process's layers on host copies,
/// and the norm's terms meet in one ncclAllReduce of the world, on the rank's origin stream, within
/// options::timeout. `ctpipe::cuda::device_optimizer opt(exec, rule, clip)` (a .cu file) updates
/// them on the device at the end of every step, in its stream order (a graph step captures it),
/// the norm's terms summed in the step's own ncclAllReduce of the losses and statuses: no
/// collective more, no host round trip.
template <auto Table, model_type Model, auto Stages, class Loss, class Cuda, class Net,
          dispatch Dispatch = dispatch::automatic>
class basic_executor
    : public cuda::detail::process_mode<detail::executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch>,
      public cuda::detail::process_place<
          basic_executor<Table, Model, Stages, Loss, Cuda, Net, Dispatch>,
          cuda::detail::process_mode<detail::executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch>>,
      public ctpipe::detail::executor_face<basic_executor<Table, Model, Stages, Loss, Cuda, Net, Dispatch>,
                                           "ctpipe::nccl::executor", Model, Loss,
                                           cuda::detail::device_face<cuda::launch, false>> {
  using mode = cuda::detail::process_mode<detail::executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch>;
  friend class cuda::detail::process_place<basic_executor, mode>;
  friend ctpipe::detail::executor_face<basic_executor, "ctpipe::nccl::executor", Model, Loss,
                                       cuda::detail::device_face<cuda::launch, false>>;

 public:
  using input_type = typename mode::input_type;
  using target_type = typename mode::target_type;
  using output_type = typename Model::output_type;
  using stream_type = typename mode::stream_type;

  /// Collective over the job (every process constructs its executor): checks the process count,
  /// makes a communicator for every direction of every boundary between two ranks (Net::split of
  /// `j.world`), then sets up this process's rank: its streams, events and buffers on `j.device`.
  /// The model and the loss must outlive the executor.
  basic_executor(Model& model, Loss& loss, job<Net> j, options o = {}) : model_(model), loss_(loss), device_(j.device) {
    if (o.timeout.count() <= 0) throw launch_error("ctpipe::nccl::executor: options::timeout must be positive");
    if (j.processes < mode::ranks || j.processes % mode::ranks != 0)
      throw launch_error("ctpipe::nccl::executor: launched as " + std::to_string(j.processes) +
                         " processes, but the table has " + std::to_string(mode::ranks) +
                         " ranks: start ranks x replicas processes (" + std::to_string(mode::ranks) + ", " +
                         std::to_string(2 * mode::ranks) + ", ...)");
    if (j.process < 0 || j.process >= j.processes)
      throw launch_error("ctpipe::nccl::executor: process " + std::to_string(j.process) + " of " +
                         std::to_string(j.processes));
    where_ = place_of(j.process, mode::ranks, j.processes / mode::ranks);
    std::vector<typename Net::comm_type> comms = split_fifos(j, where_);
    split_groups(j, where_, comms);
    typename Net::comm_type peers{};
    check_split(Net::split(j.world, where_.rank, where_.replica, &peers), "the communicator of a rank's replicas");
    ctpipe::detail::with_index<ctpipe::detail::ix(mode::ranks)>(ctpipe::detail::ix(where_.rank), [&](auto r) {
      program_ = std::make_unique<rank_program<static_cast<int>(decltype(r)::value)>>(model, loss, j, where_,
                                                                                      std::move(comms), peers, o);
    });
  }
  basic_executor(const basic_executor&) = delete;
  basic_executor& operator=(const basic_executor&) = delete;

  // enqueue and step (each with a launch mode), evaluate and predict (eager), with extents too:
  // detail::executor_face. enqueue issues one training step of this process's rank and returns
  // without waiting; `inputs` and `targets` are device views, one per microbatch (read where the
  // rank holds the first or the last stage). launch::graph captures the step into a CUDA graph at
  // the first graph step (after one eager exchange with every peer: NCCL connects to a peer at the
  // first call, which a capture cannot hold) and replays it. With extents, every process of the
  // replica gives the same ones (each sizes its receives by them: an eager step sends a message of
  // one token-major tensor at its used rows); wait() checks that they did, and processes of a
  // replica that gave different extents get std::invalid_argument naming the microbatch. step is
  // enqueue, then wait. evaluate and predict are collective (every process calls them at once,
  // between steps): the global batch's losses on every process, through the forward-only table,
  // eagerly on the rank's streams and the training step's communicators; the first call
  // allocates the pass's own rings and makes one communicator of each replica's processes.
  // predict gives this replica's outputs, microbatch i's into outputs[i], a view of device memory
  // on this process's device, on every process of the replica (the process that ran the
  // microbatch's last stage broadcasts it to the others: ncclBroadcast, bitwise). Faults end
  // them as they end a step.

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
  /// The forward-only table evaluate() and predict() run: each rank's F ops of the training table,
  /// in its order, with the same stages on the same processes (make_forward_table).
  static constexpr auto forward_table = make_forward_table<mode::plan.table>();

  /// Records the start and end of every task of the training steps that follow, on every process,
  /// until record_steps(false) (which keeps the last recording). Collective: every process calls
  /// it between the same steps. Each process times its rank's tasks on its GPU (a timed event
  /// before and after each task, on the rank's stream) and puts them on its host's clock (an event
  /// waited for before the step: within half that wait); the clocks are aligned by four timed
  /// all-reduces of the job, and one all-gather brings every process's times to process 0. A
  /// recorded step is issued eagerly, even where launch::graph is asked for, walking the table.
  /// Off by default; off, a step runs exactly the code it runs without this (one test per step).
  /// Makes its events and buffers the first time, once.
  void record_steps(bool on) { program_->record(on); }
  /// On process 0: replica `replica`'s pipeline in the last recorded step, per rank, per position
  /// of `plan.table`, in seconds from the first process's start of the step (as
  /// ctpipe::mpi::executor::recorded_step). Empty elsewhere, and where no step was recorded.
  const measured_step& recorded_step(int replica = 0) const { return program_->recorded_step(replica); }
  /// On process 0: how far two processes' times in the recorded step may be off one another
  /// (seconds: their clocks' alignment and their GPU-to-host anchors).
  double recorded_alignment_error() const { return program_->recorded_alignment_error(); }

  /// This process's place: its pipeline rank and replica (ctpipe/exec/grid.hpp).
  const place& where() const noexcept { return where_; }
  int rank() const noexcept { return where_.rank; }
  int replica() const noexcept { return where_.replica; }
  int replicas() const noexcept { return where_.replicas; }
  int graph_captures() const noexcept { return program_->graph_captures(); }
  /// The global batch's tokens of the last step (a model with token-major tensors; else none).
  std::span<const int> tokens() const noexcept { return program_->tokens(); }

  /// Where the steps that follow stand for the layers' context (ctpipe::cuda::context), as
  /// ctpipe::cuda::executor's: the next step's number and the index of this replica's microbatch 0
  /// past its own offset (replica d's microbatches start at d x microbatches without being told).
  void set_context_origin(step_origin o) noexcept { program_->set_context_origin(o); }
  step_origin context_origin() const noexcept { return program_->context_origin(); }
  /// The stream this process's rank issues on, and its second stream (the B of an overlapped pair
  /// F&B; the first for a table without pairs): a layer that binds a library handle to a stream
  /// (cuBLAS) needs one for each.
  stream_type stream() const { return program_->stream(); }
  stream_type second_stream() const { return program_->second_stream(); }

  /// The directions of the edges between stages, in the order every process splits their
  /// communicators: FIFO 2e + d (d = 0 activations, 1 gradients).
  static constexpr int fifo_count = 2 * mode::fifos.edges();

 private:
  static constexpr std::string_view executor_name = "ctpipe::nccl::executor";
  auto& own_rank() const { return *program_; }
  int device() const noexcept { return device_; }

  template <int R>
  using transport_t = detail::transport<Cuda, Net, R, mode::fifos>;

  static void check_split(typename Net::status s, const std::string& what) {
    if (!Net::ok(s)) throw error("ncclCommSplit", Net::describe(s), "making " + what);
  }
  // Every process calls Net::split once per crossing FIFO, in the same order (a collective of the
  // world): the FIFO's two processes of each replica with the replica as colour (its sender first),
  // every other without colour.
  static std::vector<typename Net::comm_type> split_fifos(const job<Net>& j, const place& w) {
    std::vector<typename Net::comm_type> comms(ctpipe::detail::ix(fifo_count > 0 ? fifo_count : 0));
    for (int e = 0; e < mode::fifos.edges(); ++e) {
      if (!mode::fifos.crosses(e)) continue;
      for (int d = 0; d < 2; ++d) {
        const bool sends = mode::fifos.sender(e, d) == w.rank, receives = mode::fifos.receiver(e, d) == w.rank;
        check_split(Net::split(j.world, sends || receives ? w.replica : Net::no_colour, sends ? 0 : 1,
                               &comms[ctpipe::detail::ix(2 * e + d)]),
                    "the communicator of stages " + std::to_string(mode::fifos.producer(e)) + " and " +
                        std::to_string(mode::fifos.consumer(e)));
      }
    }
    return comms;
  }

  // Then once per shared group of layers (ctpipe::shared_with) whose members are on several ranks,
  // in group order: the processes of each replica whose ranks hold a member, with the replica as
  // colour (by rank), every other without colour. A bidirectional table (dualpipe) has one such
  // communicator instead: the pair of processes that run the two copies of the same model stages.
  static void split_groups(const job<Net>& j, const place& w, std::vector<typename Net::comm_type>& comms) {
    if constexpr (mode::layout.stages.chain_length != mode::stage_count) {  // dualpipe: one, of the pair
      typename Net::comm_type c{};
      check_split(
          Net::split(j.world, ctpipe::detail::mirror_colours(mode::layout.stages.chain_length, w.rank, w.replica)[0],
                     w.rank, &c),
          "the communicator of the two ranks that run a stage's two copies (dualpipe)");
      comms.push_back(c);
      return;
    }
    const std::vector<int> colours = ctpipe::detail::group_colours<Model, mode::stages>(
        mode::plan.table.stage_rank, mode::ranks, w.rank, w.replica, Net::no_colour);
    const auto holders = ctpipe::detail::group_holders<Model, mode::stages>(mode::plan.table.stage_rank, mode::ranks);
    for (std::size_t g = 0; g < colours.size(); ++g) {
      typename Net::comm_type c{};
      if (holders[g] > 1)
        check_split(Net::split(j.world, colours[g], w.rank, &c),
                    "the communicator of the ranks that hold a shared group's members (layer " +
                        std::to_string(ctpipe::detail::group_firsts<Model>[g]) + "'s group)");
      comms.push_back(c);
    }
  }

  // The forward-only pass (evaluate, predict): its own process mode and transport (on the training
  // transport's links), made at the first call, on the training program's streams; a template (of
  // nothing), so that only an executor whose evaluate() or predict() is called compiles it.
  template <class = void>
  struct forward_pass {
    using mode = cuda::detail::process_mode<detail::executor_tag, Table, Model, Stages, Loss, Cuda, Dispatch, true>;
    template <int R>
    using transport_t = detail::transport<Cuda, Net, R, mode::fifos>;
    // The forward table's FIFOs are the training table's (its transport runs on their links).
    static_assert(CTPIPE_NTTP_TYPE(mode::fifos)::edge_count ==
                      CTPIPE_NTTP_TYPE(basic_executor::mode::fifos)::edge_count &&
                  mode::fifos.edge == basic_executor::mode::fifos.edge &&
                  mode::fifos.stage_rank == basic_executor::mode::fifos.stage_rank);
    // The rank that runs microbatch i's last stage (a bidirectional table: of its pipeline).
    static constexpr auto output_rank = [] {
      std::array<int, ctpipe::detail::ix(mode::microbatches)> w{};
      const auto& t = mode::plan.table;
      for (std::size_t r = 0; r < t.programs.size(); ++r)
        for (int i = 0; i < t.length[r]; ++i) {
          const task& x = t.programs[r][ctpipe::detail::ix(i)];
          if (x.op == op_kind::forward && (x.stage + 1) % mode::chain_length == 0)
            w[ctpipe::detail::ix(x.microbatch)] = static_cast<int>(r);
        }
      return w;
    }();
  };
  void run_enqueue(const char*, std::span<const input_type> inputs, std::span<const target_type> targets,
                   std::span<const int> extents, cuda::launch how) {
    program_->enqueue(inputs, targets, extents, how);
  }
  token_losses run_step(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                        std::span<const int> extents, cuda::launch how) {
    run_enqueue(who, inputs, targets, extents, how);
    const std::span<const double> losses = wait();
    return {losses, program_->tokens()};
  }
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<const output_type> outputs, std::span<const int> extents) {
    using pass = forward_pass<>;
    program_->check_between_steps();
    if (!forward_) {
      ctpipe::detail::with_index<ctpipe::detail::ix(mode::ranks)>(ctpipe::detail::ix(where_.rank), [&](auto r) {
        constexpr int R = static_cast<int>(decltype(r)::value);
        auto& own = static_cast<rank_program<R>&>(*program_);
        std::array<stream_type, ctpipe::detail::ix(mode::ranks) + 1> streams{};
        streams[ctpipe::detail::ix(R)] = own.en.stream(R);
        streams.back() = own.en.origin_stream();
        own.tr.make_replica_comm();  // (collective over the world: every process makes its pass now)
        ctpipe::detail::set_record_pass<pass::mode::plan.table, R>(own.tr.shared_links()->record, 1,
                                                                   Table.params.name.view());
        forward_ = std::make_unique<
            cuda::detail::process_forward<typename pass::mode, typename pass::template transport_t<R>>>(
            model_, loss_, std::span<const stream_type>(streams), own.tr.shared_links());
      });
    }
    const bool predicting = targets.empty();
    const token_losses r = forward_->run(who, inputs, targets, outputs, extents, context_origin());
    if (predicting) share_outputs(outputs);
    return r;
  }
  // After a prediction: each output, from the process of this replica that ran its last stage to
  // the others, on the training program's origin stream, within options::timeout.
  void share_outputs(std::span<const output_type> outputs) {
    ctpipe::detail::with_index<ctpipe::detail::ix(mode::ranks)>(ctpipe::detail::ix(where_.rank), [&](auto r) {
      constexpr int R = static_cast<int>(decltype(r)::value);
      auto& own = static_cast<rank_program<R>&>(*program_);
      const stream_type origin = own.en.origin_stream();
      for (std::size_t i = 0; i < outputs.size(); ++i)
        own.tr.broadcast_in_replica(outputs[i].data, output_type::bytes, forward_pass<>::output_rank[i], origin);
      own.tr.wait(origin);
    });
  }

  template <int R>
  struct rank_program final : cuda::detail::process_rank<mode, transport_t<R>> {
    using base = cuda::detail::process_rank<mode, transport_t<R>>;
    using base::en, base::tr;
    bool exchanged = false;
    rank_program(Model& m, Loss& loss, const job<Net>& j, const place& w, std::vector<typename Net::comm_type> comms,
                 typename Net::comm_type peers, const options& o)
        : base(m, loss, w.replicas > 1, j.device, std::move(comms), j.world, peers, w.process, w.processes, w.replicas,
               w.replica, o.timeout, Model::size + 2) {
      const char* env = std::getenv("CTPIPE_REPORT_DIR");
      if (o.report_dir.empty() && env == nullptr) return;
      ctpipe::detail::hang_record& rec = tr.shared_links()->record;
      rec.open(!o.report_dir.empty() ? o.report_dir : std::string(env), w.process,
               "\"executor\": \"" + std::string(detail::executor_tag::name) +
                   "\", \"process\": " + std::to_string(w.process) + ", \"processes\": " + std::to_string(w.processes) +
                   ", \"rank\": " + std::to_string(w.rank) + ", \"ranks\": " + std::to_string(w.ranks) +
                   ", \"replica\": " + std::to_string(w.replica) + ", \"replicas\": " + std::to_string(w.replicas) +
                   ", \"timeout_ms\": " + std::to_string(o.timeout.count()),
               detail::executor_tag::name);
      ctpipe::detail::set_record_pass<mode::plan.table, R>(rec, 0, Table.params.name.view());
    }
    void enqueue(std::span<const input_type> inputs, std::span<const target_type> targets, std::span<const int> extents,
                 cuda::launch how) override {
      if (how == cuda::launch::graph && !exchanged) {
        tr.exchange_once(en.origin_stream());
        exchanged = true;
      }
      base::enqueue(inputs, targets, extents, how);
    }
    // (The engine's wait rethrows this process's failure, or a peer's: the transport's check_step.)
  };

  Model& model_;
  Loss& loss_;
  place where_{};
  int device_;
  std::unique_ptr<cuda::detail::rank_base<input_type, target_type, Cuda>> program_;
  std::unique_ptr<cuda::detail::forward_base<input_type, target_type, output_type>> forward_;  // (before program_ ends)
};

}  // namespace ctpipe::nccl
