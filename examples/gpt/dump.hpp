// The GPT comparisons' starting point, for PyTorch (bench/pytorch_gpt.py's load): the shape, the
// initial parameters and every step's token ids and targets in one file, written by bench_gpt_pipe
// (the CPU comparison) and gpt_gpu --dump (the GPU one). Layout, little-endian:
//   int32 x 8   vocab, tokens, batch, width, heads, blocks, microbatches, steps
//   float32     every layer's parameters but the tied head's, in layer order, each tensor as the
//               layer lays it out (the host and device GPTs lay them out alike)
//   int32       the token ids, then the targets: [step][microbatch][token][sequence]
#pragma once

#include <ctpipe/layers/gpt.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace gpt_example {

struct dump {
  ctpipe::layers::gpt_shape shape;
  int microbatches = 0, steps = 0;
  std::vector<std::vector<float>> parameters;  // each layer's, the head's left out
  std::vector<std::int32_t> ids, targets;      // [step][microbatch][token][sequence]
};

/// Writes `d` to `path`; false where it cannot.
inline bool write_dump(const std::string& path, const dump& d) {
  std::ofstream f(path, std::ios::binary);
  const auto put = [&](const void* p, std::size_t n) {
    f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  };
  const std::int32_t header[] = {static_cast<std::int32_t>(d.shape.vocab),
                                 static_cast<std::int32_t>(d.shape.tokens),
                                 static_cast<std::int32_t>(d.shape.batch),
                                 static_cast<std::int32_t>(d.shape.width),
                                 static_cast<std::int32_t>(d.shape.heads),
                                 static_cast<std::int32_t>(d.shape.blocks),
                                 d.microbatches,
                                 d.steps};
  put(header, sizeof header);
  for (const auto& p : d.parameters) put(p.data(), p.size() * sizeof(float));
  put(d.ids.data(), d.ids.size() * sizeof(std::int32_t));
  put(d.targets.data(), d.targets.size() * sizeof(std::int32_t));
  return static_cast<bool>(f);
}

}  // namespace gpt_example
