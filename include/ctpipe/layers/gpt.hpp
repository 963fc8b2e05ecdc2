// A decoder-only GPT (GPT-2's pre-norm block) assembled from ctpipe's transformer layers: token and
// position embeddings, Blocks blocks of attention and MLP with residual connections, a final layer
// norm, and an output head that shares its matrix with the token embedding. Each microbatch is
// Batch sequences of up to Tokens tokens, token-major, so microbatches may be of different lengths
// (their extent: Batch times their tokens per sequence).
//
//   using net = ctpipe::layers::gpt<{.vocab = 96, .tokens = 64, .batch = 4, .width = 128,
//                                    .heads = 4, .blocks = 4}>;
//   auto model = std::make_unique<net::model>();   // (parameters inline: keep it on the heap)
//   net::init(*model, seed);
//   ctpipe::host_executor<table, net::model, stages, net::loss> exec(*model, loss);
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/causal_attention_qkv.hpp>
#include <ctpipe/layers/dense.hpp>  // softmax_cross_entropy
#include <ctpipe/layers/dropout.hpp>
#include <ctpipe/layers/embedding.hpp>
#include <ctpipe/layers/gelu.hpp>
#include <ctpipe/layers/layer_norm.hpp>
#include <ctpipe/layers/linear.hpp>
#include <ctpipe/model/graph.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/shared.hpp>
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe::layers {

/// A GPT's sizes: vocabulary, context (tokens per sequence), sequences per microbatch, width,
/// attention heads, blocks.
struct gpt_shape {
  std::size_t vocab = 0, tokens = 0, batch = 1, width = 0, heads = 1, blocks = 1;
};

namespace detail {

/// A GPT of shape G built from a family of layers (the host's, below; the device's:
/// ctpipe/layers/device/gpt.hpp): its layers, model, loss, initialisation and names, written once.
template <class Family, gpt_shape G>
struct gpt_of {
  static_assert(G.vocab > 0 && G.tokens > 0 && G.batch > 0 && G.width > 0 && G.blocks > 0,
                "ctpipe::layers::gpt: every size of the shape must be at least 1");
  static constexpr std::size_t rows = G.tokens * G.batch;
  static constexpr auto R = rows::tokens;
  using embed = typename Family::template embedding<G.tokens, G.batch, G.vocab, G.width, R>;
  using drop = typename Family::template dropout<rows, G.width, 0, R>;
  using norm = typename Family::template layer_norm<rows, G.width, R>;
  using qkv = typename Family::template linear<rows, G.width, 3 * G.width, bias::yes, R>;
  using attention = typename Family::template causal_attention_qkv<G.tokens, G.batch, G.width, G.heads, R>;
  using projection = typename Family::template linear<rows, G.width, G.width, bias::yes, R>;
  using residual = typename Family::template add<rows, G.width, R>;
  using expand = typename Family::template linear<rows, G.width, 4 * G.width, bias::yes, R>;
  using activation = typename Family::template gelu<rows, 4 * G.width, R>;
  using contract = typename Family::template linear<rows, 4 * G.width, G.width, bias::yes, R>;
  using head = typename Family::template linear<rows, G.width, G.vocab, bias::no, R>;
  /// One block (12 layers): x + drop(proj(attn(qkv(norm(x))))), then the same with the MLP; each
  /// residual add reads the layer before it and the block's (or the half block's) input, 6 back.
  using block = std::tuple<norm, qkv, attention, projection, drop, node<residual, back<1>, back<6>>, norm, expand,
                           activation, contract, drop, node<residual, back<1>, back<6>>>;
  static constexpr std::size_t block_layers = 12;

 private:
  template <class T>
  struct as_model;
  template <class... T>
  struct as_model<std::tuple<T...>> {
    using type = ctpipe::model<T...>;
  };
  template <std::size_t... I>
  static auto all_layers(std::index_sequence<I...>)
      -> decltype(std::tuple_cat(std::declval<std::tuple<embed, drop>>(), (void(I), std::declval<block>())...,
                                 std::declval<std::tuple<norm, shared_with<0, head>>>()));

 public:
  /// Layer 0 the embedding, then its dropout, the blocks, the final norm, and the tied head.
  using model = typename as_model<decltype(all_layers(std::make_index_sequence<G.blocks>{}))>::type;
  /// The sum of the cross-entropy of the microbatch's tokens (ctpipe::token_losses::per_token
  /// divides by the step's tokens).
  using loss = typename Family::template softmax_cross_entropy<rows, G.vocab, R>;
  using input_type = typename model::input_type;
  using target_type = typename loss::target_type;
  static constexpr std::size_t layer_count = model::size;

  /// GPT-2's initialisation, in ctpipe's deterministic uniform draws: embeddings with standard
  /// deviation 0.02, linear layers with torch.nn.Linear's bound, the two projections into the
  /// residual stream scaled by 1 / sqrt(2 Blocks), layer norms 1 and 0, the head tied to the
  /// embedding. Every layer its own stream of `seed`.
  static void init(model& m, std::uint64_t seed) {
    std::uint64_t k = 0;
    const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(G.blocks));
    for_each_layer(m, [&](auto& l) {
      using L = std::remove_cvref_t<decltype(l)>;
      ++k;
      if constexpr (std::is_same_v<L, embed>)
        l.init(seed * 1000 + k);
      else if constexpr (std::is_same_v<L, projection> || std::is_same_v<L, contract>)
        l.init(seed * 1000 + k, residual_scale);
      else if constexpr (requires { l.init(seed); })
        l.init(seed * 1000 + k);
    });
    Family::tie(m);
  }
  /// Layer k's name: "embedding", "dropout", "block<b>." and its part ("ln1", "qkv", "attention",
  /// "proj", "drop1", "add1", "ln2", "fc", "gelu", "fc2", "drop2", "add2"), "ln_f", "head".
  static std::string layer_name(std::size_t k) {
    constexpr const char* parts[block_layers] = {"ln1", "qkv", "attention", "proj", "drop1", "add1",
                                                 "ln2", "fc",  "gelu",      "fc2",  "drop2", "add2"};
    if (k == 0) return "embedding";
    if (k == 1) return "dropout";
    if (k + 2 == layer_count) return "ln_f";
    if (k + 1 == layer_count) return "head";
    return "block" + std::to_string((k - 2) / block_layers) + "." + parts[(k - 2) % block_layers];
  }
  /// Every dropout's rate, in thousandths (0: none).
  static void set_dropout(model& m, unsigned per_mille) {
    for_each_layer(m, [&](auto& l) {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(l)>, drop>) l.per_mille = per_mille;
    });
  }
};

/// The host's layers (ctpipe/layers/), for gpt_of.
struct host_layers {
  template <std::size_t T, std::size_t B, std::size_t V, std::size_t W, rows R>
  using embedding = layers::embedding<T, B, V, W, R>;
  template <std::size_t Rows, std::size_t Cols, unsigned PerMille, rows R>
  using dropout = layers::dropout<Rows, Cols, PerMille, R>;
  template <std::size_t Rows, std::size_t Cols, rows R>
  using layer_norm = layers::layer_norm<Rows, Cols, R>;
  template <std::size_t Rows, std::size_t In, std::size_t Out, bias B, rows R>
  using linear = layers::linear<Rows, In, Out, B, R>;
  template <std::size_t T, std::size_t B, std::size_t W, std::size_t H, rows R>
  using causal_attention_qkv = layers::causal_attention_qkv<T, B, W, H, R>;
  template <std::size_t Rows, std::size_t Cols, rows R>
  using add = layers::add<Rows, Cols, R>;
  template <std::size_t Rows, std::size_t Cols, rows R>
  using gelu = layers::gelu<Rows, Cols, R>;
  template <std::size_t Rows, std::size_t Classes, rows R>
  using softmax_cross_entropy = layers::softmax_cross_entropy<Rows, Classes, R>;
  /// The head's copy of the embedding's table, made equal to it.
  template <class M>
  static void tie(M& m) {
    tie_parameters(m);
  }
};

}  // namespace detail

/// The model, its loss and its initialisation for a shape G, of the host's layers.
template <gpt_shape G>
struct gpt : detail::gpt_of<detail::host_layers, G> {};

}  // namespace ctpipe::layers
