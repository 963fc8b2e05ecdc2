#include "synth.hpp"

#include "explorer.hpp"

#include <CLI/CLI.hpp>

#include <sstream>
#include <stdexcept>

namespace ctpipe::explorer {

namespace {

int whole(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) throw std::invalid_argument(what + ": '" + text + "' is not a whole number");
  return v;
}

// "F=2,I=3,W=1,comm=1" (any subset; `show`'s keys, whole numbers) into every stage of `c`.
void parse_uniform(const std::string& spec, synthesis_costs& c) {
  const cost_model d = parse_costs(spec);
  if (d.backward != cost_model{}.backward || d.overlap != cost_model{}.overlap)
    throw std::invalid_argument("--cost: synth takes F, I, W and comm (a backward is I + W)");
  auto unit = [](double v, const char* key) {
    if (v != static_cast<double>(static_cast<int>(v)))
      throw std::invalid_argument(std::string("--cost: ") + key + " must be a whole number for synth");
    return static_cast<int>(v);
  };
  for (op_costs& s : c.stage) s = {unit(d.forward, "F"), unit(d.backward_input, "I"), unit(d.backward_weight, "W")};
  c.comm = unit(d.comm, "comm");
}

// "F,I,W/F,I,W/..." one triple a stage, `stages` of them.
void parse_stages(const std::string& spec, int stages, synthesis_costs& c) {
  std::stringstream in(spec);
  int j = 0;
  for (std::string stage; std::getline(in, stage, '/'); ++j) {
    if (j >= synthesis_costs::max_stages) break;
    std::stringstream parts(stage);
    std::string f, i, w, extra;
    if (!std::getline(parts, f, ',') || !std::getline(parts, i, ',') || !std::getline(parts, w, ',') ||
        std::getline(parts, extra, ','))
      throw std::invalid_argument("--stage-costs: stage " + std::to_string(j) + ": expected F,I,W, got '" + stage +
                                  "'");
    c.stage[j] = {whole(f, "--stage-costs F"), whole(i, "--stage-costs I"), whole(w, "--stage-costs W")};
  }
  if (j != stages)
    throw std::invalid_argument("--stage-costs: " + std::to_string(j) + " stages given, " + std::to_string(stages) +
                                " expected (one a rank, two on V placement)");
}

const char* source_name(synthesis_source s) {
  switch (s) {
    case synthesis_source::heuristic:
      return "the heuristic's own order";
    case synthesis_source::one_f_one_b:
      return "1F1B's order";
    case synthesis_source::zb_h1:
      return "ZB-H1's order";
    case synthesis_source::zb_h2:
      return "ZB-H2's order";
    case synthesis_source::zb_v:
      return "ZB-V's order";
    case synthesis_source::v_half:
      return "V-Half's order";
    case synthesis_source::v_min:
      return "V-Min's order";
    case synthesis_source::none:
      break;
  }
  return "nothing";
}

}  // namespace

CLI::App* add_synth_command(CLI::App& app, synth_options& o) {
  auto* cmd =
      app.add_subcommand("synth",
                         "synthesise a schedule (split backward) for given op costs and a memory limit: the Zero "
                         "Bubble paper's heuristic (one stage a rank) or its V scheduler (--placement v), or a "
                         "handcrafted order where faster");
  cmd->add_option("--ranks,-p", o.ranks, "pipeline ranks (one stage each, two on V placement)")->required();
  cmd->add_option("--microbatches,-m", o.microbatches, "microbatches per step")->required();
  cmd->add_option("--memory", o.memory,
                  "activations a rank may hold, in microbatches of a stage (1F1B needs p; 2p on V placement)")
      ->required();
  cmd->add_option("--placement", o.placement, "one (stage r on rank r) or v (stages r and 2p-1-r on rank r)")
      ->check(CLI::IsMember({"one", "v"}));
  cmd->add_option("--cost", o.costs, "every stage's costs in whole units, e.g. F=2,I=3,W=1,comm=1");
  cmd->add_option("--stage-costs", o.stage_costs,
                  "each stage's F,I,W instead, e.g. 2,3,1/2,3,1/4,5,2 (2p of them on V placement; comm: --cost)");
  cmd->add_option("--activation", o.activation,
                  "memory a microbatch's F stores, in --memory's unit (default 1: --memory counts activations)");
  cmd->add_option("--weight-stash", o.weight_stash,
                  "what of it stays from the microbatch's I until its W (default: all; the Zero Bubble paper's M_W)");
  cmd->add_flag("--heuristic-only", o.heuristic_only,
                "the heuristic's own order even where a handcrafted one is faster");
  return cmd;
}

synth_result synthesise_from(const synth_options& o) {
  synthesis_costs c{};
  parse_uniform(o.costs, c);
  const bool on_v = o.placement == "v";
  if (!o.stage_costs.empty()) parse_stages(o.stage_costs, on_v ? 2 * o.ranks : o.ranks, c);
  c = c.with_memory(o.activation, o.weight_stash < 0 ? o.activation : o.weight_stash);
  const synthesis_placement placement = on_v ? synthesis_placement::v : synthesis_placement::one_stage;
  const synthesised_schedule s = o.heuristic_only
                                     ? synthesise_heuristic(o.ranks, o.microbatches, c, o.memory, placement)
                                     : synthesise(o.ranks, o.microbatches, c, o.memory, placement);
  require_valid(s);
  if (static_cast<long long>(o.ranks) * o.microbatches > (1LL << 20))
    throw std::invalid_argument("ranks * microbatches is too large for synthesis here (at most about a million)");
  const synthesis_report r = s.report();
  std::ostringstream line;
  line.precision(4);
  line << "synthesised for a limit of " << o.memory;
  if (c.activation == 1 && c.weight_stash == 1)
    line << (on_v ? " activations of a stage a rank: " : " activations a rank: ");
  else
    line << " a rank (" << c.activation << " from F, " << c.weight_stash << " of it from I to W): ";
  line << source_name(r.chosen) << ", span " << r.chosen_span << ", bubble rate " << r.chosen_bubble_rate() << ", peak "
       << r.chosen_peak << "; the heuristic's own: span " << r.heuristic_span << ", bubble rate "
       << r.heuristic_bubble_rate() << ", peak " << r.heuristic_peak << "\n";
  if (!o.stage_costs.empty()) line << "(the figures below price every stage as stage 0; the line above prices each)\n";
  const op_costs& z = c.stage[0];
  return {generate(s),
          cost_model{.forward = static_cast<double>(z.forward),
                     .backward = static_cast<double>(z.input + z.weight),
                     .backward_input = static_cast<double>(z.input),
                     .backward_weight = static_cast<double>(z.weight),
                     .comm = static_cast<double>(c.comm)},
          line.str()};
}

}  // namespace ctpipe::explorer
