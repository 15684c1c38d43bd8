#include "estimate/gpumemnet_data.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace aegis {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<long long> parse_int(std::string_view s) {
  s = trim(s);
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  s = trim(s);
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A small cursor over the layer list: Python's repr of a list of (str, int, int) tuples.
struct Cursor {
  std::string_view s;
  std::size_t i = 0;
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::optional<std::string> quoted() {
    skip();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return std::nullopt;
    const char q = s[i++];
    const auto end = s.find(q, i);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s.substr(i, end - i));
    i = end + 1;
    return out;
  }
  std::optional<long long> integer() {
    skip();
    const std::size_t from = i;
    if (i < s.size() && s[i] == '-') ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return parse_int(s.substr(from, i - from));
  }
};

struct LayerList {
  std::map<std::string, int> counts;
  double activations = 0, parameters = 0;
};

std::variant<LayerList, std::string> parse_layers(std::string_view list) {
  Cursor c{list};
  LayerList out;
  if (!c.eat('[')) return std::string("expected a list such as [('linear', 629, 792540), ...]");
  if (c.eat(']')) return out;
  for (int n = 1;; ++n) {
    const std::string at = "layer " + std::to_string(n) + ": ";
    if (!c.eat('(')) return at + "expected '('";
    auto name = c.quoted();
    if (!name || name->empty()) return at + "expected a quoted layer type";
    if (!c.eat(',')) return at + "expected ',' after the layer type";
    auto acts = c.integer();
    if (!acts || *acts < 0) return at + "expected a whole number of activations";
    if (!c.eat(',')) return at + "expected ',' after the activations";
    auto params = c.integer();
    if (!params || *params < 0) return at + "expected a whole number of parameters";
    if (!c.eat(')')) return at + "expected ')'";
    ++out.counts[torch_layer_name(*name)];
    out.activations += static_cast<double>(*acts);
    out.parameters += static_cast<double>(*params);
    if (c.eat(']')) break;
    if (!c.eat(',')) return at + "expected ',' or ']' after the layer";
  }
  c.skip();
  if (c.i != list.size()) return std::string("unexpected text after the closing ']'");
  return out;
}

}  // namespace

std::string torch_layer_name(std::string_view name) {
  if (name == "batch_normalization") return "batchnorm1d";
  std::string out(name);
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::variant<std::map<std::string, int>, std::string> count_layer_types(std::string_view list) {
  auto r = parse_layers(list);
  if (auto* e = std::get_if<std::string>(&r)) return *e;
  return std::get<LayerList>(r).counts;
}

std::variant<MemorySample, FieldError> gpumemnet_sample(const FieldLookup& field) {
  for (auto col : kGpuMemNetRequired)
    if (!field(col)) return FieldError{std::string(col), "missing column"};
  auto text = [&](std::string_view col) { return *field(col); };
  auto count = [&](std::string_view col, long long lo, int& out) -> std::optional<FieldError> {
    const auto t = text(col);
    const auto v = parse_int(t);
    if (!v || *v < lo || *v > std::numeric_limits<int>::max())
      return FieldError{std::string(col), "expected a whole number >= " + std::to_string(lo) + ", got '" + t + "'"};
    out = static_cast<int>(*v);
    return std::nullopt;
  };
  auto number = [&](std::string_view col, double& out, bool positive) -> std::optional<FieldError> {
    const auto t = text(col);
    const auto v = parse_double(t);
    if (!v || *v < 0 || (positive && *v == 0))
      return FieldError{std::string(col),
                        std::string(positive ? "expected a number > 0" : "expected a number >= 0") + ", got '" + t + "'"};
    out = *v;
    return std::nullopt;
  };

  MemorySample s;
  ModelFeatures& f = s.features;
  if (auto e = count("Depth", 1, f.depth)) return *e;
  if (auto e = count("Batch Size", 1, f.batch_size)) return *e;
  if (auto e = number("Total Activations", f.total_activations, false)) return *e;
  if (auto e = number("Total Parameters", f.total_parameters, false)) return *e;
  if (auto e = number(kGpuMemNetTarget, s.memory_mib, true)) return *e;
  for (auto [col, out] : {std::pair{"Batch Normalization Layers", &f.batchnorm_layers},
                          std::pair{"Dropout Layers", &f.dropout_layers}})
    if (field(col))
      if (auto e = count(col, 0, *out)) return *e;
  f.activation = std::string(trim(text("Activation Function")));
  if (f.activation.empty()) return FieldError{"Activation Function", "missing value"};

  // The layer list must agree with the totals: a row whose parts do not add up is
  // corrupt, and training on it would teach the model noise.
  auto layers = parse_layers(text("Activations-Params"));
  if (auto* e = std::get_if<std::string>(&layers)) return FieldError{"Activations-Params", *e};
  auto& l = std::get<LayerList>(layers);
  if (l.activations != f.total_activations)
    return FieldError{"Activations-Params", "layer activations add up to " + std::to_string(static_cast<long long>(l.activations)) +
                                                ", but Total Activations is " + text("Total Activations")};
  if (l.parameters != f.total_parameters)
    return FieldError{"Activations-Params", "layer parameters add up to " + std::to_string(static_cast<long long>(l.parameters)) +
                                                ", but Total Parameters is " + text("Total Parameters")};
  f.layer_counts = std::move(l.counts);
  return s;
}

}  // namespace aegis
