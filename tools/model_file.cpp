#include "model_file.hpp"

#include "explorer.hpp"  // parse_number

#include <nlohmann/json.hpp>

#include <cmath>
#include <istream>
#include <map>
#include <sstream>
#include <string>

#include <ctpipe/format/csv.hpp>  // format_error

namespace ctpipe::explorer {
namespace {

constexpr int max_layers = 1024;  // the planner's search grows as layers^2 log(layers) per plan

// One layer's fields by name, as read; turned into layer_profiles (times `repeat`) by add_layers.
using fields = std::map<std::string, double>;

const char* const known_fields[] = {"repeat",   "forward",          "backward",     "backward_input", "backward_weight",
                                    "overhead", "activation_bytes", "output_bytes", "parameter_bytes"};

bool known(const std::string& key) {
  for (const char* k : known_fields)
    if (key == k) return true;
  return false;
}

std::string field_list() {
  std::string s;
  for (const char* k : known_fields) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

void add_layers(const fields& f, const std::string& where, model_file& out) {
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
  if (out.layers.size() + static_cast<std::size_t>(repeat) > static_cast<std::size_t>(max_layers))
    throw format_error(where + ": more than " + std::to_string(max_layers) + " layers");
  out.layers.insert(out.layers.end(), static_cast<std::size_t>(repeat), l);
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
    if (key == "layers") continue;
    if (key != "input_bytes") throw format_error("model file: unknown key \"" + key + "\" (keys: layers, input_bytes)");
    if (!value.is_number() || !(value.get<double>() >= 0.0) || !std::isfinite(value.get<double>()))
      throw format_error("model file: input_bytes must be a number >= 0");
    out.input_bytes = value.get<double>();
  }
  int index = 0;
  for (const auto& layer : j["layers"]) {
    const std::string where = "model file: layer " + std::to_string(index++);
    if (!layer.is_object()) throw format_error(where + ": an object of fields is expected");
    fields f;
    for (const auto& [key, value] : layer.items()) {
      if (key == "name") continue;
      if (!known(key))
        throw format_error(where + ": unknown field \"" + key + "\" (fields: name, " + field_list() + ")");
      if (!value.is_number()) throw format_error(where + ": " + key + " must be a number");
      f[key] = value.get<double>();
    }
    add_layers(f, where, out);
  }
  if (out.layers.empty()) throw format_error("model file: no layers");
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
