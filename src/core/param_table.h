// A table of named, documented, range-checked parameters over a config struct.
// Every config in aegis (the engine's, the simulator's) is described by one such table,
// which drives overrides from text (`--set name=value`, config files) and the record of
// the config used by each run.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace aegis {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ParamValue = std::variant<bool, std::int64_t, double, std::string, std::vector<double>>;

struct ParamInfo {
  std::string_view name;
  std::string_view doc;
  ParamValue value;          // current value
  std::string_view allowed;  // for text parameters: comma-separated choices
};

template <class Config>
struct ParamEntry {
  using Ref = std::variant<bool*, std::int64_t*, int*, double*, std::string*, std::vector<double>*>;
  std::string_view name;
  double lo;
  double hi;
  std::string_view allowed;  // text parameters: the choices ("" = any)
  std::string_view doc;
  Ref (*ref)(Config&);
};

inline constexpr double kParamInf = 1e18;

// One table entry; FIELD may be nested (risk_weights.mean).
#define AEGIS_PARAM(CONFIG, NAME, FIELD, LO, HI, ALLOWED, DOC)                                \
  ::aegis::ParamEntry<CONFIG> {                                                               \
    NAME, LO, HI, ALLOWED, DOC, [](CONFIG& c) -> ::aegis::ParamEntry<CONFIG>::Ref { return &c.FIELD; } \
  }

namespace param_detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

inline std::string num(double v) {
  std::ostringstream o;
  o.precision(15);
  o << v;
  return o.str();
}

inline double parse_number(std::string_view name, std::string_view text) {
  text = trim(text);
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v))
    throw ConfigError(std::string(name) + ": expected a number, got '" + std::string(text) + "'");
  return v;
}

inline bool parse_bool(std::string_view name, std::string_view t) {
  t = trim(t);
  if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "0" || t == "no" || t == "off") return false;
  throw ConfigError(std::string(name) + ": expected true or false, got '" + std::string(t) + "'");
}

inline bool in_choices(std::string_view allowed, std::string_view v) {
  if (allowed.empty()) return true;
  while (true) {
    auto comma = allowed.find(',');
    if (allowed.substr(0, comma) == v) return true;
    if (comma == std::string_view::npos) return false;
    allowed.remove_prefix(comma + 1);
  }
}

template <class Config>
void check_range(const ParamEntry<Config>& e, double v) {
  if (v < e.lo || v > e.hi)
    throw ConfigError(std::string(e.name) + ": " + num(v) + " is out of range [" + num(e.lo) + ", " +
                      (e.hi >= kParamInf ? std::string("inf") : num(e.hi)) + "]");
}

}  // namespace param_detail

template <class Config>
std::vector<ParamInfo> describe_params(std::span<const ParamEntry<Config>> table, const Config& c) {
  Config copy = c;
  std::vector<ParamInfo> out;
  out.reserve(table.size());
  for (const auto& e : table) {
    ParamValue v = std::visit(
        [](auto* p) -> ParamValue {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, int>) return static_cast<std::int64_t>(*p);
          else return *p;
        },
        e.ref(copy));
    out.push_back({e.name, e.doc, std::move(v), e.allowed});
  }
  return out;
}

// Checks every entry's range and choices. Throws ConfigError naming the parameter.
template <class Config>
void check_params(std::span<const ParamEntry<Config>> table, const Config& c) {
  Config copy = c;
  for (const auto& e : table) {
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
            param_detail::check_range(e, static_cast<double>(*p));
          if constexpr (std::is_same_v<T, std::string>)
            if (!param_detail::in_choices(e.allowed, *p))
              throw ConfigError(std::string(e.name) + ": '" + *p + "' is not one of " + std::string(e.allowed));
        },
        e.ref(copy));
  }
}

// Returns false if `name` is not in the table; throws ConfigError for a bad value.
template <class Config>
bool set_param_in(std::span<const ParamEntry<Config>> table, Config& c, std::string_view name,
                  std::string_view text) {
  using namespace param_detail;
  for (const auto& e : table) {
    if (e.name != name) continue;
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool>) {
            *p = parse_bool(name, text);
          } else if constexpr (std::is_same_v<T, std::string>) {
            auto t = trim(text);
            if (!in_choices(e.allowed, t))
              throw ConfigError(std::string(name) + ": '" + std::string(t) + "' is not one of " +
                                std::string(e.allowed));
            *p = std::string(t);
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            std::vector<double> v;
            std::string_view rest = text;
            while (true) {
              auto comma = rest.find(',');
              v.push_back(parse_number(name, rest.substr(0, comma)));
              if (comma == std::string_view::npos) break;
              rest.remove_prefix(comma + 1);
            }
            *p = std::move(v);
          } else {
            double v = parse_number(name, text);
            check_range(e, v);
            if constexpr (std::is_integral_v<T>) {
              if (v != std::floor(v))
                throw ConfigError(std::string(name) + ": expected a whole number, got '" +
                                  std::string(trim(text)) + "'");
            }
            *p = static_cast<T>(v);
          }
        },
        e.ref(c));
    return true;
  }
  return false;
}

inline std::string format_value(const ParamValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return x;
        else if constexpr (std::is_same_v<T, std::vector<double>>) {
          std::string s;
          for (double d : x) s += (s.empty() ? "" : ",") + param_detail::num(d);
          return s;
        } else if constexpr (std::is_same_v<T, double>) return param_detail::num(x);
        else return std::to_string(x);
      },
      v);
}

}  // namespace aegis
