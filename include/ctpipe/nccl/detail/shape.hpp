// What the NCCL executor's transport knows at run time of its rank and table (transport_shape),
// and the executor's tag: the rules it keeps (executor_requirements) and the name its messages
// give.
#pragma once

#include <span>
#include <string_view>

#include <ctpipe/cuda/detail/fifo_ends.hpp>
#include <ctpipe/exec/detail/requirements.hpp>  // layer_kind

namespace ctpipe::nccl::detail {

/// The NCCL executor, for the rules it keeps (executor_requirements) and its messages.
struct executor_tag {
  static constexpr std::string_view name = "ctpipe::nccl::executor";
  static constexpr ctpipe::detail::layer_kind layers = ctpipe::detail::layer_kind::device;
  static constexpr bool frozen_prefix = false, recompute = false, copies_layers = false, sends_bytes = false,
                        graphs = true, shared_parameters = true, bidirectional = true, mirror_copies = false;
};

using ctpipe::cuda::detail::fifo_end;

/// What the transport's run-time half knows of its rank and table.
struct transport_shape {
  int rank = 0;
  int edges = 0;
  int microbatches = 0;
  int stages = 0;
  std::span<const fifo_end> ends;  // 2 * edges: each FIFO's end on this rank
};

}  // namespace ctpipe::nccl::detail
