// The device optimizer's update (ctpipe::cuda::device_optimizer, cuda/optimizer.hpp): its layout in
// device memory, its kernels' launches in the three phases a step calls (cuda/detail/update_hook.hpp),
// its state and counts. Written against the model, the rule and the backend only: the executor's
// placement (each layer's rank, each rank's device and stream) is run-time data, so every executor
// of one model in a program shares one copy of this code.
#pragma once

#include <algorithm>
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
#include <ctpipe/model/compute_copy.hpp>
#include <ctpipe/model/parameter_tensors.hpp>
#include <ctpipe/optim/optimizer.hpp>  // clipping, update_result, parameter_element_t, norm_skip
#include <ctpipe/optim/rules.hpp>

namespace ctpipe::cuda::detail {

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

/// The device optimizer's update (cuda/optimizer.hpp) of Model's layers with Rule on Backend: all
/// of it but its attachment to an executor, so that every executor of one model in a program
/// shares one copy of its code (the placement is run-time data).
template <model_type Model, class Rule, class Backend>
class device_update : public update_hook<Backend> {
  using stream_type = typename Backend::stream_type;
  using calls = backend_calls<Backend>;
  static constexpr std::size_t layers = Model::size;
  static constexpr std::size_t states = state_count_v<Rule>;
  static_assert(Backend::launches_kernels,
                "ctpipe::cuda::device_optimizer runs the update as CUDA kernels: make it in a file nvcc compiles (a "
                ".cu file, or a source of LANGUAGE CUDA); a host compiler can use ctpipe::optimizer(model, exec, "
                "rule, clip), which updates host copies");
  static constexpr bool rule_fits = element_rule_fits<Rule, Model>(std::make_index_sequence<layers>{});
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

  /// Allocates the rule's state (zero) for every layer with parameters, on its rank's device.
  device_update(Model& model, update_placement<Backend> where, Rule rule, clipping clip)
      : rule(rule), clip(clip), model_(model), where_(std::move(where)) {
    ranks_ = static_cast<int>(where_.device_of_rank.size());
    for (const int d : where_.device_of_rank) devices_ = std::max(devices_, d + 1);
    try {
      if constexpr (usable) lay_out();
      allocate();
    } catch (...) {
      release();
      throw;
    }
  }
  device_update(const device_update&) = delete;
  device_update& operator=(const device_update&) = delete;
  ~device_update() { release(); }

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
    check_between_steps();
    const layer_info& l = info_[K];
    const tensor_slice& s = l.tensors.at(t);
    std::vector<T> v(s.size());
    if (!ctpipe::detail::below(j, states))
      throw std::out_of_range("ctpipe::cuda::device_optimizer::state: no state " + std::to_string(j));
    const stream_type on = where_.streams[static_cast<std::size_t>(l.rank)];
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
    check_between_steps();
    if constexpr (usable && states > 0) {
      each_layer([&](auto k) {
        constexpr std::size_t K = k;
        if constexpr (has_parameters<layer_t<K>>) {
          const layer_info& l = info_[K];
          if (!l.updates) return;  // (another process's)
          const auto h = host.template layer_state<K>();
          const stream_type on = where_.streams[static_cast<std::size_t>(l.rank)];
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
        if (info_[k].updates && info_[k].rank == r) f(k);
    });
  }
  static std::size_t aligned(std::size_t n) { return (n + 15) / 16 * 16; }

  // Where everything lives: the settings image (the same on every device), each rank's scratch
  // for the norm's levels and its decision, each device's terms (the origin device's are the ones
  // added), each layer's state.
  void lay_out() {
    std::size_t image = aligned(sizeof(update_settings));
    counted_at_ = image;  // (each layer's flag: fold_op)
    image += aligned(layers);
    std::vector<std::size_t> scratch(static_cast<std::size_t>(ranks_));
    each_layer([&](auto k) {
      constexpr std::size_t K = k;
      layer_info& l = info_[K];
      if constexpr (has_parameters<layer_t<K>>) {
        if (where_.rank_of_layer[K] < 0) return;  // (another process's)
        auto& layer = model_.template layer<K>();
        l.updates = true;
        l.rank = where_.rank_of_layer[K];
        l.device = where_.device_of_rank[static_cast<std::size_t>(l.rank)];
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
    std::vector<std::size_t> top(static_cast<std::size_t>(devices_), aligned(image + sizeof(double) * (layers + 2)));
    decision_at_.resize(static_cast<std::size_t>(ranks_));
    scratch_at_.resize(static_cast<std::size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) {
      const auto d = static_cast<std::size_t>(where_.device_of_rank[static_cast<std::size_t>(r)]);
      decision_at_[static_cast<std::size_t>(r)] = top[d];
      scratch_at_[static_cast<std::size_t>(r)] = top[d] + aligned(sizeof(update_decision));
      top[d] =
          scratch_at_[static_cast<std::size_t>(r)] + aligned(sizeof(double) * scratch[static_cast<std::size_t>(r)]);
    }
    origin_decision_at_ = top[origin_device()];
    top[origin_device()] += aligned(sizeof(update_decision));
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
  std::size_t origin_device() const { return static_cast<std::size_t>(where_.device_of_rank[0]); }
  void check_between_steps() const { where_.check_between_steps(where_.executor); }

  // A later member of a shared group leaves its shared part out of the norm (the group's first
  // layer counts it): [from, to) of its gradients.
  template <std::size_t K, class L>
  static std::pair<std::size_t, std::size_t> norm_skip(L& layer) {
    return ctpipe::detail::norm_skip<Model, K>(layer);
  }

  void allocate() {
    void* host = nullptr;
    calls::check(Backend::host_malloc(&host, image_bytes_ + sizeof(update_decision)), "cudaMallocHost",
                 "making the device optimizer");
    host_ = static_cast<char*>(host);
    memory_.assign(static_cast<std::size_t>(devices_), nullptr);
    for (int d = 0; d < devices_; ++d) {
      if (!used(d)) continue;
      void* p = nullptr;
      calls::check(Backend::malloc(&p, bytes_[static_cast<std::size_t>(d)], d), "cudaMalloc",
                   "making the device optimizer's state");
      memory_[static_cast<std::size_t>(d)] = static_cast<char*>(p);
    }
    // Every byte zero: the state starts at zero, and the terms of layers without parameters stay 0.
    for (int r = 0; r < ranks_; ++r) {
      const int d = where_.device_of_rank[static_cast<std::size_t>(r)];
      if (first_rank_on(d) != r) continue;
      set_device(d);
      calls::check(Backend::memset_async(memory_[static_cast<std::size_t>(d)], bytes_[static_cast<std::size_t>(d)],
                                         where_.streams[static_cast<std::size_t>(r)]),
                   "cudaMemsetAsync", "zeroing the device optimizer's state");
      calls::check(Backend::synchronize(where_.streams[static_cast<std::size_t>(r)]), "cudaStreamSynchronize",
                   "zeroing the device optimizer's state");
    }
  }
  void release() noexcept {
    for (std::size_t d = 0; d < memory_.size(); ++d)
      if (memory_[d]) (void)Backend::free(memory_[d], static_cast<int>(d));
    std::fill(memory_.begin(), memory_.end(), nullptr);
    if (host_) (void)Backend::host_free(host_);
    host_ = nullptr;
  }
  bool used(int d) const {
    for (const int x : where_.device_of_rank)
      if (x == d) return true;
    return false;
  }
  int first_rank_on(int d) const {
    for (int r = 0; r < ranks_; ++r)
      if (where_.device_of_rank[static_cast<std::size_t>(r)] == d) return r;
    return -1;
  }
  void set_device(int d) const {
    if (devices_ > 1) calls::check(Backend::set_device(d), "cudaSetDevice", "the device optimizer");
  }
  char* on_device(int d, std::size_t at) const { return memory_[static_cast<std::size_t>(d)] + at; }
  template <std::size_t K>
  element_of<K>* state_of(std::size_t j) const {
    const layer_info& l = info_[K];
    return reinterpret_cast<element_of<K>*>(on_device(l.device, l.state_at)) + j * l.counted.size;
  }
  const update_settings* settings_on(int d) const { return reinterpret_cast<const update_settings*>(on_device(d, 0)); }
  double* terms_on(int d) const { return reinterpret_cast<double*>(on_device(d, terms_at_)); }
  const update_decision* decision_of_rank(int r) const {
    const int d = where_.device_of_rank[static_cast<std::size_t>(r)];
    const std::size_t at = static_cast<std::size_t>(d) == origin_device() ? origin_decision_at_
                                                                          : decision_at_[static_cast<std::size_t>(r)];
    return reinterpret_cast<const update_decision*>(on_device(d, at));
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
    update_settings s{};
    s.gradient_scale = gradient_scale;
    s.max_norm = clip.max_norm;
    s.check = clip.max_norm > 0.0 || clip.skip_nonfinite ? 1 : 0;
    s.skip_nonfinite = clip.skip_nonfinite ? 1 : 0;
    std::memcpy(host_, &s, sizeof s);
    for (std::size_t k = 0; k < layers; ++k)
      host_[counted_at_ + k] = static_cast<char>(where_.counted.empty() || where_.counted[k] != 0 ? 1 : 0);
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
    for (int d = 0; d < devices_; ++d)
      if (used(d))
        calls::check(Backend::copy_to_device_async(on_device(d, 0), host_, image_bytes_, origin), "cudaMemcpyAsync",
                     "writing the device optimizer's scalars");
    pending_ = true;
  }
  void terms(int r, stream_type s) override {
    each_on_rank(r, [&](auto k) { layer_term<decltype(k)::value>(r, s); });
    if (where_.processes)
      launch(1,
             fold_op{terms_on(where_.device_of_rank[0]), layers,
                     reinterpret_cast<const unsigned char*>(on_device(where_.device_of_rank[0], counted_at_))},
             s, "the gradient norm's terms");
  }
  const double* process_terms() const override { return terms_on(where_.device_of_rank[0]); }
  template <std::size_t K>
  void layer_term(int r, stream_type s) {
    using T = element_of<K>;
    const layer_info& l = info_[K];
    const int d = l.device;
    T* const g = model_.template layer<K>().gradients().data();
    launch(l.counted.size, scale_op<T>{g, settings_on(d)}, s, "scaling the gradients (device optimizer)");
    // The term lands in this device's slot K; on another device than the origin's, it is copied there.
    double* const term = terms_on(d) + K;
    double* const scratch = reinterpret_cast<double*>(on_device(d, scratch_at_[static_cast<std::size_t>(r)]));
    const std::size_t n = l.counted.count();
    std::size_t count = ctpipe::detail::norm_blocks(n);
    if (count == 0) {
      calls::check(Backend::memset_async(term, sizeof(double), s), "cudaMemsetAsync", "the gradient norm's terms");
    } else {
      launch(count, square_op<T>{g, l.counted, count == 1 ? term : scratch}, s, "the gradient norm");
      for (double* in = scratch; count > 1; in += count) {
        const std::size_t made = ctpipe::detail::norm_blocks(count);
        launch(made, sum_op{in, count, made == 1 ? term : in + count}, s, "the gradient norm");
        count = made;
      }
    }
    if (static_cast<std::size_t>(d) != origin_device())
      calls::check(Backend::memcpy_async(terms_on(static_cast<int>(origin_device())) + K,
                                         static_cast<int>(origin_device()), term, d, sizeof(double), s),
                   "cudaMemcpyPeerAsync", "gathering the gradient norm's terms");
  }
  void decide(stream_type origin, const process_sums* p) override {
    const int o = static_cast<int>(origin_device());
    auto* const decision = reinterpret_cast<update_decision*>(on_device(o, origin_decision_at_));
    decide_op f{terms_on(o), layers + 1, settings_on(o), decision};
    if (p != nullptr) {
      f.terms = p->terms;
      f.p = *p;
    }
    launch(1, f, origin, "deciding the update (device optimizer)");
    calls::check(Backend::copy_to_host_async(host_ + image_bytes_, decision, sizeof(update_decision), origin),
                 "cudaMemcpyAsync", "reading the device optimizer's decision");
  }
  void apply(int r, stream_type s) override {
    const int d = where_.device_of_rank[static_cast<std::size_t>(r)];
    bool any = false;
    each_on_rank(r, [&](auto) { any = true; });
    if (!any) return;
    if (static_cast<std::size_t>(d) != origin_device()) {
      const int o = static_cast<int>(origin_device());
      calls::check(Backend::memcpy_async(const_cast<update_decision*>(decision_of_rank(r)), d,
                                         on_device(o, origin_decision_at_), o, sizeof(update_decision), s),
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
    using op = update_op<Rule, T, scalars_of<K>, states, copy_t>;
    const layer_info& l = info_[K];
    auto& layer = model_.template layer<K>();
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
    update_decision d{};
    std::memcpy(&d, host_ + image_bytes_, sizeof d);
    result_ = {d.applied != 0, d.norm, d.scale};
    if (!result_.applied) return;
    ++updates_;
    for (layer_info& l : info_)
      if (l.updates) ++l.steps;
  }

  Model& model_;
  update_placement<Backend> where_;
  int ranks_ = 0, devices_ = 0;
  std::array<layer_info, layers> info_{};
  std::vector<std::size_t> decision_at_, scratch_at_;
  std::size_t image_bytes_ = 0, counted_at_ = 0, terms_at_ = 0, origin_decision_at_ = 0;
  std::vector<std::size_t> bytes_;
  std::vector<char*> memory_;
  char* host_ = nullptr;  // pinned: the settings image, then the decision read back
  bool pending_ = false;
  update_result result_{};
  std::uint64_t updates_ = 0;
};

}  // namespace ctpipe::cuda::detail
