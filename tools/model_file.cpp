#include "model_file.hpp"

#include "explorer.hpp"  // parse_number

#include <nlohmann/json.hpp>

#include <cmath>
#include <istream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctpipe/format/csv.hpp>  // format_error

namespace ctpipe::explorer {
namespace {

constexpr int max_layers = 1024;  // the planner's search grows as layers^2 log(layers) per plan

// One layer's fields by name, as read; turned into layer_profiles (times `repeat`) by add_layers.
using fields = std::map<std::string, double>;

const char* const known_fields[] = {"repeat",          "forward",  "backward",         "backward_input",
                                    "backward_weight", "overhead", "activation_bytes", "output_bytes",
                                    "parameter_bytes", "skip"};
// JSON's alone: a list of measured sizes, and another layer's name.
const char* const json_fields[] = {"timings", "shares_with"};
const char* const timing_fields[] = {"samples", "forward", "backward", "backward_input", "backward_weight"};

bool known(const std::string& key) {
  for (const char* k : known_fields)
    if (key == k) return true;
  return false;
}

template <std::size_t N>
std::string list_of(const char* const (&names)[N]) {
  std::string s;
  for (const char* k : names) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}
std::string field_list() { return list_of(known_fields); }

// A layer's figures; `timings` and `shares_with` (JSON's) are set by the caller.
void add_layers(const fields& f, const std::string& where, model_file& out, const layer_profile* extra = nullptr) {
  auto get = [&](const char* key, double fallback) {
    const auto it = f.find(key);
    return it == f.end() ? fallback : it->second;
  };
  for (const auto& [key, value] : f)
    if (!std::isfinite(value) || value < 0.0 || value > 1e18)
      throw format_error(where + ": " + key + " must be a number between 0 and 1e18");
  const double repeat = get("repeat", 1.0);
  if (repeat < 1.0 || repeat != std::floor(repeat) || repeat > max_layers)
    throw format_error(where + ": repeat must be a whole number from 1 to " + std::to_string(max_layers));
  layer_profile l{};
  l.forward = get("forward", 0.0);
  const bool whole = f.count("backward") != 0, split = f.count("backward_input") || f.count("backward_weight");
  if (whole && split) throw format_error(where + ": give backward, or backward_input and backward_weight, not both");
  l.backward_input = whole ? get("backward", 0.0) / 2 : get("backward_input", 0.0);
  l.backward_weight = whole ? get("backward", 0.0) / 2 : get("backward_weight", 0.0);
  l.overhead = get("overhead", 0.0);
  l.activation_bytes = get("activation_bytes", 0.0);
  l.output_bytes = get("output_bytes", 0.0);
  l.parameter_bytes = get("parameter_bytes", 0.0);
  const double skip = get("skip", 0.0);
  if (skip != std::floor(skip) || skip == 1.0 || skip > max_layers)
    throw format_error(where + ": skip must be 0 or a whole number of layers back from 2 to " +
                       std::to_string(max_layers));
  l.skip = static_cast<int>(skip);
  if (extra != nullptr) {
    l.timings = extra->timings;
    l.timed = extra->timed;
    l.shares_with = extra->shares_with;
  }
  if (l.timed > 0 && (f.count("forward") || whole || split || f.count("overhead")))
    throw format_error(where + ": give timings, or forward, backward and overhead, not both");
  if (out.layers.size() + static_cast<std::size_t>(repeat) > static_cast<std::size_t>(max_layers))
    throw format_error(where + ": more than " + std::to_string(max_layers) + " layers");
  out.layers.insert(out.layers.end(), static_cast<std::size_t>(repeat), l);
}

// A layer's "timings": a list of 1 to max_op_timings objects {samples, forward, backward_input,
// backward_weight} (or backward, split evenly), in increasing order of samples. Returns how many.
int read_timings(const nlohmann::json& list, const std::string& where, layer_profile& l) {
  if (!list.is_array() || list.empty() || list.size() > static_cast<std::size_t>(max_op_timings))
    throw format_error(where + ": timings must be a list of 1 to " + std::to_string(max_op_timings) +
                       " measured sizes");
  int k = 0;
  for (const auto& point : list) {
    const std::string at = where + ": timings[" + std::to_string(k) + "]";
    if (!point.is_object()) throw format_error(at + ": an object of fields is expected");
    fields f;
    for (const auto& [key, value] : point.items()) {
      bool ok = false;
      for (const char* name : timing_fields) ok = ok || key == name;
      if (!ok) throw format_error(at + ": unknown field \"" + key + "\" (fields: " + list_of(timing_fields) + ")");
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0.0 ||
          value.get<double>() > 1e18)
        throw format_error(at + ": " + key + " must be a number between 0 and 1e18");
      f[key] = value.get<double>();
    }
    if (!f.count("samples") || !(f["samples"] > 0.0)) throw format_error(at + ": samples must be more than 0");
    if (k > 0 && !(f["samples"] > l.timings[static_cast<std::size_t>(k) - 1].samples))
      throw format_error(at + ": samples must grow from one measured size to the next");
    const bool whole = f.count("backward") != 0, split = f.count("backward_input") || f.count("backward_weight");
    if (whole && split) throw format_error(at + ": give backward, or backward_input and backward_weight, not both");
    l.timings[static_cast<std::size_t>(k)] = {f["samples"], f.count("forward") ? f["forward"] : 0.0,
                                              whole ? f["backward"] / 2 : f["backward_input"],
                                              whole ? f["backward"] / 2 : f["backward_weight"]};
    ++k;
  }
  return k;
}

// "calibration": a pipelined step that ran, by which the layers' times are calibrated
// (planner/calibrate.hpp): {"samples": its microbatch size, "first_layers": each stage's first
// layer (repeated layers counted one by one), "forward" and "backward": each stage's measured
// seconds per microbatch}.
void calibrate_by(const nlohmann::json& c, model_file& out) {
  const std::string where = "model file: calibration";
  if (!c.is_object())
    throw format_error(where + ": an object with samples, first_layers, forward and backward is expected");
  for (const auto& [key, value] : c.items())
    if (key != "samples" && key != "first_layers" && key != "forward" && key != "backward")
      throw format_error(where + ": unknown key \"" + key + "\" (keys: samples, first_layers, forward, backward)");
  for (const char* key : {"samples", "first_layers", "forward", "backward"})
    if (!c.contains(key)) throw format_error(where + ": " + key + " is missing");
  if (!c["samples"].is_number()) throw format_error(where + ": samples must be a number");
  auto numbers = [&](const char* key) {
    const nlohmann::json& list = c[key];
    if (!list.is_array()) throw format_error(where + ": " + key + " must be a list of numbers");
    std::vector<double> v;
    for (const auto& x : list) {
      if (!x.is_number()) throw format_error(where + ": " + key + " must be a list of numbers");
      v.push_back(x.get<double>());
    }
    return v;
  };
  const std::vector<double> first = numbers("first_layers"), forward = numbers("forward"),
                            backward = numbers("backward");
  if (forward.size() != first.size() || backward.size() != first.size())
    throw format_error(where + ": first_layers, forward and backward must have one entry for each stage");
  std::vector<int> first_layers;
  for (const double x : first) {
    if (!(x >= 0.0 && x < 1e9) || x != std::floor(x))
      throw format_error(where + ": " + calibration_message(calibration_rule::first_layers));
    first_layers.push_back(static_cast<int>(x));
  }
  std::vector<stage_time> stages;
  for (std::size_t s = 0; s < first.size(); ++s) stages.push_back({forward[s], backward[s]});
  const calibration run{first_layers, stages, c["samples"].get<double>()};
  if (const calibration_rule r = check_calibration(out.layers.size(), run); r != calibration_rule::ok)
    throw format_error(where + ": " + calibration_message(r));
  try {
    calibrate(out.layers, run);
  } catch (const std::invalid_argument&) {
    throw format_error(where + ": " + calibration_message(calibration_rule::scale));
  }
}

model_file read_json_model(std::istream& in) {
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw format_error(std::string("model file: not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    throw format_error("model file: a JSON object with a \"layers\" array is expected");
  model_file out;
  for (const auto& [key, value] : j.items()) {
    if (key == "layers" || key == "calibration") continue;
    if (key != "input_bytes")
      throw format_error("model file: unknown key \"" + key + "\" (keys: layers, input_bytes, calibration)");
    if (!value.is_number() || !(value.get<double>() >= 0.0) || !std::isfinite(value.get<double>()))
      throw format_error("model file: input_bytes must be a number >= 0");
    out.input_bytes = value.get<double>();
  }
  int index = 0;
  std::map<std::string, int> named;  // a name given once: the index of its (first) layer; twice: -1
  for (const auto& layer : j["layers"]) {
    const std::string where = "model file: layer " + std::to_string(index++);
    if (!layer.is_object()) throw format_error(where + ": an object of fields is expected");
    fields f;
    layer_profile extra{};
    for (const auto& [key, value] : layer.items()) {
      if (key == "name") {
        if (!value.is_string()) throw format_error(where + ": name must be a string");
        const auto [it, fresh] = named.emplace(value.get<std::string>(), static_cast<int>(out.layers.size()));
        if (!fresh) it->second = -1;
      } else if (key == "timings") {
        extra.timed = read_timings(value, where, extra);
      } else if (key == "shares_with") {
        if (!value.is_string()) throw format_error(where + ": shares_with must name an earlier layer");
        const auto it = named.find(value.get<std::string>());
        if (it == named.end() || it->second < 0 || it->second >= static_cast<int>(out.layers.size()))
          throw format_error(where + ": shares_with: \"" + value.get<std::string>() +
                             "\" is not the name of one earlier layer");
        if (out.layers[static_cast<std::size_t>(it->second)].shares_with >= 0)
          throw format_error(where + ": shares_with: \"" + value.get<std::string>() +
                             "\" shares another layer's parameters itself");
        extra.shares_with = it->second;
      } else if (!known(key)) {
        throw format_error(where + ": unknown field \"" + key + "\" (fields: name, " + field_list() + ", " +
                           list_of(json_fields) + ")");
      } else {
        if (!value.is_number()) throw format_error(where + ": " + key + " must be a number");
        f[key] = value.get<double>();
      }
    }
    if (extra.shares_with >= 0 && f.count("repeat") && f["repeat"] != 1.0)
      throw format_error(where + ": a layer that shares parameters cannot repeat");
    add_layers(f, where, out, &extra);
  }
  if (out.layers.empty()) throw format_error("model file: no layers");
  if (j.contains("calibration")) calibrate_by(j["calibration"], out);
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    const auto b = cell.find_first_not_of(" \t\r"), e = cell.find_last_not_of(" \t\r");
    cells.push_back(b == std::string::npos ? std::string() : cell.substr(b, e - b + 1));
  }
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// CSV: a header naming the columns (name and the fields, any order), then a row per layer; lines
// starting with '#' are comments. "input_bytes" may be given as a comment line "# input_bytes = N".
model_file read_csv_model(std::istream& in) {
  model_file out;
  std::vector<std::string> header;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = "model file: line " + std::to_string(number);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line[line.find_first_not_of(" \t\r")] == '#') continue;
    auto cells = split_csv(line);
    if (header.empty()) {
      for (const auto& c : cells)
        for (const char* k : json_fields)
          if (c == k) throw format_error(where + ": " + c + " is given only in a JSON model file");
      for (const auto& c : cells)
        if (c != "name" && c != "input_bytes" && !known(c))
          throw format_error(where + ": unknown column \"" + c + "\" (columns: name, input_bytes, " + field_list() +
                             ")");
      header = cells;
      continue;
    }
    if (cells.size() != header.size())
      throw format_error(where + ": " + std::to_string(cells.size()) + " cells, the header has " +
                         std::to_string(header.size()));
    fields f;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (header[i] == "name" || cells[i].empty()) continue;
      double v = 0.0;
      if (!parse_number(cells[i], v))
        throw format_error(where + ": " + header[i] + " is not a number: '" + cells[i] + "'");
      if (header[i] == "input_bytes") {
        if (!(v >= 0.0) || !std::isfinite(v)) throw format_error(where + ": input_bytes must be a number >= 0");
        out.input_bytes = v;
      } else {
        f[header[i]] = v;
      }
    }
    add_layers(f, where, out);
  }
  if (header.empty()) throw format_error("model file: empty (a header line and a row per layer are expected)");
  if (out.layers.empty()) throw format_error("model file: no layers");
  return out;
}

}  // namespace

model_file read_model(std::istream& in) {
  const int first = (in >> std::ws).peek();
  return first == '{' ? read_json_model(in) : read_csv_model(in);
}

}  // namespace ctpipe::explorer
