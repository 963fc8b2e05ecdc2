// The explorer's number and cost parsing (explorer.hpp).
#include "explorer.hpp"

#include <sstream>
#include <stdexcept>

namespace ctpipe::explorer {

bool parse_number(const std::string& text, double& value) {
  std::size_t used = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return !text.empty() && used == text.size();
}

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
    if (!parse_number(value, v) || !(v >= 0.0) || v > 1e12)
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

}  // namespace ctpipe::explorer
