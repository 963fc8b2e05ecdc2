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

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/cuda/detail/engine_errors.hpp>  // backend_calls
#include <ctpipe/cuda/detail/update_hook.hpp>
#include <ctpipe/cuda/detail/update_kernels.hpp>
#include <ctpipe/model/parameter_tensors.hpp>
#include <ctpipe/optim/optimizer.hpp>  // clipping, update_result, parameter_element_t, norm_skip
#include <ctpipe/optim/rules.hpp>

namespace ctpipe::cuda {

namespace detail {
template <class R, class Model, std::size_t... K>
constexpr bool element_rule_fits(std::index_sequence<K...>) {
  return ([] {
    using L = typename Model::template layer_type<K>;
    if constexpr (has_parameters<L>)
      return element_rule<R, ctpipe::detail::parameter_element_t<L>>;
    else
      return true;
  }() && ...);
}
}  // namespace detail

/// Rule applied on the device to the layers of Executor's model, at the end of each of its training
/// steps (see the top of this file). Executor: an executor of device layers that takes an update
/// (ctpipe::cuda::basic_executor).
template <class Executor, class Rule>
class device_optimizer final : detail::update_hook<typename Executor::backend_type> {
  using Backend = typename Executor::backend_type;
  using Model = typename Executor::model_type;
  using stream_type = typename Backend::stream_type;
  using calls = detail::backend_calls<Backend>;
  static constexpr std::size_t layers = Model::size;
  static constexpr std::size_t states = state_count_v<Rule>;
  static constexpr int ranks = Executor::ranks;
  static constexpr int devices = Executor::device_count;
  static_assert(Backend::launches_kernels,
                "ctpipe::cuda::device_optimizer runs the update as CUDA kernels: make it in a file nvcc compiles (a "
                ".cu file, or a source of LANGUAGE CUDA); a host compiler can use ctpipe::optimizer(model, exec, "
                "rule, clip), which updates host copies");
  static constexpr bool rule_fits = detail::element_rule_fits<Rule, Model>(std::make_index_sequence<layers>{});
  // (Where either rule below is broken, nothing else is compiled: one error.)
  static constexpr bool usable = Backend::launches_kernels && rule_fits;
  static_assert(!Backend::launches_kernels || rule_fits,
                "ctpipe::cuda::device_optimizer: Rule must have an element form for the parameter type T of every "
                "layer with parameters: scalars prepare<T>(const ctpipe::update_info&) const, trivially copyable, and "
                "static CTPIPE_HOST_DEVICE void element(const scalars&, T& w, T g, T& state...), one state per name "
                "(optim/rules.hpp); a rule with only the span form runs on host copies: ctpipe::optimizer(model, "
                "exec, rule, clip)");

 public:
  using model_type = Model;
  using rule_type = Rule;

  /// Allocates the rule's state (zero) for every layer with parameters, on its rank's device, and
  /// attaches the update to `exec`'s training steps (a captured graph is dropped). The executor
  /// must outlive the optimizer; between steps only.
  device_optimizer(Executor& exec, Rule rule, clipping clip = {}) : rule(rule), clip(clip), exec_(exec) {
    exec_.attach_update(this);  // (between steps, and the only one: else it throws)
    try {
      if constexpr (usable) lay_out();
      allocate();
    } catch (...) {
      exec_.detach_update(this);
      release();
      throw;
    }
  }
  device_optimizer(const device_optimizer&) = delete;
  device_optimizer& operator=(const device_optimizer&) = delete;
  /// Detaches the update from the executor (its next graph step captures anew) and frees the state.
  ~device_optimizer() {
    exec_.detach_update(this);
    release();
  }

  /// The rule: change its hyperparameters between steps (read when the next step is enqueued).
  Rule rule;
  /// Clipping and the non-finite check, for the steps that follow.
  clipping clip;
  /// The gradients are multiplied by it first, where it is not 1 (a loss summed over tokens made a
  /// per-token mean: 1 / token_losses::total_tokens() of the step to come).
  double gradient_scale = 1.0;

  /// What the update of the step waited for last did (applied, norm, scale), as
  /// ctpipe::optimizer::step() returns it.
  const update_result& result() const noexcept { return result_; }
  /// The updates applied (skipped steps not counted).
  std::uint64_t updates() const noexcept { return updates_; }
  /// The updates layer `layer`'s tensors have had.
  std::uint64_t layer_updates(std::size_t layer) const { return info_.at(layer).steps; }
  /// Layer K's tensors, in order (empty for a layer without parameters).
  template <std::size_t K>
  std::span<const tensor_slice> tensors() const {
    return info_[K].tensors;
  }
  /// The executor it is attached to.
  Executor& executor() const noexcept { return exec_; }
  /// Its state and update counts copied into `host`, a ctpipe::optimizer of the same model and
  /// rule (on host copies: what its checkpoints are written through, cuda/checkpoint.hpp), or from
  /// it (copy_state_from). Between steps; waits for the copies.
  template <class Host>
  void copy_state_to(Host& host) const {
    move_state(host, true);
  }
  template <class Host>
  void copy_state_from(Host& host) {
    move_state(host, false);
    updates_ = host.updates();
    for (std::size_t k = 0; k < layers; ++k) info_[k].steps = host.layer_updates(k);
  }
  /// A copy of state `j` (Rule::state_names[j]) of layer K's tensor `t`, read from the device
  /// (between steps; waits for the copy); empty for a layer without parameters.
  template <std::size_t K>
  auto state(std::size_t t, std::size_t j) const {
    if constexpr (!has_parameters<layer_t<K>> || !usable)
      return std::vector<float>{};
    else
      return state_copy<K>(t, j);
  }

 private:
  template <std::size_t K>
  auto state_copy(std::size_t t, std::size_t j) const {
    using T = element_of<K>;
    exec_.check_between_steps();
    const layer_info& l = info_[K];
    const tensor_slice& s = l.tensors.at(t);
    std::vector<T> v(s.size());
    if (!ctpipe::detail::below(j, states))
      throw std::out_of_range("ctpipe::cuda::device_optimizer::state: no state " + std::to_string(j));
    const stream_type on = exec_.stream(l.rank);
    set_device(l.device);
    calls::check(Backend::copy_to_host_async(v.data(), state_of<K>(j) + s.offset, sizeof(T) * v.size(), on),
                 "cudaMemcpyAsync", "reading the device optimizer's state");
    calls::check(Backend::synchronize(on), "cudaStreamSynchronize", "reading the device optimizer's state");
    return v;
  }

  template <class Host>
  void move_state(Host& host, bool to_host) const {
    static_assert(std::is_same_v<typename Host::model_type, Model> && std::is_same_v<typename Host::rule_type, Rule>,
                  "ctpipe::cuda::device_optimizer: its state moves to and from a ctpipe::optimizer of the same model "
                  "and rule");
    exec_.check_between_steps();
    if constexpr (usable && states > 0) {
      each_layer([&](auto k) {
        constexpr std::size_t K = k;
        if constexpr (has_parameters<layer_t<K>>) {
          const layer_info& l = info_[K];
          const auto h = host.template layer_state<K>();
          const stream_type on = exec_.stream(l.rank);
          set_device(l.device);
          calls::check(to_host ? Backend::copy_to_host_async(h.data(), state_of<K>(0), h.size_bytes(), on)
                               : Backend::copy_to_device_async(state_of<K>(0), h.data(), h.size_bytes(), on),
                       "cudaMemcpyAsync", "moving the device optimizer's state");
          calls::check(Backend::synchronize(on), "cudaStreamSynchronize", "moving the device optimizer's state");
        }
      });
    }
    if (to_host)
      for (std::size_t k = 0; k < layers; ++k) host.set_layer_updates(k, info_[k].steps);
  }

  template <std::size_t K>
  using layer_t = typename Model::template layer_type<K>;
  template <std::size_t K>
  using element_of = ctpipe::detail::parameter_element_t<layer_t<K>>;
  template <std::size_t K>
  using scalars_of = ctpipe::detail::scalars_of<Rule, element_of<K>>;
  // A layer's compute copy's element type (model/compute_copy.hpp), void where it has none.
  template <class L, bool = has_compute_copy<L>>
  struct compute_of {
    using type = void;
  };
  template <class L>
  struct compute_of<L, true> {
    using type = compute_element_t<L>;
  };

  struct layer_info {
    bool updates = false;  // a layer with parameters
    int rank = 0, device = 0;
    ctpipe::detail::counted_range counted{};
    std::vector<tensor_slice> tensors;
    std::vector<std::size_t> scalars_at;  // each tensor's scalars in the settings image
    std::size_t state_at = 0;             // its state in its device's block
    std::uint64_t steps = 0;
  };

  template <class F>
  static void each_layer(F&& f) {
    [&]<std::size_t... K>(std::index_sequence<K...>) { (f(std::integral_constant<std::size_t, K>{}), ...); }
    (std::make_index_sequence<layers>{});
  }
  // f(std::integral_constant<std::size_t, K>) for each layer K with parameters that rank r runs.
  template <class F>
  void each_on_rank(int r, F&& f) const {
    each_layer([&](auto k) {
      if constexpr (has_parameters<layer_t<decltype(k)::value>>)
        if (info_[k].rank == r) f(k);
    });
  }
  static std::size_t aligned(std::size_t n) { return (n + 15) / 16 * 16; }

  // Where everything lives: the settings image (the same on every device), each rank's scratch
  // for the norm's levels and its decision, each device's terms (the origin device's are the ones
  // added), each layer's state.
  void lay_out() {
    std::size_t image = aligned(sizeof(detail::update_settings));
    std::array<std::size_t, static_cast<std::size_t>(ranks)> scratch{};
    each_layer([&](auto k) {
      constexpr std::size_t K = k;
      layer_info& l = info_[K];
      if constexpr (has_parameters<layer_t<K>>) {
        auto& layer = exec_.model().template layer<K>();
        l.updates = true;
        l.rank = Executor::rank_of_layer(static_cast<int>(K));
        l.device = Executor::devices[static_cast<std::size_t>(l.rank)];
        l.tensors = tensor_slices(layer, K);
        if constexpr (has_compute_copy<layer_t<K>>)
          if (layer.compute_parameters().size() != layer.parameters().size())
            throw std::invalid_argument("ctpipe::cuda::device_optimizer: layer " + std::to_string(K) +
                                        "'s compute_parameters() hold " +
                                        std::to_string(layer.compute_parameters().size()) +
                                        " values, its parameters() " + std::to_string(layer.parameters().size()));
        const auto [from, to] = norm_skip<K>(layer);
        l.counted = {layer.gradients().size(), from, to};
        for (std::size_t t = 0; t < l.tensors.size(); ++t) {
          l.scalars_at.push_back(image);
          image += aligned(sizeof(scalars_of<K>));
        }
        auto& need = scratch[static_cast<std::size_t>(l.rank)];
        need = std::max(need, ctpipe::detail::norm_scratch(l.counted.count()));
      }
    });
    image_bytes_ = image;
    terms_at_ = image;
    std::array<std::size_t, static_cast<std::size_t>(devices)> top{};
    top.fill(aligned(image + sizeof(double) * (layers + 1)));
    for (int r = 0; r < ranks; ++r) {
      const auto d = static_cast<std::size_t>(Executor::devices[static_cast<std::size_t>(r)]);
      decision_at_[static_cast<std::size_t>(r)] = top[d];
      scratch_at_[static_cast<std::size_t>(r)] = top[d] + aligned(sizeof(detail::update_decision));
      top[d] =
          scratch_at_[static_cast<std::size_t>(r)] + aligned(sizeof(double) * scratch[static_cast<std::size_t>(r)]);
    }
    origin_decision_at_ = top[origin_device()];
    top[origin_device()] += aligned(sizeof(detail::update_decision));
    each_layer([&](auto k) {
      constexpr std::size_t K = k;
      layer_info& l = info_[K];
      if constexpr (has_parameters<layer_t<K>>) {
        l.state_at = top[static_cast<std::size_t>(l.device)];
        top[static_cast<std::size_t>(l.device)] += aligned(states * sizeof(element_of<K>) * l.counted.size);
      }
    });
    bytes_ = top;
  }
  static constexpr std::size_t origin_device() { return static_cast<std::size_t>(Executor::devices[0]); }

  // A later member of a shared group leaves its shared part out of the norm (the group's first
  // layer counts it): [from, to) of its gradients.
  template <std::size_t K, class L>
  static std::pair<std::size_t, std::size_t> norm_skip(L& layer) {
    return ctpipe::detail::norm_skip<Model, K>(layer);
  }

  void allocate() {
    void* host = nullptr;
    calls::check(Backend::host_malloc(&host, image_bytes_ + sizeof(detail::update_decision)), "cudaMallocHost",
                 "making the device optimizer");
    host_ = static_cast<char*>(host);
    for (int d = 0; d < devices; ++d) {
      if (!used(d)) continue;
      void* p = nullptr;
      calls::check(Backend::malloc(&p, bytes_[static_cast<std::size_t>(d)], d), "cudaMalloc",
                   "making the device optimizer's state");
      memory_[static_cast<std::size_t>(d)] = static_cast<char*>(p);
    }
    // Every byte zero: the state starts at zero, and the terms of layers without parameters stay 0.
    for (int r = 0; r < ranks; ++r) {
      const int d = Executor::devices[static_cast<std::size_t>(r)];
      if (first_rank_on(d) != r) continue;
      set_device(d);
      calls::check(Backend::memset_async(memory_[static_cast<std::size_t>(d)], bytes_[static_cast<std::size_t>(d)],
                                         exec_.stream(r)),
                   "cudaMemsetAsync", "zeroing the device optimizer's state");
      calls::check(Backend::synchronize(exec_.stream(r)), "cudaStreamSynchronize",
                   "zeroing the device optimizer's state");
    }
  }
  void release() noexcept {
    for (int d = 0; d < devices; ++d)
      if (memory_[static_cast<std::size_t>(d)]) (void)Backend::free(memory_[static_cast<std::size_t>(d)], d);
    memory_.fill(nullptr);
    if (host_) (void)Backend::host_free(host_);
    host_ = nullptr;
  }
  static bool used(int d) {
    for (const int x : Executor::devices)
      if (x == d) return true;
    return false;
  }
  static int first_rank_on(int d) {
    for (int r = 0; r < ranks; ++r)
      if (Executor::devices[static_cast<std::size_t>(r)] == d) return r;
    return -1;
  }
  static void set_device(int d) {
    if constexpr (devices > 1) calls::check(Backend::set_device(d), "cudaSetDevice", "the device optimizer");
  }
  char* on_device(int d, std::size_t at) const { return memory_[static_cast<std::size_t>(d)] + at; }
  template <std::size_t K>
  element_of<K>* state_of(std::size_t j) const {
    const layer_info& l = info_[K];
    return reinterpret_cast<element_of<K>*>(on_device(l.device, l.state_at)) + j * l.counted.size;
  }
  const detail::update_settings* settings_on(int d) const {
    return reinterpret_cast<const detail::update_settings*>(on_device(d, 0));
  }
  double* terms_on(int d) const { return reinterpret_cast<double*>(on_device(d, terms_at_)); }
  const detail::update_decision* decision_of_rank(int r) const {
    const int d = Executor::devices[static_cast<std::size_t>(r)];
    const std::size_t at = static_cast<std::size_t>(d) == origin_device() ? origin_decision_at_
                                                                          : decision_at_[static_cast<std::size_t>(r)];
    return reinterpret_cast<const detail::update_decision*>(on_device(d, at));
  }
  template <class F>
  static void launch(std::size_t n, const F& f, stream_type s, const char* what) {
    calls::check(Backend::for_each(n, f, s), "a kernel launch", what);
  }

  // ---- the hook: what the executor's steps call ------------------------------------------------
  void check_ready() const override {
    if (pending_)
      throw std::logic_error(
          "ctpipe::cuda::device_optimizer: the step before was not waited for: wait() for it first (its update "
          "decides the next one's scalars)");
  }
  void write_scalars(stream_type origin) override {
    if constexpr (usable) write_image(origin);
  }
  void write_image(stream_type origin) {
    detail::update_settings s{};
    s.gradient_scale = gradient_scale;
    s.max_norm = clip.max_norm;
    s.check = clip.max_norm > 0.0 || clip.skip_nonfinite ? 1 : 0;
    s.skip_nonfinite = clip.skip_nonfinite ? 1 : 0;
    std::memcpy(host_, &s, sizeof s);
    each_layer([&](auto k) {
      constexpr std::size_t K = k;
      if constexpr (has_parameters<layer_t<K>>) {
        const layer_info& l = info_[K];
        for (std::size_t t = 0; t < l.tensors.size(); ++t) {
          const scalars_of<K> x = rule.template prepare<element_of<K>>({K, l.tensors[t].tensor.name, l.steps + 1});
          std::memcpy(host_ + l.scalars_at[t], &x, sizeof x);
        }
      }
    });
    for (int d = 0; d < devices; ++d)
      if (used(d))
        calls::check(Backend::copy_to_device_async(on_device(d, 0), host_, image_bytes_, origin), "cudaMemcpyAsync",
                     "writing the device optimizer's scalars");
    pending_ = true;
  }
  void terms(int r, stream_type s) override {
    each_on_rank(r, [&](auto k) { layer_term<decltype(k)::value>(r, s); });
  }
  template <std::size_t K>
  void layer_term(int r, stream_type s) {
    using T = element_of<K>;
    const layer_info& l = info_[K];
    const int d = l.device;
    T* const g = exec_.model().template layer<K>().gradients().data();
    launch(l.counted.size, detail::scale_op<T>{g, settings_on(d)}, s, "scaling the gradients (device optimizer)");
    // The term lands in this device's slot K; on another device than the origin's, it is copied there.
    double* const term = terms_on(d) + K;
    double* const scratch = reinterpret_cast<double*>(on_device(d, scratch_at_[static_cast<std::size_t>(r)]));
    const std::size_t n = l.counted.count();
    std::size_t count = ctpipe::detail::norm_blocks(n);
    if (count == 0) {
      calls::check(Backend::memset_async(term, sizeof(double), s), "cudaMemsetAsync", "the gradient norm's terms");
    } else {
      launch(count, detail::square_op<T>{g, l.counted, count == 1 ? term : scratch}, s, "the gradient norm");
      for (double* in = scratch; count > 1; in += count) {
        const std::size_t made = ctpipe::detail::norm_blocks(count);
        launch(made, detail::sum_op{in, count, made == 1 ? term : in + count}, s, "the gradient norm");
        count = made;
      }
    }
    if (static_cast<std::size_t>(d) != origin_device())
      calls::check(Backend::memcpy_async(terms_on(static_cast<int>(origin_device())) + K,
                                         static_cast<int>(origin_device()), term, d, sizeof(double), s),
                   "cudaMemcpyPeerAsync", "gathering the gradient norm's terms");
  }
  void decide(stream_type origin) override {
    const int o = static_cast<int>(origin_device());
    auto* const decision = reinterpret_cast<detail::update_decision*>(on_device(o, origin_decision_at_));
    launch(1, detail::decide_op{terms_on(o), layers + 1, settings_on(o), decision}, origin,
           "deciding the update (device optimizer)");
    calls::check(Backend::copy_to_host_async(host_ + image_bytes_, decision, sizeof(detail::update_decision), origin),
                 "cudaMemcpyAsync", "reading the device optimizer's decision");
  }
  void apply(int r, stream_type s) override {
    const int d = Executor::devices[static_cast<std::size_t>(r)];
    bool any = false;
    each_on_rank(r, [&](auto) { any = true; });
    if (!any) return;
    if (static_cast<std::size_t>(d) != origin_device()) {
      const int o = static_cast<int>(origin_device());
      calls::check(Backend::memcpy_async(const_cast<detail::update_decision*>(decision_of_rank(r)), d,
                                         on_device(o, origin_decision_at_), o, sizeof(detail::update_decision), s),
                   "cudaMemcpyPeerAsync", "reading the device optimizer's decision");
    }
    each_on_rank(r, [&](auto k) { update_layer<decltype(k)::value>(r, s); });
  }
  template <std::size_t K>
  void update_layer(int r, stream_type s) {
    if constexpr (usable) update_tensors<K>(r, s);
  }
  template <std::size_t K>
  void update_tensors(int r, stream_type s) {
    using T = element_of<K>;
    using copy_t = typename compute_of<layer_t<K>>::type;
    using op = detail::update_op<Rule, T, scalars_of<K>, states, copy_t>;
    const layer_info& l = info_[K];
    auto& layer = exec_.model().template layer<K>();
    T* const w = layer.parameters().data();
    T* const g = layer.gradients().data();
    for (std::size_t t = 0; t < l.tensors.size(); ++t) {
      const std::size_t at = l.tensors[t].offset;
      op f{w + at,
           g + at,
           {},
           reinterpret_cast<const scalars_of<K>*>(on_device(l.device, l.scalars_at[t])),
           decision_of_rank(r)};
      if constexpr (!std::is_void_v<copy_t>) f.copy = layer.compute_parameters().data() + at;
      if constexpr (states > 0)
        for (std::size_t j = 0; j < states; ++j) f.state[j] = state_of<K>(j) + at;
      launch(l.tensors[t].size(), f, s, "updating a tensor (device optimizer)");
    }
  }
  void finished(bool done) override {
    if (!pending_) return;
    pending_ = false;
    if (!done) {
      result_ = {false, 0.0, 1.0};
      return;
    }
    detail::update_decision d{};
    std::memcpy(&d, host_ + image_bytes_, sizeof d);
    result_ = {d.applied != 0, d.norm, d.scale};
    if (!result_.applied) return;
    ++updates_;
    for (layer_info& l : info_)
      if (l.updates) ++l.steps;
  }

  Executor& exec_;
  std::array<layer_info, layers> info_{};
  std::array<std::size_t, static_cast<std::size_t>(ranks)> decision_at_{}, scratch_at_{};
  std::size_t image_bytes_ = 0, terms_at_ = 0, origin_decision_at_ = 0;
  std::array<std::size_t, static_cast<std::size_t>(devices)> bytes_{};
  std::array<char*, static_cast<std::size_t>(devices)> memory_{};
  char* host_ = nullptr;  // pinned: the settings image, then the decision read back
  bool pending_ = false;
  update_result result_{};
  std::uint64_t updates_ = 0;
};

template <class Executor, class Rule>
device_optimizer(Executor&, Rule, clipping = {}) -> device_optimizer<Executor, Rule>;

}  // namespace ctpipe::cuda
