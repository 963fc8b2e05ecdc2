#include "hang_report.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <vector>

#include <ctpipe/exec/detail/hang_record.hpp>  // hang_live, the state and event names
#include <ctpipe/exec/grid.hpp>
#include <ctpipe/schedules.hpp>

#include "explorer.hpp"

namespace ctpipe::explorer {
namespace {

namespace fs = std::filesystem;

// What one process left: its report (on an event) and its live record (as it ran).
struct process_files {
  std::optional<nlohmann::json> report;
  std::optional<std::array<std::int64_t, 8>> live;
};

// Where a process stands in the incident's step, and what that makes it.
enum class kind { waits, ends, threw, crashed, hangs, died, left, behind, stopped, missing, done };

struct standing {
  int process = 0, rank = 0, replica = 0;
  kind k = kind::missing;
  long step = -1;
  int pass = 0, position = -1, peer = -1, signal = 0;
  long elapsed_ms = -1;
  std::string event, state, text;
  int peer_position = -1;  // a wait's counterpart in the peer's program (its send), or -1
};

std::string signal_name(int s) {
  switch (s) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGABRT:
      return "SIGABRT";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    default:
      return "signal " + std::to_string(s);
  }
}

std::string task_words(const task& t) {
  std::string s(op_name(t.op));
  s += " stage " + std::to_string(t.stage) + " microbatch " + std::to_string(t.microbatch);
  if (is_skip(t.op)) s += (is_send(t.op) ? " to stage " : " from stage ") + std::to_string(t.other);
  return s;
}

// The send that matches receive `r` (the same message, from the far stage), in `program`.
int counterpart(std::span<const task> program, const task& r) {
  op_kind op{};
  int stage = r.stage, other = -1;
  switch (r.op) {
    case op_kind::recv_forward:
      op = op_kind::send_forward, stage = r.stage - 1;
      break;
    case op_kind::recv_backward:
      op = op_kind::send_backward, stage = r.stage + 1;
      break;
    case op_kind::recv_skip_forward:
      op = op_kind::send_skip_forward, stage = r.other, other = r.stage;
      break;
    case op_kind::recv_skip_backward:
      op = op_kind::send_skip_backward, stage = r.other, other = r.stage;
      break;
    default:
      return -1;
  }
  for (std::size_t i = 0; i < program.size(); ++i) {
    const task& t = program[i];
    if (t.op == op && t.stage == stage && t.microbatch == r.microbatch && (other < 0 || t.other == other))
      return static_cast<int>(i);
  }
  return -1;
}

dynamic_table table_of(const nlohmann::json& j, const std::string& file) {
  if (!j.contains("table") || !j.at("table").is_object())
    throw format_error(file + ": no \"table\" (a report written before the executor knew its table?)");
  std::stringstream s(j.at("table").dump());
  return read_json(s);
}

int int_of(const nlohmann::json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || !j.at(key).is_number_integer())
    throw format_error(file + ": \"" + key + "\" is missing or not a whole number");
  return j.at(key).get<int>();
}

// The table's replay (unit costs) as Chrome trace events, a process per process, each task marked
// as the report found it: ran, never completed (the cause), waiting (a wait's task), not reached.
template <class TableFor, class Why, class Unknown>
std::string hang_trace(const std::vector<standing>& all, TableFor&& table_for, int cause, Why&& why,
                       Unknown&& unknown) {
  nlohmann::json events = nlohmann::json::array();
  for (const standing& s : all) {
    const dynamic_table* t = table_for(s);
    if (!t || s.rank >= t->ranks()) continue;
    double makespan = 0.0;
    const auto tl = detail::simulate_timeline(*t, cost_model{}, makespan);
    const std::string name = "process " + std::to_string(s.process) + " (rank " + std::to_string(s.rank) +
                             ", replica " + std::to_string(s.replica) + ")";
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", s.process}, {"args", {{"name", name}}}});
    for (int tid : {0, 1})
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", s.process},
                        {"tid", tid},
                        {"args", {{"name", tid == 0 ? "compute" : "send/receive"}}}});
    const auto program = t->program(s.rank);
    const auto r = static_cast<std::size_t>(s.rank);
    for (std::size_t i = 0; i < program.size(); ++i) {
      const task& x = program[i];
      const int at = static_cast<int>(i);
      const std::string state = unknown(s)           ? "unknown"
                                : at < s.position    ? "ran"
                                : at > s.position    ? "not reached"
                                : s.process == cause ? "never completed"
                                                     : "waiting here";
      nlohmann::json e = {
          {"name", std::string(op_name(x.op)) + " s" + std::to_string(x.stage) + " mb" + std::to_string(x.microbatch)},
          {"cat", state},
          {"pid", s.process},
          {"tid", is_comm(x.op) ? 1 : 0},
          {"ts", tl.start[r][i] * 1000.0},
          {"args", {{"position", at}, {"state", state}}}};
      if (is_comm(x.op)) {
        e["ph"] = "i";
        e["s"] = "t";
      } else {
        e["ph"] = "X";
        e["dur"] = (tl.end[r][i] - tl.start[r][i]) * 1000.0;
      }
      if (state == "never completed" || state == "waiting here")
        e["cname"] = state == "never completed" ? "terrible" : "bad";
      events.push_back(e);
      if (at == s.position)
        events.push_back({{"name", s.process == cause ? "never completed: " + why(s) : why(s)},
                          {"ph", "i"},
                          {"s", "p"},
                          {"pid", s.process},
                          {"tid", is_comm(x.op) ? 1 : 0},
                          {"ts", tl.start[r][i] * 1000.0}});
    }
  }
  return nlohmann::json{{"displayTimeUnit", "ms"}, {"traceEvents", events}}.dump() + "\n";
}

}  // namespace

CLI::App* add_hang_report_command(CLI::App& app, std::string& dir, std::string& format) {
  CLI::App* c = app.add_subcommand("hang-report",
                                   "name the first task that never completed, from the files a job's processes left");
  c->add_option("dir", dir, "the folder (CTPIPE_REPORT_DIR)")->required();
  c->add_option("--format,-f", format, "text, json, or trace (the table's replay, each task marked)")
      ->check(CLI::IsMember({"text", "json", "trace"}));
  return c;
}

void hang_report(const std::string& dir, const std::string& format, std::ostream& out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw format_error("hang-report: '" + dir + "' is not a folder");
  std::map<int, process_files> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    int p = -1;
    char tail[8] = {};
    if (std::sscanf(name.c_str(), "process-%d.%7s", &p, tail) != 2 || p < 0) continue;
    const std::string ext = tail;
    if (ext == "json") {
      std::ifstream in(e.path());
      nlohmann::json j;
      try {
        in >> j;
      } catch (const std::exception& x) {
        throw format_error("hang-report: " + name + " is not valid JSON: " + x.what());
      }
      if (!j.is_object() || !j.contains("ctpipe_hang_report"))
        throw format_error("hang-report: " + name + " is not a ctpipe hang report");
      files[p].report = std::move(j);
    } else if (ext == "live") {
      std::ifstream in(e.path(), std::ios::binary);
      std::array<std::int64_t, 8> w{};
      in.read(reinterpret_cast<char*>(w.data()), sizeof(w));
      if (!in || w[0] != ctpipe::detail::hang_live_magic)
        throw format_error("hang-report: " + name + " is not a ctpipe live record (or not of this machine's kind)");
      files[p].live = w;
    }
  }
  if (ec) throw format_error("hang-report: cannot read '" + dir + "': " + ec.message());
  const auto first =
      std::find_if(files.begin(), files.end(), [](const auto& f) { return f.second.report.has_value(); });
  if (first == files.end())
    throw format_error("hang-report: no report (process-N.json) in '" + dir +
                       "': did the processes run with CTPIPE_REPORT_DIR (or options::report_dir) set to it?");
  const std::string first_name = "process-" + std::to_string(first->first) + ".json";
  const nlohmann::json& j0 = *first->second.report;
  const int processes = int_of(j0, "processes", first_name), ranks = int_of(j0, "ranks", first_name),
            replicas = int_of(j0, "replicas", first_name);
  if (processes < 1 || ranks < 1 || replicas < 1 || processes != ranks * replicas)
    throw format_error("hang-report: " + first_name + ": processes must be ranks x replicas");
  std::array<std::optional<dynamic_table>, 2> tables;
  for (auto& [p, f] : files) {
    const std::string name = "process-" + std::to_string(p) + ".json";
    if (p >= processes)
      throw format_error("hang-report: " + name.substr(0, name.size() - 5) + " is not of this job's " +
                         std::to_string(processes) + " processes (a folder of several jobs? give each its own)");
    if (!f.report) continue;
    if (int_of(*f.report, "processes", name) != processes || int_of(*f.report, "ranks", name) != ranks)
      throw format_error("hang-report: " + name + " and " + first_name + " are of different jobs");
    const int pass = f.report->value("pass", "step") == "forward" ? 1 : 0;
    if (!tables[static_cast<std::size_t>(pass)] && f.report->contains("table") && !f.report->at("table").is_null())
      tables[static_cast<std::size_t>(pass)] = table_of(*f.report, name);
  }
  // Each process's standing, from its report where that is of its last step, else its live record.
  std::vector<standing> all(static_cast<std::size_t>(processes));
  long incident = -1;
  for (int p = 0; p < processes; ++p) {
    standing& s = all[static_cast<std::size_t>(p)];
    const place w = place_of(p, ranks, replicas);
    s.process = p, s.rank = w.rank, s.replica = w.replica;
    const auto it = files.find(p);
    if (it == files.end()) continue;
    const process_files& f = it->second;
    const long live_step = f.live ? static_cast<long>((*f.live)[1]) : -1;
    const long report_step = f.report ? f.report->value("step", -1L) : -1;
    if (f.report && report_step >= live_step) {
      const nlohmann::json& j = *f.report;
      s.step = report_step;
      s.pass = j.value("pass", "step") == "forward" ? 1 : 0;
      s.position = j.value("position", -1), s.peer = j.value("peer", -1), s.signal = j.value("signal", 0);
      s.elapsed_ms = j.value("elapsed_ms", -1L);
      s.event = j.value("event", ""), s.state = j.value("state", ""), s.text = j.value("text", "");
    } else if (f.live) {
      const auto& l = *f.live;
      s.step = live_step, s.pass = static_cast<int>(l[2]), s.position = static_cast<int>(l[3]);
      const auto st = static_cast<std::size_t>(l[4]);
      s.state = st < ctpipe::detail::hang_state_names.size() ? std::string(ctpipe::detail::hang_state_names[st]) : "";
      s.peer = static_cast<int>(l[5]);
    }
    incident = std::max(incident, s.step);
  }
  // What each one is.
  for (standing& s : all) {
    const auto it = files.find(s.process);
    const bool reported = it != files.end() && it->second.report && s.event != "";
    if (s.step < 0)
      s.k = kind::missing;
    else if (s.event == "exit")
      s.k = kind::left;
    else if (s.event == "failure")
      s.k = kind::threw;
    else if (s.step < incident || s.state == "between_steps")
      s.k = s.step < incident ? kind::behind : kind::done;
    else if (s.event == "stopped")
      s.k = kind::stopped;
    else if (s.state == "receiving" || s.state == "sending")
      s.k = kind::waits;
    else if (s.state == "ending_step")
      s.k = kind::ends;
    else if (!reported)
      s.k = kind::died;
    else if (s.event == "signal" && (s.signal == SIGSEGV || s.signal == SIGBUS || s.signal == SIGFPE ||
                                     s.signal == SIGILL || s.signal == SIGABRT))
      s.k = kind::crashed;
    else
      s.k = kind::hangs;
    if (s.k == kind::waits && s.state == "receiving" && s.peer >= 0 && s.peer < processes && s.position >= 0) {
      const auto& t = tables[static_cast<std::size_t>(s.pass)];
      if (t && s.rank < t->ranks() && static_cast<std::size_t>(s.position) < t->program(s.rank).size()) {
        const int peer_rank = all[static_cast<std::size_t>(s.peer)].rank;
        s.peer_position = counterpart(t->program(peer_rank), t->program(s.rank)[static_cast<std::size_t>(s.position)]);
      }
    }
  }
  // Follow the waits to the processes that hold everyone up.
  std::vector<int> reached(static_cast<std::size_t>(processes), 0);
  std::vector<int> cycle;
  for (const standing& s : all) {
    if (s.k != kind::waits) continue;
    std::vector<int> seen{s.process};
    int at = s.peer;
    while (at >= 0 && at < processes && all[static_cast<std::size_t>(at)].k == kind::waits &&
           std::find(seen.begin(), seen.end(), at) == seen.end()) {
      seen.push_back(at);
      at = all[static_cast<std::size_t>(at)].peer;
    }
    if (at < 0 || at >= processes) continue;
    if (all[static_cast<std::size_t>(at)].k == kind::waits) {
      if (cycle.empty()) cycle = seen;
    } else {
      ++reached[static_cast<std::size_t>(at)];
    }
  }
  const auto severity = [](kind k) {
    constexpr std::array order{kind::threw,   kind::crashed, kind::died, kind::hangs, kind::left, kind::behind,
                               kind::missing, kind::stopped, kind::ends, kind::done,  kind::waits};
    return static_cast<int>(std::find(order.begin(), order.end(), k) - order.begin());
  };
  int cause = -1;
  for (const standing& s : all) {
    if (s.k == kind::waits || s.k == kind::done || s.k == kind::ends) continue;
    if (cause < 0) {
      cause = s.process;
      continue;
    }
    const standing& c = all[static_cast<std::size_t>(cause)];
    const auto a = std::make_pair(-reached[static_cast<std::size_t>(s.process)], severity(s.k));
    const auto b = std::make_pair(-reached[static_cast<std::size_t>(c.process)], severity(c.k));
    if (a < b) cause = s.process;
  }
  const auto table_for = [&](const standing& s) -> const dynamic_table* {
    const auto& t = tables[static_cast<std::size_t>(s.pass)];
    return t ? &*t : (tables[0] ? &*tables[0] : nullptr);
  };
  const auto task_at = [&](const standing& s, int position) -> std::optional<task> {
    const dynamic_table* t = table_for(s);
    if (!t || position < 0 || s.rank >= t->ranks() || static_cast<std::size_t>(position) >= t->program(s.rank).size())
      return std::nullopt;
    return t->program(s.rank)[static_cast<std::size_t>(position)];
  };
  const auto who = [&](const standing& s) {
    return "process " + std::to_string(s.process) + " (rank " + std::to_string(s.rank) + ", replica " +
           std::to_string(s.replica) + ")";
  };
  const auto at_words = [&](const standing& s, int position) {
    const auto t = task_at(s, position);
    return "task " + std::to_string(position) + (t ? ", " + task_words(*t) : std::string());
  };
  // The task a process that never got so far owes: the send the first process waiting for it needs.
  const auto owed = [&](const standing& s) {
    int best = -1;
    for (const standing& o : all)
      if (o.k == kind::waits && o.peer == s.process && o.peer_position >= 0 && (best < 0 || o.peer_position < best))
        best = o.peer_position;
    return best;
  };
  const auto why = [&](const standing& s) -> std::string {
    const std::string after = s.elapsed_ms >= 0 ? " for " + std::to_string(s.elapsed_ms) + " ms" : "";
    switch (s.k) {
      case kind::threw:
        return "a layer threw in " + at_words(s, s.position) + ": " + s.text;
      case kind::crashed:
        return "it crashed (" + signal_name(s.signal) + ") in " + at_words(s, s.position);
      case kind::hangs:
        return "it hangs in " + at_words(s, s.position) + ": running it" + after +
               (s.event == "signal" ? " when " + signal_name(s.signal) + " came" : "");
      case kind::died:
        return "it died in " + at_words(s, s.position) +
               " (its live record stops there and it wrote no report: killed outright, e.g. SIGKILL or out of "
               "memory)";
      case kind::left: {
        const int o = owed(s);
        return "it left: its executor was destroyed after step " + std::to_string(s.step) +
               (o >= 0 ? "; it never ran " + at_words(s, o) + " of step " + std::to_string(incident) : "");
      }
      case kind::behind: {
        const int o = owed(s);
        return "it never began step " + std::to_string(incident) + " (it stands after step " + std::to_string(s.step) +
               ", outside the executor)" + (o >= 0 ? "; it never ran " + at_words(s, o) : "");
      }
      case kind::missing: {
        const int o = owed(s);
        return "it left no record (never started, or its environment lacked CTPIPE_REPORT_DIR)" +
               (o >= 0 ? std::string("; it never ran ") + at_words(s, o) : "");
      }
      case kind::stopped:
        return "in " + at_words(s, s.position) + ", " + s.text;
      case kind::waits: {
        std::string w = (s.state == "receiving" ? "waits" + after + " in " : "waits" + after + " to send, in ") +
                        at_words(s, s.position) + " for process " + std::to_string(s.peer);
        if (s.peer_position >= 0) {
          const standing& q = all[static_cast<std::size_t>(s.peer)];
          w += " (its " + at_words(q, s.peer_position) + ", " +
               (q.step == s.step && q.position > s.peer_position ? "already run: the message was lost" : "not run") +
               ")";
        }
        return w + (s.event == "timeout" ? ": timed out" : s.event == "signal" ? ": " + signal_name(s.signal) : "");
      }
      case kind::ends:
        return "waits for every process at the end of step " + std::to_string(s.step);
      case kind::done:
        return "ended step " + std::to_string(s.step);
    }
    return "";
  };
  constexpr std::array<const char*, 11> kind_names{"waits", "ends",   "threw",   "crashed", "hangs", "died",
                                                   "left",  "behind", "stopped", "missing", "done"};
  const std::string schedule = j0.value("schedule", "?");
  std::optional<task> cause_task;
  int cause_position = -1;
  if (cause >= 0) {
    const standing& c = all[static_cast<std::size_t>(cause)];
    // (One that left or never began the step never ran its first task; one without a record, at
    // least not the send its peers wait for.)
    cause_position = c.k == kind::left || c.k == kind::behind ? 0 : c.k == kind::missing ? owed(c) : c.position;
    cause_task = task_at(c, cause_position);
  }
  if (format == "json") {
    nlohmann::json j = {{"step", incident}, {"processes", processes}, {"ranks", ranks}, {"replicas", replicas}};
    j["schedule"] = schedule;
    const auto task_json = [](const std::optional<task>& t) {
      return t ? nlohmann::json{{"op", std::string(op_name(t->op))}, {"stage", t->stage}, {"mb", t->microbatch}}
               : nlohmann::json(nullptr);
    };
    if (cause >= 0) {
      const standing& c = all[static_cast<std::size_t>(cause)];
      j["cause"] = {{"process", c.process},
                    {"rank", c.rank},
                    {"replica", c.replica},
                    {"kind", kind_names[static_cast<std::size_t>(c.k)]},
                    {"position", cause_position},
                    {"task", task_json(cause_task)},
                    {"why", why(c)}};
    } else {
      j["cause"] = nullptr;
    }
    if (!cycle.empty()) j["cycle"] = cycle;
    for (const standing& s : all)
      j["standing"].push_back({{"process", s.process},
                               {"rank", s.rank},
                               {"replica", s.replica},
                               {"kind", kind_names[static_cast<std::size_t>(s.k)]},
                               {"step", s.step},
                               {"position", s.position},
                               {"task", task_json(task_at(s, s.position))},
                               {"peer", s.peer},
                               {"event", s.event},
                               {"words", why(s)}});
    out << j.dump(2) << "\n";
    return;
  }
  if (format == "trace") {
    out << hang_trace(all, table_for, cause, why, [&](const standing& x) { return x.k == kind::missing; });
    return;
  }
  out << "ctpipe hang report: " << schedule << ", " << ranks << " ranks x " << replicas
      << (replicas == 1 ? " replica" : " replicas") << ", step " << incident << " (" << files.size() << " of "
      << processes << " processes left files)\n";
  if (cause >= 0) {
    const standing& c = all[static_cast<std::size_t>(cause)];
    out << "The first task that never completed: " << who(c) << ", "
        << (cause_position >= 0 ? at_words(c, cause_position) : std::string("(unknown)")) << ". Why: " << why(c)
        << ".\n";
  } else if (!cycle.empty()) {
    out << "No process holds the others up: the waits form a cycle (";
    for (int p : cycle) out << "process " << p << " -> ";
    out << "process " << cycle.front() << "): were they all built from the same program?\n";
  } else {
    out << "No process holds the others up: every one ended its last step.\n";
  }
  out << "Each process:\n";
  for (const standing& s : all) out << "  " << who(s) << ": " << why(s) << "\n";
  if (cause >= 0 && cause_position >= 0) {
    const standing& c = all[static_cast<std::size_t>(cause)];
    if (const dynamic_table* t = table_for(c); t && c.rank < t->ranks()) {
      const auto program = t->program(c.rank);
      const int from = std::max(0, cause_position - 3),
                to = std::min(static_cast<int>(program.size()), cause_position + 4);
      out << "Rank " << c.rank << "'s program around task " << cause_position << " (of " << program.size() << "):\n";
      for (int i = from; i < to; ++i) {
        const bool ran = c.k != kind::missing && i < cause_position;
        out << (i == cause_position ? "  > " : "    ") << i << "  " << task_words(program[static_cast<std::size_t>(i)])
            << (i == cause_position ? "  <- never completed"
                : ran               ? "  (ran)"
                                    : "  (not reached)")
            << "\n";
      }
    }
  }
}

}  // namespace ctpipe::explorer
