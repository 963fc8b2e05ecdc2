#include "plan_header.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace ctpipe::explorer {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A synthesised plan's costs as a C++ expression: each stage's F, I, W and the latency.
std::string costs_expression(const plan_choice& c) {
  std::string e = "[] {\n  ctpipe::synthesis_costs c{};\n  c.comm = " + std::to_string(c.costs.comm) + ";\n";
  for (int st = 0; st < c.ranks && st < synthesis_costs::max_stages; ++st) {
    const op_costs& o = c.costs.stage[st];
    e += "  c.stage[" + std::to_string(st) + "] = {" + std::to_string(o.forward) + ", " + std::to_string(o.input) +
         ", " + std::to_string(o.weight) + "};\n";
  }
  return e + "  return c;\n}()";
}

// The schedule's C++ spelling, as ctpipe::schedule_of writes it.
std::string schedule_expression(const plan_choice& c) {
  if (c.schedule == planned_schedule::synthesised)
    return "ctpipe::synthesise_heuristic(" + std::to_string(c.ranks) + ", " + std::to_string(c.microbatches) +
           ", synthesis_costs, " + std::to_string(c.memory_limit) + ")";
  const std::string name = c.schedule == planned_schedule::one_f_one_b ? std::string("one_f_one_b")
                                                                       : std::string(schedule_name_of(c.schedule));
  std::string e = "ctpipe::" + name + "(" + std::to_string(c.ranks) + ", " + std::to_string(c.microbatches);
  if (takes_chunks(c.schedule)) e += ", " + std::to_string(c.chunks);
  return e + ")";
}

}  // namespace

bool namespace_name_ok(const std::string& name) {
  std::size_t at = 0;
  while (true) {
    const std::size_t end = name.find("::", at);
    const std::string part = name.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (part.empty() || (part[0] >= '0' && part[0] <= '9')) return false;
    for (const char ch : part)
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'))
        return false;
    if (end == std::string::npos) return true;
    at = end + 2;
  }
}

std::string plan_header_text(const plan_request& q, const plan_figures& f, const std::string& ns,
                             const std::string& source) {
  const plan_choice& c = f.choice;
  const int stages = detail::model_stages_of(c);
  std::vector<int> first(static_cast<std::size_t>(stages) + 1);
  stage_split(q, c, first.data());
  std::string bounds;
  for (const int b : first) bounds += ", " + std::to_string(b);
  const std::string layers = std::to_string(q.layers.size());
  std::string h;
  h += "// Written by `ctpipe plan --emit-header` from " + source + ":\n";
  h += "// the best plan it found, " + std::string(schedule_name_of(c.schedule)) + " on " + std::to_string(c.ranks) +
       " rank(s) x " + std::to_string(c.replicas) + " replica(s), " + std::to_string(c.microbatches) +
       " microbatches of " + std::to_string(f.microbatch_size) + " sample(s) a replica and step" +
       (takes_chunks(c.schedule) ? ", " + std::to_string(c.chunks) + " chunks" : std::string()) +
       (c.recompute ? ", recomputing" : "") + ";\n";
  h += "// predicted step " + number(f.step_time) + " (pipeline " + number(f.pipeline_time) + ", all-reduce " +
       number(f.allreduce_time) + ", bubble " + number(f.bubble_fraction) + "), in the model file's time unit.\n";
  h += "// Its stages split the " + layers +
       " layers by the model file's times, the loss counted where the file counts it. To run it:\n";
  h += "//\n";
  h += "//   constexpr auto stages = " + ns + "::stages<Model>();\n";
  h += "//   constexpr auto table = ctpipe::make_table<" + ns +
       "::schedule, ctpipe::model_crossings<Model, stages>()>();\n";
  h += "//   ctpipe::host_executor<table, Model, stages, Loss> exec(model, loss);  // (or any executor)\n";
  h += "//\n";
  h += "// with " + ns + "::microbatches microbatches of " + ns + "::microbatch_size samples a step";
  h += c.replicas > 1 ? ", on each of " + ns + "::replicas replicas.\n" : ".\n";
  h += "#pragma once\n\n";
  h += "#include <ctpipe/model/partition.hpp>  // stage_bounds\n";
  h += "#include <ctpipe/schedules.hpp>\n\n";
  h += "namespace " + ns + " {\n\n";
  h += "inline constexpr int ranks = " + std::to_string(c.ranks) + ";  // pipeline depth\n";
  h += "inline constexpr int replicas = " + std::to_string(c.replicas) + ";  // data-parallel width\n";
  h += "inline constexpr int microbatches = " + std::to_string(c.microbatches) + ";  // per replica and step\n";
  h += "inline constexpr int microbatch_size = " + std::to_string(f.microbatch_size) + ";  // samples\n";
  h += "inline constexpr int chunks = " + std::to_string(c.chunks) + ";  // stages per rank\n";
  h += "inline constexpr bool recompute = " + std::string(c.recompute ? "true" : "false") + ";\n";
  h += "inline constexpr int layers = " + layers + ";  // the model file's\n";
  h += "inline constexpr double predicted_step = " + number(f.step_time) + ";\n";
  if (c.schedule == planned_schedule::synthesised)
    h += "// Synthesised for the stages' costs (each op in thousandths of the slowest stage's F + I + W) and\n"
         "// room for " +
         std::to_string(c.memory_limit) +
         " activations a rank.\n"
         "inline constexpr ctpipe::synthesis_costs synthesis_costs = " +
         costs_expression(c) + ";\n";
  h += "inline constexpr auto schedule = " + schedule_expression(c) + ";\n\n";
  h += "/// The stage plan: the layers the planner put on each stage.\n";
  h += "template <ctpipe::model_type Model>\n";
  h += "consteval auto stages() {\n";
  h += "  static_assert(Model::size == layers, \"" + ns + "::stages: this plan splits a model of " + layers +
       " layers (its model file's), and Model has another number\");\n";
  h += "  return ctpipe::stage_bounds<Model" + bounds + ">()" + (c.recompute ? ".recompute_all()" : "") + ";\n";
  h += "}\n\n";
  h += "}  // namespace " + ns + "\n";
  return h;
}

}  // namespace ctpipe::explorer
