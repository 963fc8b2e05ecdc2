// The planner's model file of this GPT, from its own layers measured here (--write-model): each
// layer's forward, I and W timed at microbatches of 1, 2, 4 and 8 sequences of the full context
// (one instance of the model for each: a microbatch's sequences are a compile-time size), and its
// bytes per sequence; the head tied to the embedding, the residual adds' second sources; and its
// calibration: each stage's compute as 1F1B on 2 ranks measured it (measure_stages). A sample,
// for `ctpipe plan`, is one sequence.
#include "gpt.hpp"

#include <ctpipe/model/measure_layers.hpp>

#include <cstdio>
#include <memory>
#include <stdexcept>

namespace gpt_example {

namespace {

template <std::size_t Sequences>
using sized = ctpipe::layers::gpt<ctpipe::layers::gpt_shape{shape.vocab, shape.tokens, Sequences, shape.width,
                                                            shape.heads, shape.blocks}>;

// The layers of the model at `Sequences` a microbatch, measured on the text's first sequences.
template <std::size_t Sequences>
std::vector<ctpipe::layer_measure> measure(const corpus& c, std::uint64_t seed) {
  using g = sized<Sequences>;
  auto m = std::make_unique<typename g::model>();
  g::init(*m, seed);
  typename g::loss loss;
  auto in = std::make_unique<typename g::input_type>();
  auto target = std::make_unique<typename g::target_type>();
  for (std::size_t t = 0; t < shape.tokens; ++t)
    for (std::size_t s = 0; s < Sequences; ++s) {
      const std::size_t at = s * (shape.tokens + 1) + t;
      in->v[t * Sequences + s] = c.train[at];
      (*target)[t * Sequences + s] = c.train[at + 1];
    }
  return ctpipe::measure_layers(*m, loss, *in, *target);
}

}  // namespace

int write_model(const options& o, const corpus& c) {
  if (c.train.size() < 8 * (shape.tokens + 1)) throw std::runtime_error("--write-model: the text is too short");
  const std::vector<std::vector<ctpipe::layer_measure>> at{measure<1>(c, o.seed), measure<2>(c, o.seed),
                                                           measure<4>(c, o.seed), measure<8>(c, o.seed)};
  const int sizes[] = {1, 2, 4, 8};
  std::FILE* f = std::fopen(o.model_file.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("--write-model: cannot write '" + o.model_file + "'");
  // Bytes per sequence: the one-sequence model's.
  const auto& one = at[0];
  std::fprintf(f, "{\"input_bytes\": %zu, \"layers\": [\n", shape.tokens * sizeof(std::int32_t));
  for (std::size_t k = 0; k < one.size(); ++k) {
    std::fprintf(f, "  {\"name\": \"%s\", \"timings\": [", net::layer_name(k).c_str());
    for (std::size_t i = 0; i < at.size(); ++i)
      std::fprintf(f, "%s{\"samples\": %d, \"forward\": %.4g, \"backward_input\": %.4g, \"backward_weight\": %.4g}",
                   i ? ", " : "", sizes[i], at[i][k].forward, at[i][k].backward_input, at[i][k].backward_weight);
    std::fprintf(f, "],\n   \"activation_bytes\": %zu, \"output_bytes\": %zu, \"parameter_bytes\": %zu",
                 one[k].output_bytes + one[k].saved_bytes, one[k].output_bytes, one[k].parameter_bytes);
    if (one[k].skip > 0) std::fprintf(f, ", \"skip\": %d", one[k].skip);
    if (one[k].shares_with >= 0)
      std::fprintf(f, ", \"shares_with\": \"%s\"",
                   net::layer_name(static_cast<std::size_t>(one[k].shares_with)).c_str());
    std::fprintf(f, "}%s\n", k + 1 < one.size() ? "," : "");
  }
  // The calibration: what 1F1B on 2 ranks measured of its stages (ctpipe plan scales each stage's
  // layers to it: docs/planner.md).
  const stage_measures run = measure_stages(o, c);
  std::fprintf(f, "], \"calibration\": {\"samples\": %zu, \"first_layers\": [", shape.batch);
  for (std::size_t s = 0; s < run.first.size(); ++s) std::fprintf(f, "%s%d", s ? ", " : "", run.first[s]);
  std::fprintf(f, "],\n  \"forward\": [");
  for (std::size_t s = 0; s < run.times.size(); ++s) std::fprintf(f, "%s%.4g", s ? ", " : "", run.times[s].forward);
  std::fprintf(f, "], \"backward\": [");
  for (std::size_t s = 0; s < run.times.size(); ++s) std::fprintf(f, "%s%.4g", s ? ", " : "", run.times[s].backward);
  std::fprintf(f, "]}}\n");
  if (std::fclose(f) != 0) throw std::runtime_error("--write-model: cannot write '" + o.model_file + "'");
  std::printf(
      "gpt: wrote %s: %zu layers measured at 1, 2, 4 and 8 sequences a microbatch (a sample: a sequence of %zu "
      "tokens), calibrated by 1F1B on 2 ranks\n",
      o.model_file.c_str(), one.size(), shape.tokens);
  return 0;
}

}  // namespace gpt_example
