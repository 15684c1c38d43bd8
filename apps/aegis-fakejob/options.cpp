#include "options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>

namespace aegis::fakejob {

namespace {

std::optional<double> number(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

bool parse_options(int argc, const char* const* argv, Options* out, std::string* error) {
  std::optional<double> mem, smact, seconds, smocc, drama, util;
  double ramp = 0, startup = 2, context = 0, load = 0, loaded = 0, load_smact = 0;
  struct Field {
    std::string_view name;
    std::optional<double>* slot;
    double* plain;
    double lo, hi;
  };
  const Field fields[] = {
      {"--mem", &mem, nullptr, 1, 1 << 24},         {"--smact", &smact, nullptr, 0, 1},
      {"--seconds", &seconds, nullptr, 1e-3, 1e7},  {"--ramp", nullptr, &ramp, 0, 1e7},
      {"--smocc", &smocc, nullptr, 0, 1},           {"--drama", &drama, nullptr, 0, 1},
      {"--util", &util, nullptr, 0, 1},             {"--startup", nullptr, &startup, 0, 1e7},
      {"--context", nullptr, &context, 0, 1 << 24}, {"--load", nullptr, &load, 0, 1e7},
      {"--loaded", nullptr, &loaded, 0, 1 << 24},   {"--load-smact", nullptr, &load_smact, 0, 1},
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i], value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = std::string(arg) + ": missing value (try --help)";
      return false;
    }
    const auto f = std::find_if(std::begin(fields), std::end(fields), [&](const Field& x) { return x.name == arg; });
    if (f == std::end(fields)) {
      *error = "unknown argument '" + std::string(arg) + "' (try --help)";
      return false;
    }
    const auto v = number(value);
    if (!v || *v < f->lo || *v > f->hi) {
      *error = std::string(arg) + ": '" + std::string(value) + "' is not a number in [" + text(f->lo) + ", " + text(f->hi) + "]";
      return false;
    }
    if (f->slot) *f->slot = *v;
    else *f->plain = *v;
  }
  for (const auto& [name, v] : {std::pair{"--mem", mem}, std::pair{"--smact", smact}, std::pair{"--seconds", seconds}})
    if (!v) {
      *error = std::string("missing ") + name + " (try --help)";
      return false;
    }
  if (*mem != std::floor(*mem)) {
    *error = "--mem: a whole number of MiB, please";
    return false;
  }
  for (const auto& [name, v] : {std::pair{"--context", context}, std::pair{"--loaded", loaded}})
    if (v != std::floor(v)) {
      *error = std::string(name) + ": a whole number of MiB, please";
      return false;
    }
  if (context > *mem || loaded > *mem || (loaded > 0 && loaded < context)) {
    *error = "--context <= --loaded <= --mem, please";
    return false;
  }
  out->context_mib = static_cast<MiB>(context);
  out->load_s = load;
  out->loaded_mib = static_cast<MiB>(loaded);
  out->load_activity = {load_smact, load_smact / 2, load_smact / 2, std::min(1.0, load_smact * 1.2)};
  out->mem_mib = static_cast<MiB>(*mem);
  out->seconds = *seconds;
  out->ramp_s = ramp;
  out->startup_s = startup;
  out->activity = {*smact, smocc.value_or(*smact / 2), drama.value_or(*smact / 2), util.value_or(std::min(1.0, *smact * 1.2))};
  return true;
}

}  // namespace aegis::fakejob
