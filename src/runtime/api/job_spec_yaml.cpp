// YAML job specs (docs/api.md). The document is vetted event by event before a tree is
// built: no anchors or aliases (a few lines of them expand into billions of nodes), no
// repeated or non-string keys, shallow nesting, one document.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <set>
#include <sstream>

#include "runtime/api/detail.h"
#include "runtime/api/job_reader.h"
#include "runtime/api/request.h"

#include <nlohmann/json.hpp>

namespace aegis::api {
namespace {

using detail::fail;
using detail::printable;

constexpr std::size_t kMaxSpecBytes = 1 << 20;

std::string at(const YAML::Mark& mark) {
  return "spec: line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

class Vetter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) fail(at(mark), "more than one YAML document");
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { node(mark, anchor, nullptr); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { reject_anchor(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string& value) override {
    node(mark, anchor, &value);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor, false);
  }
  void OnSequenceEnd() override { open_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor, true);
  }
  void OnMapEnd() override { open_.pop_back(); }

 private:
  struct Collection {
    bool is_map;
    bool at_key = true;           // a map alternates key, value
    std::set<std::string> keys;   // seen so far, for a map
  };

  [[noreturn]] static void reject_anchor(const YAML::Mark& mark) {
    fail(at(mark), "anchors and aliases are not allowed");
  }

  // Every node: checks its anchor and, as a map key, that it is a new string.
  void node(const YAML::Mark& mark, YAML::anchor_t anchor, const std::string* scalar) {
    if (anchor != YAML::NullAnchor) reject_anchor(mark);
    if (open_.empty() || !open_.back().is_map) return;
    Collection& map = open_.back();
    if (map.at_key) {
      if (!scalar) fail(at(mark), "keys must be strings");
      if (!map.keys.insert(*scalar).second) fail(at(mark), "duplicate key '" + printable(*scalar) + "'");
    }
    map.at_key = !map.at_key;
  }

  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool is_map) {
    node(mark, anchor, nullptr);
    if (open_.size() == detail::kMaxDepth)
      fail(at(mark), "nested deeper than " + std::to_string(detail::kMaxDepth) + " levels");
    open_.push_back(Collection{is_map, true, {}});
  }

  int documents_ = 0;
  std::vector<Collection> open_;
};

YAML::Node load(const std::string& text) {
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    Vetter vetter;
    while (parser.HandleNextDocument(vetter)) {
    }
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(e.mark.is_null() ? "spec" : at(e.mark), "not valid YAML: " + printable(e.msg, 200));
  }
}

// Only plain (unquoted) scalars are numbers or booleans, as in YAML itself: "2" is text.
std::optional<std::string_view> plain(const YAML::Node& n) {
  if (!n.IsScalar() || n.Tag() != "?") return std::nullopt;
  return n.Scalar();
}

template <class T>
std::optional<T> parse_whole(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// YAML through the job reader's adapter interface (job_reader.h). Keys are known to be
// unique strings: the vetter checked.
struct YamlAccess {
  using Node = YAML::Node;
  static constexpr const char* kMap = "a mapping";
  static constexpr const char* kSeq = "a list";
  static constexpr bool kCommandMayBeString = true;

  static bool is_map(const Node& n) { return n.IsMap(); }
  static bool is_seq(const Node& n) { return n.IsSequence(); }
  // Plain scalars that read as numbers become numbers; everything else keeps its text.
  static nlohmann::json as_json(const Node& n) {
    if (n.IsMap()) {
      nlohmann::json j = nlohmann::json::object();
      for (auto it = n.begin(); it != n.end(); ++it) j[it->first.Scalar()] = as_json(it->second);
      return j;
    }
    if (n.IsSequence()) {
      nlohmann::json j = nlohmann::json::array();
      for (auto it = n.begin(); it != n.end(); ++it) j.push_back(as_json(*it));
      return j;
    }
    if (auto i = integer(n)) return *i;
    if (auto d = number(n)) return *d;
    return n.IsScalar() ? nlohmann::json(n.Scalar()) : nlohmann::json(nullptr);
  }
  static std::optional<std::string> string(const Node& n) {
    if (!n.IsScalar()) return std::nullopt;
    return n.Scalar();
  }
  static std::optional<std::int64_t> integer(const Node& n) {
    const auto text = plain(n);
    return text ? parse_whole<std::int64_t>(*text) : std::nullopt;
  }
  static std::optional<double> number(const Node& n) {
    const auto text = plain(n);
    return text ? parse_whole<double>(*text) : std::nullopt;
  }
  // YAML 1.2's booleans; not 1.1's yes/no/on/off, which surprise people.
  static std::optional<bool> boolean(const Node& n) {
    const auto text = plain(n);
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    return std::nullopt;
  }
  template <class F>
  static void for_each_field(const Node& n, F&& f) {
    for (auto it = n.begin(); it != n.end(); ++it) f(it->first.Scalar(), it->second);
  }
  template <class F>
  static void for_each_element(const Node& n, F&& f) {
    std::size_t i = 0;
    for (auto it = n.begin(); it != n.end(); ++it) f(i++, *it);
  }
};

JobRequest read_spec(std::string_view text) {
  if (text.size() > kMaxSpecBytes) fail("spec", "longer than " + std::to_string(kMaxSpecBytes) + " bytes");
  const YAML::Node root = load(std::string(text));
  if (!root.IsMap()) fail("spec", "must be a mapping of job fields");
  return detail::read_job<YamlAccess>(root);
}

}  // namespace

std::variant<JobRequest, ParseError> parse_job_spec_yaml(std::string_view yaml) {
  try {
    return read_spec(yaml);
  } catch (const detail::Invalid& e) {
    return ParseError{e.message};
  }
}

}  // namespace aegis::api
