// Checkpoints of a device optimizer (cuda/optimizer.hpp): the file ctpipe::optimizer writes
// (optim/checkpoint.hpp: the float parameters, the rule's state, the update counts, the step
// origin), so that a run updated on the device resumes on the device, on host copies or in the
// sequential host model, and the other way round. Each call goes through a ctpipe::optimizer made
// for it on host copies of the attached executor's layers: saving copies the device state into it
// first; loading reads the file into it (the parameters to the devices, the compute copies of a
// mixed-precision layer rewritten) and then its state into the device's. Between steps; the host
// copies are allocated for the call and freed after it.
#pragma once

#include <string>

#include <ctpipe/cuda/optimizer.hpp>
#include <ctpipe/optim/checkpoint.hpp>

namespace ctpipe::cuda {

/// Writes `opt`'s model parameters, its state and `s` to `file` (as ctpipe::save_checkpoint).
template <class Executor, class Rule>
void save_checkpoint(const std::string& file, device_optimizer<Executor, Rule>& opt, const training_state& s = {}) {
  Executor& exec = opt.executor();
  ctpipe::optimizer<typename Executor::model_type, Rule> host(exec.model(), exec, opt.rule, opt.clip);
  opt.copy_state_to(host);
  ctpipe::detail::optimizer_access::set_updates(host, opt.updates());
  ctpipe::save_checkpoint(file, host, s);
}

/// Reads `file` into `opt`'s model and state (as ctpipe::load_checkpoint); returns its training
/// state. A file that does not match loads nothing (checkpoint_error).
template <class Executor, class Rule>
training_state load_checkpoint(const std::string& file, device_optimizer<Executor, Rule>& opt,
                               checksums mode = checksums::required) {
  Executor& exec = opt.executor();
  ctpipe::optimizer<typename Executor::model_type, Rule> host(exec.model(), exec, opt.rule, opt.clip);
  const training_state s = ctpipe::load_checkpoint(file, host, mode);
  opt.copy_state_from(host);
  return s;
}

}  // namespace ctpipe::cuda
