// The GPT example's text and batches, its learning-rate schedule and its loss picture.
#include "gpt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace gpt_example {

namespace {
std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Microbatch i of `data` at `offsets` (one per sequence), `t` tokens each.
void fill(const std::vector<std::int32_t>& data, const std::vector<std::size_t>& offsets, std::size_t t,
          net::input_type& in, net::target_type& target) {
  for (std::size_t k = 0; k < t; ++k)
    for (std::size_t s = 0; s < shape.batch; ++s) {
      in.v[k * shape.batch + s] = data[offsets[s] + k];
      target[k * shape.batch + s] = data[offsets[s] + k + 1];
    }
}
}  // namespace

corpus load_corpus(const std::string& path) {
  const std::vector<std::int32_t> ids = read_ids(path);
  const std::size_t need = 20 * (shape.tokens + 1);
  if (ids.size() < need)
    throw std::runtime_error("the text file '" + path + "' has " + std::to_string(ids.size()) +
                             " usable characters; the example needs at least " + std::to_string(need));
  const std::size_t split = ids.size() - ids.size() / 10;
  corpus c;
  c.train.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
  c.validation.assign(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
  return c;
}

void training_batch(const corpus& c, const options& o, int step, batch& b) {
  b.inputs.resize(microbatches);
  b.targets.resize(microbatches);
  b.extents.resize(microbatches);
  const std::size_t span = c.train.size() - shape.tokens - 1;
  const int lo = std::clamp(o.min_tokens, 1, static_cast<int>(shape.tokens));
  for (int i = 0; i < microbatches; ++i) {
    std::uint64_t r = mix(o.seed * 0x100000001B3ull + static_cast<std::uint64_t>(step) * 64 + static_cast<unsigned>(i));
    const auto t =
        static_cast<std::size_t>(lo + static_cast<int>(r % static_cast<std::uint64_t>(shape.tokens - lo + 1)));
    std::vector<std::size_t> offsets(shape.batch);
    for (auto& off : offsets) off = (r = mix(r)) % span;
    fill(c.train, offsets, t, b.inputs[i], b.targets[i]);
    b.extents[i] = static_cast<int>(t * shape.batch);
  }
}

void validation_batch(const corpus& c, batch& b) {
  b.inputs.resize(microbatches);
  b.targets.resize(microbatches);
  b.extents.assign(microbatches, static_cast<int>(shape.tokens * shape.batch));
  const std::size_t span = c.validation.size() - shape.tokens - 1;
  const std::size_t sequences = static_cast<std::size_t>(microbatches) * shape.batch;
  for (int i = 0; i < microbatches; ++i) {
    std::vector<std::size_t> offsets(shape.batch);
    for (std::size_t s = 0; s < shape.batch; ++s)
      offsets[s] = span * (static_cast<std::size_t>(i) * shape.batch + s) / sequences;
    fill(c.validation, offsets, shape.tokens, b.inputs[i], b.targets[i]);
  }
}

double learning_rate(const options& o, int step) {
  if (step < o.warmup) return o.lr * (step + 1) / o.warmup;
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup) / std::max(1, o.steps - o.warmup));
  return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(M_PI * progress));
}

void write_svg(const std::string& path, const std::vector<double>& train,
               const std::vector<std::pair<int, double>>& val) {
  const double w = 640, h = 360, left = 50, bottom = 30, top = 20, right = 20;
  double hi = 0.0, lo = 1e300;
  for (double v : train) hi = std::max(hi, v), lo = std::min(lo, v);
  for (const auto& [s, v] : val) hi = std::max(hi, v), lo = std::min(lo, v);
  lo = std::floor(lo * 2) / 2, hi = std::ceil(hi * 2) / 2;
  const double n = std::max<double>(1, static_cast<double>(train.size()) - 1);
  const auto x = [&](double s) { return left + (w - left - right) * s / n; };
  const auto y = [&](double v) { return top + (h - top - bottom) * (hi - v) / std::max(1e-9, hi - lo); };
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (double v = lo; v <= hi + 1e-9; v += 0.5)
    out << "<line x1=\"" << left << "\" x2=\"" << w - right << "\" y1=\"" << y(v) << "\" y2=\"" << y(v)
        << "\" stroke=\"#ddd\"/><text x=\"" << left - 6 << "\" y=\"" << y(v) + 4 << "\" text-anchor=\"end\">" << v
        << "</text>\n";
  out << "<text x=\"" << (w + left) / 2 << "\" y=\"" << h - 6 << "\" text-anchor=\"middle\">step (0 to " << train.size()
      << ")</text>\n<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1\" points=\"";
  for (std::size_t s = 0; s < train.size(); ++s) out << x(static_cast<double>(s)) << ',' << y(train[s]) << ' ';
  out << "\"/>\n<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\" points=\"";
  for (const auto& [s, v] : val) out << x(s) << ',' << y(v) << ' ';
  out << "\"/>\n<text x=\"" << w - right << "\" y=\"" << top + 4
      << "\" text-anchor=\"end\"><tspan fill=\"#1f77b4\">training loss per token</tspan>  <tspan "
         "fill=\"#d62728\">validation loss</tspan></text>\n</svg>\n";
  std::ofstream(path) << out.str();
}

}  // namespace gpt_example
