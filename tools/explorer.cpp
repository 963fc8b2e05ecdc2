#include "explorer.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "hang_report.hpp"
#include "model_file.hpp"
#include "plan_header.hpp"
#include "synth.hpp"

namespace ctpipe::explorer {

std::vector<double> parse_factors(const std::string& spec) {
  std::vector<double> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    double v = 0.0;
    if (!parse_number(item, v) || !(v >= 0.0) || v > 1e6)
      throw std::invalid_argument("--mb-factors: '" + item + "' is not a number from 0 to 1e6");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument("--mb-factors: give at least one factor");
  return out;
}

// --skip FROM:TO[,FROM:TO...]: the crossings of a model's skip connections (bytes 0), in order.
std::vector<crossing> parse_skips(const std::string& spec, int stages) {
  std::vector<crossing> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    double a = 0.0, b = 0.0;
    if (colon == std::string::npos || !parse_number(item.substr(0, colon), a) ||
        !parse_number(item.substr(colon + 1), b) || a != static_cast<int>(a) || b != static_cast<int>(b))
      throw std::invalid_argument("--skip: '" + item + "' is not FROM:TO (two stage numbers)");
    const crossing c{static_cast<int>(a), static_cast<int>(b), 0};
    if (!detail::crossing_in_range(c, stages))
      throw std::invalid_argument("--skip: '" + item + "' must join two stages at least two apart, 0 <= FROM, " +
                                  "FROM + 2 <= TO < " + std::to_string(stages) + " (the stages per chain)");
    out.push_back(c);
  }
  if (out.empty()) throw std::invalid_argument("--skip: give at least one FROM:TO");
  std::sort(out.begin(), out.end(),
            [](const crossing& x, const crossing& y) { return x.from != y.from ? x.from < y.from : x.to < y.to; });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i] == out[i - 1])
      throw std::invalid_argument("--skip: " + std::to_string(out[i].from) + ":" + std::to_string(out[i].to) +
                                  " is given twice");
  return out;
}

double parse_bytes(const std::string& spec) {
  static const std::pair<const char*, double> units[] = {{"TiB", 1099511627776.0},
                                                         {"GiB", 1073741824.0},
                                                         {"MiB", 1048576.0},
                                                         {"KiB", 1024.0},
                                                         {"TB", 1e12},
                                                         {"GB", 1e9},
                                                         {"MB", 1e6},
                                                         {"KB", 1e3},
                                                         {"B", 1.0}};
  std::string number = spec;
  double unit = 1.0;
  for (const auto& [suffix, k] : units) {
    const std::string u = suffix;
    if (spec.size() > u.size() && spec.compare(spec.size() - u.size(), u.size(), u) == 0) {
      number = spec.substr(0, spec.size() - u.size());
      unit = k;
      break;
    }
  }
  double v = 0.0;
  if (!parse_number(number, v) || !(v >= 0.0) || !std::isfinite(v * unit))
    throw std::invalid_argument("--memory: '" + spec + "' is not a size (a number, optionally KiB, MiB, GiB, GB, ...)");
  return v * unit;
}

namespace {
// A JSON value that must be a whole number within int's range (a conversion of anything else is
// undefined behaviour in nlohmann-json: found by the fuzz test).
int json_int(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(ctpipe::detail::max_index)
                               : (v.get<std::int64_t>() >= -ctpipe::detail::max_index &&
                                  v.get<std::int64_t>() <= ctpipe::detail::max_index))
      return static_cast<int>(v.get<std::int64_t>());
  }
  throw format_error("JSON: " + what + " must be a whole number from -2^20 to 2^20");
}
int json_int_or(const nlohmann::json& obj, const char* key, int fallback) {
  return obj.contains(key) ? json_int(obj.at(key), key) : fallback;
}
}  // namespace

dynamic_table read_json(std::istream& in) {
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw format_error(std::string("not valid JSON: ") + e.what());
  }
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key)) throw format_error(std::string("JSON: missing key \"") + key + "\"");
    return j.at(key);
  };
  try {
    const int ranks = json_int(need("ranks"), "ranks"), microbatches = json_int(need("microbatches"), "microbatches");
    const auto& stage_rank = need("stage_rank");
    if (!stage_rank.is_array()) throw format_error("JSON: \"stage_rank\" must be a list of ranks");
    std::vector<int> placement;
    for (const auto& x : stage_rank) placement.push_back(json_int(x, "stage_rank"));
    const auto& programs = need("programs");
    if (ranks < 1 || microbatches < 1 || ranks >= ctpipe::detail::max_index ||
        microbatches >= ctpipe::detail::max_index)
      throw format_error("JSON: ranks and microbatches must be between 1 and 2^20");
    if (static_cast<long long>(placement.size()) * microbatches > max_table_cells)
      throw format_error("JSON: stages x microbatches is too large: at most " + std::to_string(max_table_cells));
    if (!programs.is_array() || static_cast<int>(programs.size()) != ranks)
      throw format_error("JSON: \"programs\" must hold one list per rank (" + std::to_string(ranks) + ")");
    const schedule_info p =
        custom_schedule(ranks, microbatches, json_int_or(j, "chunks", 1), json_int_or(j, "directions", 1));
    dynamic_table t(p, placement);
    if (j.contains("forward_only")) {
      if (!j.at("forward_only").is_boolean()) throw format_error("JSON: \"forward_only\" must be true or false");
      t.params.forward_only = j.at("forward_only").get<bool>();
    }
    if (j.contains("crossings")) {
      const auto& crossings = j.at("crossings");
      if (!crossings.is_array()) throw format_error("JSON: \"crossings\" must be a list of {from, to, bytes}");
      for (const auto& c : crossings) {
        const auto bytes = c.value("bytes", nlohmann::json(0));
        if (!bytes.is_number_unsigned() && !(bytes.is_number_integer() && bytes.get<std::int64_t>() >= 0))
          throw format_error("JSON: a crossing's \"bytes\" must be a whole number >= 0");
        t.crossings.push_back({json_int(c.at("from"), "from"), json_int(c.at("to"), "to"),
                               static_cast<std::size_t>(bytes.get<std::uint64_t>())});
      }
      if (static_cast<long long>(t.crossings.size()) * microbatches > max_table_cells)
        throw format_error("JSON: crossings x microbatches is too large: at most " + std::to_string(max_table_cells));
    }
    for (int r = 0; r < ranks; ++r)
      for (const auto& x : programs[static_cast<std::size_t>(r)]) {
        op_kind k{};
        const auto name = x.at("op").get<std::string>();
        if (!parse_op_name(name, k))
          throw format_error("JSON: rank " + std::to_string(r) + ": unknown op \"" + name + "\"");
        t.push(r, task{k, json_int(x.at("stage"), "stage"), json_int(x.at("mb"), "mb"), json_int_or(x, "peer", -1),
                       x.value("overlapped", false), json_int_or(x, "other", -1)});
      }
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("JSON: ") + e.what());
  }
}

namespace {

// The built-in schedules by the names the explorer, JSON and the tables use.
constexpr const char* schedule_names =
    "naive, gpipe, 1f1b, interleaved, looped_bfs, zb_h1, zb_h2, interleaved_zero_bubble, zb_v, v_min, v_half, "
    "dualpipe_v, dualpipe, pipedream or pipedream_2bw";

// Calls f(schedule) with the built-in schedule `name`; --chunks and --group only where it has them.
template <class F>
void with_schedule(const std::string& name, int p, int m, int v, int g, F&& f) {
  const bool chunked = name == "interleaved" || name == "looped_bfs" || name == "interleaved_zero_bubble";
  if (!chunked && v != 1)
    throw std::invalid_argument("--chunks applies to interleaved, looped_bfs and interleaved_zero_bubble only");
  if (name != "interleaved" && g != 0) throw std::invalid_argument("--group applies to interleaved only");
  if (name == "naive") return f(naive(p, m));
  if (name == "gpipe") return f(gpipe(p, m));
  if (name == "1f1b") return f(one_f_one_b(p, m));
  if (name == "interleaved") return f(interleaved(p, m, v, g));
  if (name == "looped_bfs") return f(looped_bfs(p, m, v));
  if (name == "zb_h1") return f(zb_h1(p, m));
  if (name == "zb_h2") return f(zb_h2(p, m));
  if (name == "interleaved_zero_bubble") return f(interleaved_zero_bubble(p, m, v));
  if (name == "zb_v") return f(zb_v(p, m));
  if (name == "v_min") return f(v_min(p, m));
  if (name == "v_half") return f(v_half(p, m));
  if (name == "dualpipe_v") return f(dualpipe_v(p, m));
  if (name == "dualpipe") return f(dualpipe(p, m));
  if (name == "pipedream") return f(pipedream(p, m));  // m per step: two steps and the drain
  if (name == "pipedream_2bw") return f(pipedream_2bw(p, m));
  throw std::invalid_argument("unknown schedule '" + name + "' (expected " + schedule_names + ")");
}

const cost_model& base_costs(const cost_model& c) { return c; }
const cost_model& base_costs(const microbatch_scaled<cost_model>& c) { return c.base; }

std::string header(const dynamic_table& t, const cost_model& c) {
  std::string s = std::string(t.params.name.view()) + ": ranks " + std::to_string(t.ranks()) + ", microbatches " +
                  std::to_string(t.microbatches()) + ", stages " + std::to_string(t.stages());
  if (t.params.chunks > 1) s += ", chunks " + std::to_string(t.params.chunks);
  if (t.params.group > 0) s += ", group " + std::to_string(t.params.group);
  if (t.params.directions > 1)
    s += ", directions " + std::to_string(t.params.directions) + " (stage " + std::to_string(t.stages() / 2) +
         " + j copies stage j)";
  s += "; costs F=" + ctpipe::detail::format_number(c.forward) + " B=" + ctpipe::detail::format_number(c.backward) +
       " I=" + ctpipe::detail::format_number(c.backward_input) +
       " W=" + ctpipe::detail::format_number(c.backward_weight) +
       " FB=" + (c.overlap >= 0.0 ? ctpipe::detail::format_number(c.overlap) : std::string("F+B")) +
       " comm=" + ctpipe::detail::format_number(c.comm) + "\n";
  return s;
}

template <cost_function Costs>
void print(const dynamic_table& t, const Costs& c, const std::string& format, bool compute_only, std::ostream& out) {
  const auto rep = analyse(t, c);
  if (format == "json") {
    out << to_json(t, rep) << "\n";
  } else if (format == "csv") {
    out << to_csv(t, c, !compute_only);
  } else if (format == "svg") {
    out << to_svg(t, c, rep);
  } else if (format == "trace") {
    out << to_trace(t, c);
  } else {
    out << header(t, base_costs(c)) << timeline_grid(t, c) << figures_text(rep);
  }
}

// Prints under `costs`, or under them scaled per microbatch when factors are given.
void print_with(const dynamic_table& t, const cost_model& costs, const std::vector<double>& factors,
                const std::string& format, bool compute_only, std::ostream& out) {
  if (factors.empty()) return print(t, costs, format, compute_only, out);
  const microbatch_scaled<cost_model> scaled{costs, factors};
  print(t, scaled, format, compute_only, out);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

std::string figure(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string plan_row(int rank, const plan_figures& f) {
  const auto& c = f.choice;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%3d  %-24s %5d x %-3d %6d x %-5d %6d  %-9s %10s %10s %10s %7.3f  %s (rank %d)\n",
                rank, std::string(schedule_name_of(c.schedule)).c_str(), c.ranks, c.replicas, c.microbatches,
                f.microbatch_size, c.chunks, c.recompute ? "yes" : "no", figure(f.step_time).c_str(),
                figure(f.pipeline_time).c_str(), figure(f.allreduce_time).c_str(), f.bubble_fraction,
                human_bytes(f.peak_memory).c_str(), f.peak_rank);
  return buf;
}

std::string plan_header() {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%3s  %-24s %11s %14s %6s  %-9s %10s %10s %10s %7s  %s\n", "#", "schedule",
                "ranks x DP", "mbs x size", "chunks", "recompute", "step", "pipeline", "all-reduce", "bubble",
                "peak memory");
  return buf;
}

int print_plan(const plan_request& q, const plan_result& r, std::ostream& out) {
  out << "plans for " << q.layers.size() << " layers on " << q.cluster.devices << " devices"
      << (q.cluster.memory_bytes > 0 ? " of " + human_bytes(q.cluster.memory_bytes)
                                     : std::string(" (memory unlimited)"))
      << (q.cluster.reserved_bytes > 0 ? " (" + human_bytes(q.cluster.reserved_bytes) + " of it reserved)"
                                       : std::string())
      << ", global batch " << q.global_batch << "\n";
  if (r.best_count > 0) {
    out << plan_header();
    for (int i = 0; i < r.best_count; ++i) out << plan_row(i + 1, r.best[static_cast<std::size_t>(i)]);
  } else {
    out << "no plan fits in " << human_bytes(q.cluster.memory_bytes - q.cluster.reserved_bytes) << " per device"
        << (q.cluster.reserved_bytes > 0 ? " (its memory less the reserve)" : "") << "\n";
  }
  if (r.over_memory_count > 0) {
    out << (r.best_count > 0 ? "faster, but over the memory of a device:\n" : "the fastest, all over the memory:\n")
        << plan_header();
    for (int i = 0; i < r.over_memory_count; ++i) out << plan_row(i + 1, r.over_memory[static_cast<std::size_t>(i)]);
  }
  out << "searched " << r.considered << " plans: " << r.simulated << " simulated, " << r.pruned
      << " left out by their bound, " << r.too_much_memory << " over memory";
  if (r.too_few_layers > 0) out << "; " << r.too_few_layers << " had more stages than layers";
  if (r.too_large > 0) out << "; " << r.too_large << " had tables too large to simulate";
  out << "\n";
  if (r.same_plan > 0)
    out << "  " << r.same_plan << " plans on one rank were the same as "
        << schedule_name_of(one_rank_schedule(q.schedules)) << "'s there\n";
  for (int k = 0; k < planned_schedule_count; ++k)
    for (int rule = 1; rule < param_rule_count; ++rule)
      if (const int n = r.broke_rule[static_cast<std::size_t>(k)][static_cast<std::size_t>(rule)]; n > 0)
        out << "  " << n << " plans of " << schedule_name_of(static_cast<planned_schedule>(k)) << " broke its rule on "
            << param_name(static_cast<param_rule>(rule)) << "\n";
  return r.best_count > 0 ? 0 : 1;
}

// --reserve: bytes (as --memory) or a percentage of the memory; less than the memory.
double parse_reserve(const std::string& spec, double memory) {
  if (memory <= 0.0) throw std::invalid_argument("--reserve needs --memory (a reserve of unlimited memory)");
  double bytes = 0.0;
  if (!spec.empty() && spec.back() == '%') {
    double percent = 0.0;
    if (!parse_number(spec.substr(0, spec.size() - 1), percent) || !(percent >= 0.0) || !(percent < 100.0))
      throw std::invalid_argument("--reserve: '" + spec + "' is not a percentage from 0 to below 100");
    bytes = memory * percent / 100.0;
  } else {
    bytes = parse_bytes(spec);
  }
  if (!(bytes < memory))
    throw std::invalid_argument("--reserve: " + human_bytes(bytes) + " leaves nothing of the " + human_bytes(memory) +
                                " of --memory");
  return bytes;
}

// The names --schedules takes: the planner's.
schedule_set parse_schedules(const std::string& spec) {
  schedule_set set = schedule_set::none();
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool found = false;
    for (int k = 0; k < planned_schedule_count; ++k)
      if (schedule_name_of(static_cast<planned_schedule>(k)) == item) {
        set = set.with(static_cast<planned_schedule>(k));
        found = true;
      }
    if (!found) {
      std::string names;
      for (int k = 0; k < planned_schedule_count; ++k)
        names += (k ? ", " : "") + std::string(schedule_name_of(static_cast<planned_schedule>(k)));
      throw std::invalid_argument("--schedules: unknown schedule '" + item + "' (the planner's: " + names + ")");
    }
  }
  return set;
}

// A table from a file (JSON when it starts with '{', PyTorch's CSV otherwise), - for standard input.
dynamic_table load_table(const std::string& file) {
  if (file == "-") {
    std::stringstream buf;
    buf << std::cin.rdbuf();
    const auto first = buf.str().find_first_not_of(" \t\r\n");
    return first != std::string::npos && buf.str()[first] == '{' ? read_json(buf) : read_csv(buf);
  }
  std::ifstream in(file);
  if (!in) throw format_error("cannot open '" + file + "'");
  const int first = (in >> std::ws).peek();
  return first == '{' ? read_json(in) : read_csv(in);
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"ctpipe: print, check, measure and plan pipeline-parallel schedules", "ctpipe"};
  app.require_subcommand(1);
  std::string kind, format = "text", cost_spec, file, skip_spec;
  int ranks = 0, microbatches = 0, chunks = 1, group = 0;
  bool compute_only = false;
  auto* show = app.add_subcommand("show", "print a schedule's table and its figures");
  show->add_option("schedule", kind, schedule_names)->required();
  show->add_option("--ranks,-p", ranks, "pipeline ranks")->required();
  show->add_option("--microbatches,-m", microbatches, "microbatches per step")->required();
  show->add_option("--chunks,-v", chunks, "model chunks per rank (interleaved, looped_bfs, interleaved_zero_bubble)");
  show->add_option("--group,-g", group, "microbatch group size (interleaved; default ranks)");
  show->add_option("--skip", skip_spec,
                   "skip connections across stages, FROM:TO[,FROM:TO...]: their skip messages go straight "
                   "between the two ranks");
  auto* check_cmd = app.add_subcommand("check", "verify and measure a schedule read from CSV (or the explorer's JSON)");
  check_cmd->add_option("file", file, "the file, - for standard input")->required();
  std::string factor_spec;
  synth_options synth_request;
  CLI::App* synth_cmd = add_synth_command(app, synth_request);  // docs/schedules.md, "Synthesis"
  for (auto* sub : {show, check_cmd}) {
    sub->add_option("--cost", cost_spec,
                    "per-op costs of one stage, e.g. F=1,B=2,I=1,W=1,FB=2.5,comm=0 (FB: an overlapped F&B pair)");
    sub->add_option("--mb-factors", factor_spec,
                    "uneven work: microbatch i's ops cost factor i times the above, e.g. 1,1.5,0.5 (1 past the list)");
    sub->add_option("--format,-f", format,
                    "text, json, csv, svg (a timeline picture) or trace (Chrome trace events, for Perfetto)")
        ->check(CLI::IsMember({"text", "json", "csv", "svg", "trace"}));
    sub->add_flag("--compute-only", compute_only, "csv: leave out sends and receives");
  }
  synth_cmd->add_option("--format,-f", format, "text, json, csv, svg or trace, as for show")
      ->check(CLI::IsMember({"text", "json", "csv", "svg", "trace"}));
  synth_cmd->add_flag("--compute-only", compute_only, "csv: leave out sends and receives");
  // What really ran, against its replay.
  auto* compare_cmd = app.add_subcommand(
      "compare",
      "compare a measured step (CSV: rank,position,start,end) with its replay, and name the tasks that ran late");
  std::string measured_path, compare_format = "text";
  int top = 10;
  compare_cmd->add_option("table", file, "the table it ran (CSV or the explorer's JSON, with sends and receives)")
      ->required();
  compare_cmd->add_option("measured", measured_path, "the measured step (CSV)")->required();
  compare_cmd->add_option("--format,-f", compare_format, "text, svg (as it ran, with the replay) or trace")
      ->check(CLI::IsMember({"text", "svg", "trace"}));
  compare_cmd->add_option("--top", top, "late tasks to name (default 10)")->check(CLI::Range(0, 100000));
  std::string hang_dir, hang_format = "text";
  CLI::App* hang_cmd = add_hang_report_command(app, hang_dir, hang_format);  // docs/hang_report.md
  // The planner.
  auto* plan_cmd = app.add_subcommand("plan",
                                      "choose the schedule, pipeline depth, data-parallel width, microbatches, "
                                      "chunks and recomputation for a model file, before anything runs");
  std::string model_path, memory_spec = "0", schedules_spec, reserve_spec;
  plan_request q{};
  q.cluster.devices = 0;
  q.global_batch = 0;
  bool no_recompute = false;
  plan_cmd->add_option("model", model_path, "the model file (JSON or CSV, a row per layer), - for standard input")
      ->required();
  plan_cmd->add_option("--devices,-n", q.cluster.devices, "devices: ranks x replicas")->required();
  plan_cmd->add_option("--batch,-b", q.global_batch, "the global batch, in samples per step")->required();
  plan_cmd->add_option("--memory", memory_spec, "memory per device, e.g. 80GiB (default: unlimited)");
  plan_cmd->add_option("--reserve", reserve_spec,
                       "memory per device kept out of the plans' reach, e.g. 2GiB or 10% (of --memory)");
  plan_cmd->add_option("--latency", q.cluster.latency, "time per message (pipeline and all-reduce)");
  plan_cmd->add_option("--bandwidth", q.cluster.activation_bandwidth,
                       "bytes per unit of time between pipeline neighbours (default: free)");
  plan_cmd->add_option("--allreduce-bandwidth", q.cluster.allreduce_bandwidth,
                       "bytes per unit of time of the data-parallel all-reduce (default: free)");
  plan_cmd->add_option("--state-factor", q.state_factor,
                       "bytes held per parameter byte: weights, gradients, optimizer state (default 4)");
  plan_cmd->add_option("--max-microbatches", q.max_microbatches, "per replica (default 256)");
  plan_cmd->add_option("--max-chunks", q.max_chunks,
                       "for interleaved, looped_bfs, interleaved_zero_bubble (default 4)");
  plan_cmd->add_option("--schedules", schedules_spec, "the schedules to choose among, comma-separated (default: all)");
  plan_cmd->add_flag("--no-recompute", no_recompute, "do not consider recomputing activations");
  plan_cmd->add_option("--top", q.keep, "plans to list (1 to 8, default 5)");
  plan_cmd->add_option("--mb-factors", factor_spec, "uneven work: microbatch i costs factor[i % n] times the figures");
  plan_cmd->add_option("--ranks,-p", q.ranks, "only plans of this pipeline depth");
  plan_cmd->add_option("--microbatches,-m", q.microbatches, "only plans of this many microbatches per replica");
  std::string header_path, header_namespace = "ctpipe_plan";
  plan_cmd->add_option("--emit-header", header_path,
                       "write the best plan as a C++ header a program includes to run it (docs/planner.md)");
  plan_cmd->add_option("--namespace", header_namespace, "the emitted header's namespace (default ctpipe_plan)");
  std::vector<std::string> argv(args.rbegin(), args.rend());
  try {
    app.parse(argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    err << "ctpipe: " << (what.empty() ? "bad arguments" : what) << " (see ctpipe --help)\n";
    return 2;
  }
  try {
    const std::vector<double> factors = factor_spec.empty() ? std::vector<double>{} : parse_factors(factor_spec);
    if (plan_cmd->parsed()) {
      if (q.cluster.devices < 1 || q.cluster.devices > 4096)
        throw std::invalid_argument("--devices must be from 1 to 4096");
      if (q.global_batch < 1 || q.global_batch > 1 << 24)
        throw std::invalid_argument("--batch must be from 1 to 16777216");
      if (q.keep < 1 || q.keep > plan_list_size) throw std::invalid_argument("--top must be from 1 to 8");
      if (q.max_microbatches < 1 || q.max_microbatches > 4096)
        throw std::invalid_argument("--max-microbatches must be from 1 to 4096");
      if (q.max_chunks < 2 || q.max_chunks > 16) throw std::invalid_argument("--max-chunks must be from 2 to 16");
      if (q.ranks < 0 || q.ranks > q.cluster.devices)
        throw std::invalid_argument("--ranks must be from 1 to --devices (" + std::to_string(q.cluster.devices) + ")");
      if (q.microbatches < 0 || q.microbatches > q.global_batch)
        throw std::invalid_argument("--microbatches must be from 1 to --batch (" + std::to_string(q.global_batch) +
                                    ")");
      if (!namespace_name_ok(header_namespace))
        throw std::invalid_argument(
            "--namespace must be a C++ name (letters, digits and '_', parts joined by ::), not '" + header_namespace +
            "'");
      for (const auto& [name, v] : {std::pair<const char*, double>{"--latency", q.cluster.latency},
                                    {"--bandwidth", q.cluster.activation_bandwidth},
                                    {"--allreduce-bandwidth", q.cluster.allreduce_bandwidth},
                                    {"--state-factor", q.state_factor}})
        if (!(v >= 0.0) || !std::isfinite(v)) throw std::invalid_argument(std::string(name) + " must be a number >= 0");
      q.cluster.memory_bytes = parse_bytes(memory_spec);
      if (!reserve_spec.empty()) q.cluster.reserved_bytes = parse_reserve(reserve_spec, q.cluster.memory_bytes);
      if (!schedules_spec.empty()) q.schedules = parse_schedules(schedules_spec);
      q.recompute = !no_recompute;
      model_file model;
      if (model_path == "-") {
        model = read_model(std::cin);
      } else {
        std::ifstream in(model_path);
        if (!in) throw format_error("cannot open '" + model_path + "'");
        model = read_model(in);
      }
      q.layers = model.layers;
      q.input_bytes = model.input_bytes;
      q.microbatch_factors = factors;
      const plan_result r = plan(q);
      const int rc = print_plan(q, r, out);
      if (!header_path.empty()) {
        if (r.best_count == 0) throw std::invalid_argument("--emit-header: no plan fits, so no header was written");
        std::string command = "ctpipe";
        for (const std::string& a : args) command += " " + a;
        std::ofstream h(header_path);
        h << plan_header_text(q, r.top(), header_namespace, "`" + command + "`");
        h.close();
        if (!h) throw std::invalid_argument("--emit-header: cannot write '" + header_path + "'");
        out << "wrote the best plan to " << header_path << " (namespace " << header_namespace << ")\n";
      }
      return rc;
    }
    const cost_model costs = cost_spec.empty() ? cost_model{} : parse_costs(cost_spec);
    if (show->parsed()) {
      with_schedule(kind, ranks, microbatches, chunks, group, [&](const auto& s) {
        require_valid(s);
        // Keep the explorer's own memory bounded: a table this size prints pages, not a figure.
        if (static_cast<long long>(s.info().stages()) * s.info().microbatches * 6 > (1LL << 26))
          throw std::invalid_argument(
              "ranks * chunks * microbatches is too large for the explorer (at most about 10 million ops)");
        const int chain = s.info().stages() / s.info().directions;
        const std::vector<crossing> skips = skip_spec.empty() ? std::vector<crossing>{} : parse_skips(skip_spec, chain);
        print_with(generate(s, skips), costs, factors, format, compute_only, out);
      });
      return 0;
    }
    if (synth_cmd->parsed()) {
      const synth_result r = synthesise_from(synth_request);
      if (format == "text") out << r.summary;
      print_with(r.table, r.costs, factors, format, compute_only, out);
      return 0;
    }
    if (hang_cmd->parsed()) {
      hang_report(hang_dir, hang_format, out);
      return 0;
    }
    if (compare_cmd->parsed()) {
      const dynamic_table t = load_table(file);
      if (const auto v = verify(t); !v.ok()) throw format_error("the table breaks a rule: " + message(v));
      std::ifstream in(measured_path);
      if (!in) throw format_error("cannot open '" + measured_path + "'");
      const measured_step m = read_measured_csv(in);
      if (compare_format == "svg")
        out << measured_svg(t, m);
      else if (compare_format == "trace")
        out << measured_trace(t, m);
      else
        out << comparison_text(compare_measured(t, m), top);
      return 0;
    }
    const dynamic_table t = load_table(file);
    if (const auto v = verify(t); !v.ok()) {
      out << "invalid: " << message(v) << "\n";
      return 1;
    }
    print_with(t, costs, factors, format, compute_only, out);
    return 0;
  } catch (const std::exception& e) {
    err << "ctpipe: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace ctpipe::explorer
