// The device optimizer's kernels, as functors of one index that a backend runs over [0, n):
// Backend::for_each(n, f, stream) (a CUDA kernel of one thread per index in ctpipe::cuda::runtime,
// a host loop in ctpipe's stream simulator, which so runs the very code a GPU runs). Each calls
// the functions the host optimizer calls (optim/detail/norm_order.hpp, a rule's element form), so
// that a device update and a host update do the same operations in the same order.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>              // CTPIPE_HOST_DEVICE
#include <ctpipe/model/compute_copy.hpp>  // to_compute
#include <ctpipe/optim/detail/norm_order.hpp>
#include <ctpipe/optim/rounded.hpp>

namespace ctpipe::cuda::detail {

/// What the host writes before each step (the optimizer's `gradient_scale` and `clip`).
struct update_settings {
  double gradient_scale = 1.0;
  double max_norm = 0.0;
  int check = 1;  // whether the norm is asked for (clipping, or the non-finite check)
  int skip_nonfinite = 1;
};
/// What a step decided, on the device: the norm (0 where not asked for), the scale the gradients
/// are multiplied by (1: not clipped), and whether the update applies (0: skipped, not finite).
struct update_decision {
  double norm = 0.0;
  double scale = 1.0;
  int applied = 1;
};

// x is neither infinite nor a NaN (x - x is 0 for every finite x, a NaN otherwise).
CTPIPE_HOST_DEVICE inline bool finite(double x) { return x - x == 0.0; }

/// g x= the step's gradient scale, where it is not 1 (as the host optimizer scales, rounded to T).
template <class T>
struct scale_op {
  T* g;
  const update_settings* s;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    if (s->gradient_scale != 1.0) g[i] = rn::mul(g[i], static_cast<T>(s->gradient_scale));
  }
};

/// The norm's first level: block b's sum of squares into out[b].
template <class T>
struct square_op {
  const T* g;
  ctpipe::detail::counted_range c;
  double* out;
  CTPIPE_HOST_DEVICE void operator()(std::size_t b) const { out[b] = ctpipe::detail::square_block(g, c, b); }
};

/// A later level: block q of the n values at `in` into out[q].
struct sum_op {
  const double* in;
  std::size_t n;
  double* out;
  CTPIPE_HOST_DEVICE void operator()(std::size_t q) const { out[q] = ctpipe::detail::sum_block(in, n, q); }
};

/// Where the processes' terms meet (the executors of one process per rank): every process's terms
/// summed (as fold_op leaves them: `layers` + 2 words, the last the count of processes with an
/// update attached), and every process's status after the step (`status_words` doubles each, the
/// first not 0 where one of its tasks failed; null where a failure never reaches the update), both
/// in device memory.
struct process_sums {
  const double* terms = nullptr;
  const double* statuses = nullptr;
  std::size_t processes = 0;
  std::size_t status_words = 0;
};

/// One thread: the terms added in layer order, the norm, and the decision, as the host
/// optimizer's step() takes it. With processes (`p`, else null): the terms summed over them, and
/// the update skipped where a process's task failed or not every process has an update attached.
struct decide_op {
  const double* terms;
  std::size_t count;  // the layers' terms and the non-finite one
  const update_settings* s;
  update_decision* d;
  process_sums p{};
  CTPIPE_HOST_DEVICE void operator()(std::size_t) const {
    update_decision r{};
    if (s->check != 0) {
      double total = 0.0;
      for (std::size_t k = 0; k < count; ++k) total = rn::add(total, terms[k]);
      r.norm = rn::sqrt(total);
      if (!finite(r.norm) && s->skip_nonfinite != 0)
        r.applied = 0;
      else if (s->max_norm > 0.0 && r.norm > s->max_norm)
        r.scale = rn::div(s->max_norm, rn::add(r.norm, 1e-6));
    }
    if (p.terms != nullptr) {
      if (terms[count] != static_cast<double>(p.processes)) r.applied = 0;
      if (p.statuses != nullptr)
        for (std::size_t q = 0; q < p.processes; ++q)
          if (p.statuses[q * p.status_words] != 0.0) r.applied = 0;
    }
    *d = r;
  }
};

/// One thread, after a process's layers' terms (the executors of one process per rank): a layer
/// this process holds but another counts (a replica's copy, a shared part) keeps only a term that
/// is not finite, added to the last term in layer order (as the host optimizer's); the word after
/// it says that this process has an update attached.
struct fold_op {
  double* terms;
  std::size_t layers;
  const unsigned char* counted;  // per layer: 1 where this process counts it (or does not hold it)
  CTPIPE_HOST_DEVICE void operator()(std::size_t) const {
    double extra = 0.0;
    for (std::size_t k = 0; k < layers; ++k)
      if (counted[k] == 0) {
        if (!finite(terms[k])) extra = rn::add(extra, terms[k]);
        terms[k] = 0.0;
      }
    terms[layers] = extra;
    terms[layers + 1] = 1.0;
  }
};

/// Element i of one tensor: skipped where the step is; the gradient clipped (and written back, as
/// the host optimizer leaves it); then Rule's element form with the tensor's scalars and state;
/// then, where the layer has a compute copy of type Copy (model/compute_copy.hpp), its element.
template <class Rule, class T, class Scalars, std::size_t States, class Copy = void>
struct update_op {
  T* w;
  T* g;
  T* state[States > 0 ? States : 1];
  const Scalars* scalars;
  const update_decision* d;
  std::conditional_t<std::is_void_v<Copy>, std::nullptr_t, Copy*> copy = nullptr;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    if (d->applied == 0) return;
    T gi = g[i];
    if (d->scale != 1.0) {
      gi = rn::mul(gi, static_cast<T>(d->scale));
      g[i] = gi;
    }
    run(i, gi, std::make_index_sequence<States>{});
    if constexpr (!std::is_void_v<Copy>) copy[i] = to_compute<Copy>(w[i]);
  }
  template <std::size_t... J>
  CTPIPE_HOST_DEVICE void run(std::size_t i, T gi, std::index_sequence<J...>) const {
    Rule::element(*scalars, w[i], gi, state[J][i]...);
  }
};

}  // namespace ctpipe::cuda::detail
