// What one message costs on a class of link (link_cost.h)
#include "core/plan/link_cost.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "core/base/errors.h"

namespace ringreduce {

namespace {

[[noreturn]] void reject(std::string_view text, const char* what, const std::string& why) {
  throw InvalidArgument(std::string("ringreduce: ") + what + "='" + std::string(text) +
                        "': " + why + " (expected e.g. '100Gbit/s,5us' or '150GB/s,1us,0.2us')");
}

// Multiplier of a decimal or binary prefix at the start of `unit`; advances it.
double prefixOf(std::string_view& unit) {
  static const struct {
    const char* prefix;
    double factor;
  } prefixes[] = {{"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
                  {"k", 1e3},     {"K", 1e3},        {"M", 1e6},           {"G", 1e9},
                  {"T", 1e12}};
  for (const auto& p : prefixes) {
    const std::string_view prefix(p.prefix);
    if (unit.substr(0, prefix.size()) == prefix) {
      unit.remove_prefix(prefix.size());
      return p.factor;
    }
  }
  return 1.0;
}

}  // namespace

LinkCost parseLinkCost(std::string_view text, const LinkCost& fallback, const char* what) {
  LinkCost cost = fallback;
  int times = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part(
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (part.empty()) continue;
    char* end = nullptr;
    const double value = std::strtod(part.c_str(), &end);
    if (end == part.c_str() || !std::isfinite(value) || value < 0)
      reject(text, what, "no number in '" + part + "'");
    std::string_view unit(end);
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (unit.size() > 2 && unit.substr(unit.size() - 2) == "/s") {
      unit.remove_suffix(2);
      const double factor = prefixOf(unit);
      double bitsPerUnit;
      if (unit == "B") {
        bitsPerUnit = 8;
      } else if (unit == "bit" || unit == "b" || unit == "bps") {
        bitsPerUnit = 1;
      } else {
        reject(text, what, "unknown bandwidth unit in '" + part + "'");
      }
      if (value == 0) reject(text, what, "zero bandwidth");
      cost.beta = 8.0 / (value * factor * bitsPerUnit);
      continue;
    }
    double seconds;
    if (unit == "s") {
      seconds = value;
    } else if (unit == "ms") {
      seconds = value * 1e-3;
    } else if (unit == "us") {
      seconds = value * 1e-6;
    } else if (unit == "ns") {
      seconds = value * 1e-9;
    } else {
      reject(text, what, "unknown unit in '" + part + "'");
    }
    if (times == 0) {
      cost.alpha = seconds;
    } else if (times == 1) {
      cost.overhead = seconds;
    } else {
      reject(text, what, "more than two times");
    }
    ++times;
  }
  return cost;
}

std::string describeLinkCost(const LinkCost& cost) {
  std::ostringstream out;
  out << (cost.beta > 0 ? 1.0 / cost.beta / 1e9 : 0.0) << " GB/s, " << cost.alpha * 1e6
      << " us latency, " << cost.overhead * 1e6 << " us per message";
  return out.str();
}

}  // namespace ringreduce
