// Issue 32 items 3-4: the --array and --after syntax, and an array element's request.
// Pure; every error is one line naming the field (docs/api.md).
#include <charconv>
#include <fmt/format.h>
#include <set>

#include "runtime/api/detail.h"
#include "runtime/api/request.h"

namespace aegis::api {

namespace {

// A whole non-negative decimal number, or empty.
std::optional<std::int64_t> number(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

ParseError error(std::string_view field, std::string_view what) { return ParseError{fmt::format("{}: {}", field, what)}; }

}  // namespace

std::variant<ArraySpec, ParseError> parse_array(std::string_view text, std::string_view field) {
  const std::string shown = detail::printable(text, 40);
  ArraySpec a;
  if (const auto pct = text.find('%'); pct != std::string_view::npos) {
    const auto limit = number(text.substr(pct + 1));
    if (!limit || *limit < 1 || *limit > static_cast<std::int64_t>(kMaxArrayElements))
      return error(field, fmt::format("'{}': the cap after % must be a whole number from 1 to {}", shown,
                                      kMaxArrayElements));
    a.limit = static_cast<int>(*limit);
    text = text.substr(0, pct);
  }
  if (text.empty()) return error(field, "empty: give indices such as 0-49, 1,3,5-9 or 0-49%8");
  std::set<int> seen;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) return error(field, fmt::format("'{}': ends with a comma", shown));
    const auto dash = part.find('-');
    const auto lo = number(part.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : number(part.substr(dash + 1));
    if (!lo || !hi)
      return error(field, fmt::format("'{}': '{}' is not an index or a range such as 0-49", shown,
                                      detail::printable(part, 20)));
    if (*hi < *lo) return error(field, fmt::format("'{}': range {}-{} goes down", shown, *lo, *hi));
    if (*hi > kMaxArrayIndex) return error(field, fmt::format("'{}': indices go up to {}", shown, kMaxArrayIndex));
    if (*hi - *lo + 1 + static_cast<std::int64_t>(seen.size()) > static_cast<std::int64_t>(kMaxArrayElements))
      return error(field, fmt::format("'{}': more than {} elements", shown, kMaxArrayElements));
    for (auto i = *lo; i <= *hi; ++i)
      if (!seen.insert(static_cast<int>(i)).second)
        return error(field, fmt::format("'{}': index {} given twice", shown, i));
  }
  a.indices.assign(seen.begin(), seen.end());
  return a;
}

std::variant<AfterRef, ParseError> parse_after(std::string_view text, std::string_view field) {
  const std::string shown = detail::printable(text, 40);
  AfterRef r;
  const auto colon = text.find(':');
  if (colon != std::string_view::npos) {
    r.kind = std::string(text.substr(colon + 1));
    if (r.kind != "ok" && r.kind != "any" && r.kind != "failed")
      return error(field, fmt::format("'{}': the condition after ':' must be ok, any or failed", shown));
  }
  const auto id = number(text.substr(0, colon));
  if (!id || *id < 1) return error(field, fmt::format("'{}': must be a job id, then :ok, :any or :failed", shown));
  r.id = *id;
  return r;
}

JobRequest element_request(const JobRequest& job, int index) {
  JobRequest e = job;
  e.array.clear();
  const std::string i = std::to_string(index);
  for (auto& arg : e.command)
    for (std::size_t at = arg.find("{i}"); at != std::string::npos; at = arg.find("{i}", at + i.size()))
      arg.replace(at, 3, i);
  e.env["AEGIS_ARRAY_INDEX"] = i;
  return e;
}

}  // namespace aegis::api
