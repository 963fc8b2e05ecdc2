// The optimizer of a device model, on the device: its state in device memory, its update a few
// kernels at the end of every training step of the executor it is attached to, in that step's
// stream order, and captured with it into the step's graph.
//
//   ctpipe::cuda::executor<table, net, stages, loss> exec(model, l);
//   ctpipe::cuda::device_optimizer opt(exec, ctpipe::adamw{.lr = 3e-4}, {.max_norm = 1.0});
//   for (...) {
//     exec.step(inputs, targets, ctpipe::cuda::launch::graph);   // the step, then the update
//     const ctpipe::update_result r = opt.result();               // what the update did
//     opt.rule.lr = schedule(step + 1);                           // read before the next step
//   }
//
// The update does what ctpipe::optimizer's step() does, in the same order and with the same code
// (optim/rules.hpp's element forms, optim/detail/norm_order.hpp's order of the norm), so that it
// equals the host optimizer to the bit wherever the device's gradients equal the host's: each held
// layer's gradients multiplied by gradient_scale where it is not 1; each layer's term of the global
// norm (a kernel a level), on the stream of the rank that runs the layer; the terms added in layer
// order on the origin stream, and the clip scale and the non-finite skip decided there, on the
// device (no host round trip); then each rank's layers updated on its stream, tensor by tensor,
// a kernel each, with the scalars (learning rate, bias corrections: Rule::prepare) the host
// computed before the step and wrote to device memory with the step's number. A step whose norm
// is not finite changes no parameter, state or update count. A layer with a compute copy of its
// parameters (mixed precision: model/compute_copy.hpp) has it rewritten by the same kernel, each
// element rounded from the updated float. result() reads the decision after the step is waited
// for.
//
// Its kernels need nvcc: make it in a file nvcc compiles (ctpipe's tests run the same code on a
// stream simulator, whose kernels are host loops).
#pragma once

#include <cstddef>
#include <vector>

#include <ctpipe/cuda/detail/device_update.hpp>

namespace ctpipe::cuda {

/// Rule applied on the device to the layers of Executor's model, at the end of each of its training
/// steps (see the top of this file). Executor: an executor of device layers that takes an update
/// (ctpipe::cuda::executor; ctpipe::nccl::executor and ctpipe::mpi::device_executor, each process
/// updating the layers it runs). The update itself (detail::device_update) depends on the model,
/// the rule and the backend only.
template <class Executor, class Rule>
class device_optimizer final
    : public detail::device_update<typename Executor::model_type, Rule, typename Executor::backend_type> {
  using base = detail::device_update<typename Executor::model_type, Rule, typename Executor::backend_type>;

 public:
  /// Allocates the rule's state (zero) for every layer with parameters, on its rank's device, and
  /// attaches the update to `exec`'s training steps (a captured graph is dropped). The executor
  /// must outlive the optimizer; between steps only, and one per executor (std::logic_error).
  device_optimizer(Executor& exec, Rule rule, clipping clip = {})
      : base(exec.model(), exec.placement_for_update(), rule, clip), exec_(exec) {
    exec_.attach_update(this);
  }
  /// Detaches the update from the executor (its next graph step captures anew) and frees the state.
  ~device_optimizer() { exec_.detach_update(this); }

  /// The executor it is attached to.
  Executor& executor() const noexcept { return exec_; }

 private:
  Executor& exec_;
};

template <class Executor, class Rule>
device_optimizer(Executor&, Rule, clipping = {}) -> device_optimizer<Executor, Rule>;

}  // namespace ctpipe::cuda
