// The GPT example's training loop, for one schedule of the table: the host executor (one thread
// per rank), AdamW with global clipping, a warm-up and cosine learning rate, validation with
// evaluate(), checkpoints and --resume, a progress line, and a sample at the end.
#pragma once

#include "gpt.hpp"

#if CTPIPE_GPT_MPI
#include <ctpipe/mpi.hpp>
#endif

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gpt_example {

// The executor: one thread per rank, or (Mpi) one process per rank and replica.
template <bool Mpi, auto Table, auto Stages>
struct executor_for {
  using type = ctpipe::host_executor<Table, net::model, Stages, net::loss>;
};
#if CTPIPE_GPT_MPI
template <auto Table, auto Stages>
struct executor_for<true, Table, Stages> {
  using type = ctpipe::mpi::executor<Table, net::model, Stages, net::loss>;
};
#endif

// Trains with Schedule (its microbatches: a replica's share of the step's 8). Mpi: this process is
// one of ranks x replicas; it feeds its replica's microbatches, and process 0 prints and writes.
template <auto Schedule, bool Mpi = false>
int train(const options& o, const corpus& c) {
  constexpr auto stages = ctpipe::partition<net::model, Schedule.stages()>();  // balanced by the layers' costs
  // The residuals that cross a stage boundary become the table's skip messages.
  constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<net::model, stages>()>();
  using executor = typename executor_for<Mpi, table, stages>::type;
  auto model = std::make_unique<net::model>();  // (the parameters are inline: on the heap)
  net::init(*model, o.seed);
  net::set_dropout(*model, o.dropout);
  net::loss loss;
  executor exec(*model, loss);
  const ctpipe::adamw rule{.lr = o.lr, .weight_decay = o.weight_decay};
  const ctpipe::clipping clip{.max_norm = o.clip};
  auto opt_held = [&] {  // over MPI, the optimizer knows the executor (its norm is one all-reduce)
    if constexpr (Mpi)
      return std::make_unique<decltype(ctpipe::optimizer(*model, exec, rule, clip))>(*model, exec, rule, clip);
    else
      return std::make_unique<decltype(ctpipe::optimizer(*model, rule, clip))>(*model, rule, clip);
  }();
  auto& opt = *opt_held;
  // This replica's share of each step's microbatches.
  constexpr auto mine = static_cast<std::size_t>(executor::microbatches);
  std::size_t first_mb = 0;
  if constexpr (Mpi) {
    first_mb = static_cast<std::size_t>(exec.replica()) * mine;
    if (static_cast<int>(mine) * exec.replicas() != microbatches) return -1;
  }
  const bool lead = o.process == 0;
  const auto share = [&](const auto& v) { return std::span(v).subspan(first_mb, mine); };

  int first = 0;
  if (o.resume) {
    const ctpipe::training_state s = ctpipe::load_checkpoint(o.checkpoint, opt);
    exec.set_context_origin(s.origin);
    first = std::stoi(s.data);
    if (lead) std::printf("resumed from %s at step %d\n", o.checkpoint.c_str(), first);
  }
  std::FILE* log = o.losses_file.empty() || !lead ? nullptr : std::fopen(o.losses_file.c_str(), o.resume ? "a" : "w");
  batch train_batch, val_batch;
  validation_batch(c, val_batch);
  std::vector<double> curve;
  std::vector<std::pair<int, double>> val_curve;
  const auto validate = [&] {
    return exec.evaluate(share(val_batch.inputs), share(val_batch.targets), share(val_batch.extents)).per_token();
  };
  const auto start = std::chrono::steady_clock::now();
  long long tokens = 0;
  double val = 0.0;
  for (int step = first; step < o.steps; ++step) {
    training_batch(c, o, step, train_batch);
    const ctpipe::token_losses l =
        exec.step(share(train_batch.inputs), share(train_batch.targets), share(train_batch.extents));
    const double train_loss = l.per_token();
    opt.rule.lr = learning_rate(o, step);
    opt.step(1.0 / static_cast<double>(l.total_tokens()));  // the gradient of the mean over the step's tokens
    tokens += l.total_tokens();
    curve.push_back(train_loss);
    const bool last = step + 1 == o.steps, evaluated = (o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last;
    if (evaluated) {
      val = validate();
      val_curve.emplace_back(step + 1, val);
    }
    if (log != nullptr) {  // exact values, for comparing runs bit for bit
      std::fprintf(log, "%d %a", step + 1, train_loss);
      if (evaluated) std::fprintf(log, " %a", val);
      std::fprintf(log, "\n");
    }
    if (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0)
      ctpipe::save_checkpoint(o.checkpoint, opt, {exec.context_origin(), std::to_string(step + 1)});
    if (o.stop_after > 0 && step + 1 == o.stop_after) {
      if (lead) std::printf("stopped after step %d\n", step + 1);
      if (log != nullptr) std::fclose(log);
      return 0;
    }
    if (lead && !o.quiet && ((step + 1) % 10 == 0 || last)) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double left = seconds / (step + 1 - first) * (o.steps - step - 1);
      const std::string v = val_curve.empty() ? std::string("  -   ") : std::to_string(val).substr(0, 6);
      std::printf("step %5d/%d  loss %.4f  val %s  %8.0f tokens/s  %d:%02d left\n", step + 1, o.steps, train_loss,
                  v.c_str(), static_cast<double>(tokens) / seconds, static_cast<int>(left) / 60,
                  static_cast<int>(left) % 60);
      std::fflush(stdout);
    }
  }
  if (log != nullptr) std::fclose(log);
  if (lead && !o.svg.empty()) write_svg(o.svg, curve, val_curve);

  if (o.sample > 0) {  // sample from the trained model: a forward pass through the pipeline per character
    std::vector<std::int32_t> text(c.validation.begin(), c.validation.begin() + 16);
    std::uint64_t r = o.seed;
    std::vector<net::input_type> in(mine);
    std::vector<net::model::output_type> out(mine);
    for (int k = 0; k < o.sample; ++k) {
      const std::size_t t = std::min<std::size_t>(text.size(), shape.tokens);
      for (std::size_t i = 0; i < t; ++i)
        for (std::size_t s = 0; s < shape.batch; ++s) in[0].v[i * shape.batch + s] = text[text.size() - t + i];
      for (auto& x : in) x = in[0];
      const std::vector<int> extents(mine, static_cast<int>(t * shape.batch));
      exec.predict(in, out, extents);  // (collective; every process of the replica gets the outputs)
      const float* z = &out[0].v[(t - 1) * shape.batch * shape.vocab];  // last token, sequence 0
      double sum = 0.0, mx = z[0];
      for (std::size_t v = 1; v < shape.vocab; ++v) mx = std::max<double>(mx, z[v]);
      std::vector<double> p(shape.vocab);
      for (std::size_t v = 0; v < shape.vocab; ++v) sum += p[v] = std::exp((z[v] - mx) / 0.8);  // temperature 0.8
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      double u = static_cast<double>(r >> 11) / 9007199254740992.0 * sum;
      std::size_t pick = 0;
      while (pick + 1 < shape.vocab && (u -= p[pick]) > 0) ++pick;
      text.push_back(static_cast<std::int32_t>(pick));
    }
    if (lead) {
      std::printf("sample:\n");
      for (std::int32_t id : text) std::putchar(symbol(id));
      std::printf("\n");
    }
  }
  if (lead) std::printf("trained: %d steps, validation loss %.4f\n", o.steps, val);
  return 0;
}
}  // namespace gpt_example
