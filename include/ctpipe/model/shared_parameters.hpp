// A model's shared groups (ctpipe/model/shared.hpp), as tables known at compile time, and what
// every executor does with them: start the members' copies equal, sum their gradients in one fixed
// order, and refuse parameters shared by hand across ranks.
//
// The order of a group's sum: each member's gradient is its own microbatches' sum (in microbatch
// order), and the members are added in layer order, ((g_first + g_second) + g_third) + ..., with
// ctpipe::detail::sum_in_order. sequential_step does the same, so an executor agrees with it to the
// bit. (One matrix that every member accumulates into, in the order of one sequential pass, rounds
// differently: it agrees within float rounding, not to the bit.)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/detail/ordered_sum.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/shared.hpp>

namespace ctpipe {

namespace detail {

// Layer k is the first layer of a group: a later layer shares its parameters.
template <class M>
constexpr bool group_first(int k) {
  for (const int s : M::shares)
    if (s == k) return true;
  return false;
}

}  // namespace detail

/// The number of groups of layers that share parameters in M (0: none).
template <model_type M>
inline constexpr std::size_t shared_group_count = [] {
  std::size_t n = 0;
  for (int k = 0; k < static_cast<int>(M::size); ++k) n += detail::group_first<M>(k) ? 1 : 0;
  return n;
}();

/// True when some layers of M share parameters.
template <model_type M>
inline constexpr bool has_shared_parameters_v = shared_group_count<M> > 0;

namespace detail {

// Each group's first layer, in layer order (group G is the G-th).
template <class M>
inline constexpr auto group_firsts = [] {
  std::array<int, shared_group_count<M>> f{};
  std::size_t g = 0;
  for (int k = 0; k < static_cast<int>(M::size); ++k)
    if (group_first<M>(k)) f[g++] = k;
  return f;
}();

// The members of group G, in layer order (its first layer first).
template <class M, std::size_t G>
inline constexpr auto group_members = [] {
  constexpr int first = group_firsts<M>[G];
  constexpr std::size_t n = [] {
    std::size_t c = 1;
    for (const int s : M::shares) c += s == group_firsts<M>[G] ? 1 : 0;
    return c;
  }();
  std::array<int, n> m{};
  m[0] = first;
  std::size_t at = 1;
  for (int k = 0; k < static_cast<int>(M::size); ++k)
    if (M::shares[ix(k)] == first) m[at++] = k;
  return m;
}();

// The group of layer k, or -1.
template <class M>
constexpr int group_of(int k) {
  const int first = M::shares[ix(k)] >= 0 ? M::shares[ix(k)] : k;
  // (An int loop: nvcc warns of an unsigned compared with a zero count.)
  for (int g = 0; g < static_cast<int>(shared_group_count<M>); ++g)
    if (group_firsts<M>[ix(g)] == first) return g;
  return -1;
}

// The element type of group G's shared parameters.
template <class M, std::size_t G>
using group_element_t = typename shared_element<typename M::template layer_type<ix(group_firsts<M>[G])>>::type;

// What each member of group G shares (Gradients: its gradients), as spans of one type, in layer order.
template <bool Gradients, class M, std::size_t G>
auto group_spans(M& m) {
  using T = group_element_t<M, G>;
  constexpr auto members = group_members<M, G>;
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<std::span<T>, sizeof...(I)>{
        std::span<T>(shared_span_of<Gradients>(m.template layer<ix(members[I])>()))...};
  }
  (std::make_index_sequence<members.size()>{});
}

// f.template operator()<G>() for each group.
template <class M, class F>
constexpr void for_each_group(F&& f) {
  [&]<std::size_t... G>(std::index_sequence<G...>) { (f.template operator()<G>(), ...); }
  (std::make_index_sequence<shared_group_count<M>>{});
}

inline std::string layer_pair(int a, int b) { return "layers " + std::to_string(a) + " and " + std::to_string(b); }

// Every member of each group shares as many elements as the group's first layer.
template <class M>
void check_shared_lengths(M& m, std::string_view who) {
  for_each_group<M>([&]<std::size_t G>() {
    constexpr auto members = group_members<M, G>;
    const auto p = group_spans<false, M, G>(m);
    const auto g = group_spans<true, M, G>(m);
    for (std::size_t i = 0; i < members.size(); ++i)
      if (p[i].size() != p[0].size() || g[i].size() != p[0].size())
        throw std::invalid_argument(std::string(who) + ": " + layer_pair(members[0], members[i]) +
                                    " share parameters (ctpipe::shared_with), so what they share must have one "
                                    "length: layer " +
                                    std::to_string(members[0]) + " shares " + std::to_string(p[0].size()) +
                                    " elements, layer " + std::to_string(members[i]) + " " +
                                    std::to_string(p[i].size()) + " (and " + std::to_string(g[i].size()) +
                                    " gradients)");
  });
}

// Group G's sum: every member's gradient becomes the members' sum, in layer order.
template <class M, std::size_t G>
void sum_group(M& m) noexcept {
  using T = group_element_t<M, G>;
  const auto g = group_spans<true, M, G>(m);
  std::array<const T*, g.size()> parts{};
  for (std::size_t i = 0; i < g.size(); ++i) parts[i] = g[i].data();
  // Into a scratch-free form: the first member gets the sum (read before written, element by
  // element), then the others copy it.
  sum_in_order(g[0], std::span<const T* const>(parts));
  for (std::size_t i = 1; i < g.size(); ++i)
    for (std::size_t k = 0; k < g[0].size(); ++k) g[i][k] = g[0][k];
}

// The bytes of a span, as addresses.
struct byte_range {
  std::uintptr_t begin = 0, end = 0;
  int layer = 0;
  bool overlaps(const byte_range& o) const noexcept {
    return begin < end && o.begin < o.end && begin < o.end && o.begin < end;  // (an empty span holds nothing)
  }
};
template <class S>
byte_range range_of(S s, int layer) {
  const auto b = reinterpret_cast<std::uintptr_t>(s.data());
  return {b, b + s.size_bytes(), layer};
}

}  // namespace detail

/// Starts every shared group's copies equal: each member's shared parameters become a copy of the
/// group's first layer's. Executors do this at construction; call it before training a model with
/// sequential_step. Throws std::invalid_argument where the members share spans of different lengths.
template <model_type M>
void tie_parameters(M& m) {
  detail::check_shared_lengths(m, "ctpipe::tie_parameters");
  detail::for_each_group<M>([&]<std::size_t G>() {
    const auto p = detail::group_spans<false, M, G>(m);
    for (std::size_t i = 1; i < p.size(); ++i)
      if (p[i].data() != p[0].data())
        for (std::size_t k = 0; k < p[0].size(); ++k) p[i][k] = p[0][k];
  });
}

/// Gives every member of each shared group the sum of the members' gradients, added in layer order
/// (sequential_step does this after its microbatches; the executors after a group's last backward).
template <model_type M>
void sum_shared_gradients(M& m) {
  detail::check_shared_lengths(m, "ctpipe::sum_shared_gradients");
  detail::for_each_group<M>([&]<std::size_t G>() { detail::sum_group<M, G>(m); });
}

namespace detail {

/// What an executor refuses at construction, where rank_of(k) is the rank that runs layer k:
/// members of a group that share spans of different lengths, or that hold the same memory; and two
/// layers on different ranks whose parameters() or gradients() overlap (one buffer shared by hand,
/// which both ranks would write at once, or which each process would hold apart, unsummed).
// Every layer's parameters() and gradients(), as addresses, in layer order.
template <class M>
std::vector<byte_range> parameter_ranges(M& m) {
  std::vector<byte_range> ranges;
  int k = 0;
  for_each_layer(m, [&](auto& l) {
    if constexpr (has_parameters<std::remove_cvref_t<decltype(l)>>) {
      ranges.push_back(range_of(l.parameters(), k));
      ranges.push_back(range_of(l.gradients(), k));
    }
    ++k;
  });
  return ranges;
}

// The overlaps check_shared_parameters refuses, among `ranges` (parameter_ranges) whose layer k is
// in group group[k] (-1: none) and runs on rank rank[k]. Plain: one copy in a program.
inline void check_parameter_overlaps(std::span<const byte_range> ranges, std::span<const int> group,
                                     std::span<const int> rank, std::string_view who) {
  for (std::size_t i = 0; i < ranges.size(); ++i)
    for (std::size_t j = i + 1; j < ranges.size(); ++j) {
      const byte_range &a = ranges[i], &b = ranges[j];
      if (a.layer == b.layer || !a.overlaps(b)) continue;
      const int ga = group[static_cast<std::size_t>(a.layer)], gb = group[static_cast<std::size_t>(b.layer)];
      if (ga >= 0 && ga == gb)
        throw std::invalid_argument(std::string(who) + ": " + layer_pair(a.layer, b.layer) +
                                    " share parameters (ctpipe::shared_with) and also hold overlapping "
                                    "parameters() or gradients(): each member keeps its own copy, which the "
                                    "executor keeps equal");
      const int ra = rank[static_cast<std::size_t>(a.layer)], rb = rank[static_cast<std::size_t>(b.layer)];
      if (ra != rb)
        throw std::invalid_argument(
            std::string(who) + ": " + layer_pair(a.layer, b.layer) + " (on ranks " + std::to_string(ra) + " and " +
            std::to_string(rb) +
            ") hold overlapping parameters() or gradients(): one buffer shared by hand, which two ranks would "
            "update at once. Declare the sharing instead: make layer " +
            std::to_string(b.layer) + "'s entry ctpipe::shared_with<" + std::to_string(a.layer) +
            ", ...> (each rank then keeps its own copy, and the executor sums their gradients)");
    }
}

template <class M, class RankOf>
void check_shared_parameters(M& m, std::string_view who, RankOf&& rank_of) {
  check_shared_lengths(m, who);
  std::vector<int> group(M::size), rank(M::size);
  for (std::size_t k = 0; k < M::size; ++k) {
    group[k] = group_of<M>(static_cast<int>(k));
    rank[k] = rank_of(static_cast<int>(k));
  }
  check_parameter_overlaps(parameter_ranges(m), group, rank, who);
}

/// What an executor that runs a bidirectional table (dualpipe) in one process refuses at
/// construction: a mirror (the model that holds the second chain's copies of the layers) any of
/// whose layers' parameters() or gradients() overlap the model's, which would make the two copies
/// one.
template <class M>
void check_mirror(M& m, M& mirror, std::string_view who) {
  const std::vector<byte_range> own = parameter_ranges(m);
  for (const byte_range& b : parameter_ranges(mirror))
    for (const byte_range& a : own)
      if (a.overlaps(b))
        throw std::invalid_argument(std::string(who) + ": the mirror's layer " + std::to_string(b.layer) +
                                    " holds parameters() or gradients() that overlap the model's layer " +
                                    std::to_string(a.layer) +
                                    "'s: the mirror (the second pipeline's copy of the layers, for a "
                                    "bidirectional table) needs memory of its own");
}

}  // namespace detail

}  // namespace ctpipe
