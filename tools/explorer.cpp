#include "explorer.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

namespace ctpipe::explorer {

cost_model parse_costs(const std::string& spec) {
  cost_model c{};
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("--cost: '" + item + "' is not KEY=VALUE (keys F, B, I, W, FB, comm)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    double v = 0.0;
    std::size_t used = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size() || value.empty() || !(v >= 0.0) || v > 1e12)
      throw std::invalid_argument("--cost: " + key + " must be a number >= 0, not '" + value + "'");
    if (key == "F")
      c.forward = v;
    else if (key == "B")
      c.backward = v;
    else if (key == "I")
      c.backward_input = v;
    else if (key == "W")
      c.backward_weight = v;
    else if (key == "FB")
      c.overlap = v;
    else if (key == "comm")
      c.comm = v;
    else
      throw std::invalid_argument("--cost: unknown key '" + key + "' (keys F, B, I, W, FB, comm)");
  }
  return c;
}

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
    const int ranks = need("ranks").get<int>(), microbatches = need("microbatches").get<int>();
    const auto placement = need("stage_rank").get<std::vector<int>>();
    const auto& programs = need("programs");
    if (ranks < 1 || microbatches < 1 || ranks >= max_index || microbatches >= max_index)
      throw format_error("JSON: ranks and microbatches must be between 1 and 2^20");
    if (!programs.is_array() || static_cast<int>(programs.size()) != ranks)
      throw format_error("JSON: \"programs\" must hold one list per rank (" + std::to_string(ranks) + ")");
    const schedule_info p = custom_schedule(ranks, microbatches, j.value("chunks", 1), j.value("directions", 1));
    dynamic_table t(p, placement);
    for (int r = 0; r < ranks; ++r)
      for (const auto& x : programs[static_cast<std::size_t>(r)]) {
        op_kind k{};
        const auto name = x.at("op").get<std::string>();
        if (!parse_op_name(name, k))
          throw format_error("JSON: rank " + std::to_string(r) + ": unknown op \"" + name + "\"");
        t.push(r, task{k, x.at("stage").get<int>(), x.at("mb").get<int>(), x.value("peer", -1),
                       x.value("overlapped", false)});
      }
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("JSON: ") + e.what());
  }
}

namespace {

// The built-in schedules by the names the explorer, JSON and the tables use.
constexpr const char* schedule_names =
    "naive, gpipe, 1f1b, interleaved, looped_bfs, zb_h1, zb_h2, interleaved_zero_bubble, zb_v, dualpipe_v or "
    "dualpipe";

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
  if (name == "dualpipe_v") return f(dualpipe_v(p, m));
  if (name == "dualpipe") return f(dualpipe(p, m));
  throw std::invalid_argument("unknown schedule '" + name + "' (expected " + schedule_names + ")");
}

std::string header(const dynamic_table& t, const cost_model& c) {
  std::string s = std::string(t.params.name.view()) + ": ranks " + std::to_string(t.ranks()) + ", microbatches " +
                  std::to_string(t.microbatches()) + ", stages " + std::to_string(t.stages());
  if (t.params.chunks > 1) s += ", chunks " + std::to_string(t.params.chunks);
  if (t.params.group > 0) s += ", group " + std::to_string(t.params.group);
  if (t.params.directions > 1)
    s += ", directions " + std::to_string(t.params.directions) + " (stage " + std::to_string(t.stages() / 2) +
         " + j copies stage j)";
  s += "; costs F=" + format_number(c.forward) + " B=" + format_number(c.backward) +
       " I=" + format_number(c.backward_input) + " W=" + format_number(c.backward_weight) +
       " FB=" + (c.overlap >= 0.0 ? format_number(c.overlap) : std::string("F+B")) + " comm=" + format_number(c.comm) +
       "\n";
  return s;
}

void print(const dynamic_table& t, const cost_model& c, const std::string& format, bool compute_only,
           std::ostream& out) {
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
    out << header(t, c) << timeline_grid(t, c) << figures_text(rep);
  }
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"ctpipe: print, check and measure pipeline-parallel schedules", "ctpipe"};
  app.require_subcommand(1);
  std::string kind, format = "text", cost_spec, file;
  int ranks = 0, microbatches = 0, chunks = 1, group = 0;
  bool compute_only = false;
  auto* show = app.add_subcommand("show", "print a schedule's table and its figures");
  show->add_option("schedule", kind, schedule_names)->required();
  show->add_option("--ranks,-p", ranks, "pipeline ranks")->required();
  show->add_option("--microbatches,-m", microbatches, "microbatches per step")->required();
  show->add_option("--chunks,-v", chunks, "model chunks per rank (interleaved, looped_bfs, interleaved_zero_bubble)");
  show->add_option("--group,-g", group, "microbatch group size (interleaved; default ranks)");
  auto* check_cmd = app.add_subcommand("check", "verify and measure a schedule read from CSV (or the explorer's JSON)");
  check_cmd->add_option("file", file, "the file, - for standard input")->required();
  for (auto* sub : {show, check_cmd}) {
    sub->add_option("--cost", cost_spec,
                    "per-op costs of one stage, e.g. F=1,B=2,I=1,W=1,FB=2.5,comm=0 (FB: an overlapped F&B pair)");
    sub->add_option("--format,-f", format,
                    "text, json, csv, svg (a timeline picture) or trace (Chrome trace events, for Perfetto)")
        ->check(CLI::IsMember({"text", "json", "csv", "svg", "trace"}));
    sub->add_flag("--compute-only", compute_only, "csv: leave out sends and receives");
  }
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
    const cost_model costs = cost_spec.empty() ? cost_model{} : parse_costs(cost_spec);
    if (show->parsed()) {
      with_schedule(kind, ranks, microbatches, chunks, group, [&](const auto& s) {
        require_valid(s);
        // Keep the explorer's own memory bounded: a table this size prints pages, not a figure.
        if (static_cast<long long>(s.info().stages()) * s.info().microbatches * 6 > (1LL << 26))
          throw std::invalid_argument(
              "ranks * chunks * microbatches is too large for the explorer (at most about 10 million ops)");
        print(generate(s), costs, format, compute_only, out);
      });
      return 0;
    }
    dynamic_table t;
    if (file == "-") {
      std::stringstream buf;
      buf << std::cin.rdbuf();
      t = buf.str().find_first_not_of(" \t\r\n") != std::string::npos &&
                  buf.str()[buf.str().find_first_not_of(" \t\r\n")] == '{'
              ? read_json(buf)
              : read_csv(buf);
    } else {
      std::ifstream in(file);
      if (!in) throw format_error("cannot open '" + file + "'");
      const int first = (in >> std::ws).peek();
      t = first == '{' ? read_json(in) : read_csv(in);
    }
    if (const auto v = verify(t); !v.ok()) {
      out << "invalid: " << message(v) << "\n";
      return 1;
    }
    print(t, costs, format, compute_only, out);
    return 0;
  } catch (const std::exception& e) {
    err << "ctpipe: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace ctpipe::explorer
