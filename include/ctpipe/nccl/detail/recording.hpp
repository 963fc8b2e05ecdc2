// The NCCL executor's recording of what really ran (record_steps): each process times its rank's
// tasks on its GPU (cuda/detail/task_events.hpp) and puts them on its host's clock; the clocks are
// aligned by a few all-reduces of the job, each timed on every host (no process's all-reduce ends
// before every process has started its own: exec/detail/process_times.hpp), and one all-gather of
// the job brings every process's row to every process, process 0 putting them on its clock. Made
// at the first recorded step (a device buffer of a row per process, two host rows), kept.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/detail/index.hpp>
#include <ctpipe/exec/detail/process_times.hpp>
#include <ctpipe/nccl/detail/transport_core.hpp>

namespace ctpipe::nccl::detail {

template <class Cuda, class Net>
class recording {
  using core = transport_core<Cuda, Net>;
  using stream_type = typename Cuda::stream_type;
  using times = ctpipe::detail::process_times;

 public:
  // `lengths`: each rank's program length (the executor's lowered table).
  recording(core& tr, std::span<const int> lengths)
      : tr_(tr), where_(place_here(tr)), times_(where_, lengths), stride_(widest_row(lengths)) {
    void* p = nullptr;
    check_cuda(
        Cuda::malloc(&p, sizeof(double) * (1 + (1 + ctpipe::detail::ix(where_.processes)) * stride_), tr.device()),
        "cudaMalloc");
    device_ = static_cast<double*>(p);
    mine_.assign(stride_, 0.0);
    all_.assign(ctpipe::detail::ix(where_.processes) * stride_, 0.0);
  }
  recording(const recording&) = delete;
  recording& operator=(const recording&) = delete;
  ~recording() {
    if (!tr_.broken()) (void)Cuda::free(device_, tr_.device());  // (aborted: NCCL may still write it)
  }

  // Collective, before a recorded step, on `origin` (idle): the clocks' rounds.
  void begin(stream_type origin) {
    times_.clear();
    for (int k = 0; k < times::rounds; ++k) {
      const double before = times::now();
      check_net(Net::all_reduce_sum(device_, 1, world(), origin), "ncclAllReduce");
      tr_.wait(origin);
      times_.set_round(k, before, times::now());
    }
    times_.set_start(times::now());
  }
  // This process's (start, end) per task, then its step's start, on its host's clock.
  std::span<double> task_times() noexcept { return times_.times(); }
  // Collective, after a step every process completed: every row to every process; process 0
  // assembles the step.
  void gather(double own_error, stream_type origin) {
    times_.set_own_error(own_error);
    const std::span<const double> row = times_.row();
    std::copy(row.begin(), row.end(), mine_.begin());
    const std::size_t bytes = sizeof(double) * stride_;
    check_cuda(Cuda::copy_to_device_async(device_ + 1, mine_.data(), bytes, origin), "cudaMemcpyAsync");
    check_net(Net::all_gather(device_ + 1, device_ + 1 + stride_, bytes, world(), origin), "ncclAllGather");
    check_cuda(Cuda::copy_to_host_async(all_.data(), device_ + 1 + stride_,
                                        bytes * ctpipe::detail::ix(where_.processes), origin),
               "cudaMemcpyAsync");
    tr_.wait(origin);
    if (where_.process == 0) times_.assemble(all_, where_, [this](int p) { return ctpipe::detail::ix(p) * stride_; });
  }
  const measured_step& step(int replica) const noexcept { return times_.step(replica); }
  double alignment_error() const noexcept { return times_.alignment_error(); }

 private:
  static place place_here(const core& tr) {
    const auto& l = *tr.shared_links();
    return place_of(l.process, l.processes / l.replicas, l.replicas);
  }
  static std::size_t widest_row(std::span<const int> lengths) {
    int n = 0;
    for (int x : lengths) n = std::max(n, x);
    return times::row_words(n);
  }
  typename Net::comm_type world() const { return tr_.shared_links()->world; }
  static void check_cuda(typename Cuda::status s, const char* call) {
    if (!Cuda::ok(s)) [[unlikely]]
      throw error(call, Cuda::describe(s), "record_steps");
  }
  static void check_net(typename Net::status s, const char* call) {
    if (!Net::ok(s)) [[unlikely]]
      throw error(call, Net::describe(s), "record_steps");
  }

  core& tr_;
  place where_;
  times times_;
  std::size_t stride_;        // a row's words, padded to the longest program's
  double* device_ = nullptr;  // a word for the rounds, this process's row, then every process's
  std::vector<double> mine_, all_;
};

}  // namespace ctpipe::nccl::detail
