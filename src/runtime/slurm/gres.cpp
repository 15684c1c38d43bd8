#include "runtime/slurm/gres.h"

#include <limits>

namespace aegis::slurm {

std::optional<std::uint64_t> parse_count(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t n = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  if (i == 0) return std::nullopt;
  if (i == text.size()) return n;
  if (i + 1 != text.size()) return std::nullopt;
  int shift = 0;
  switch (text[i]) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    case 'p': case 'P': shift = 50; break;
    default: return std::nullopt;
  }
  if (n > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
  return n << shift;
}

std::string mib_count(MiB mib) { return std::to_string(mib) + "M"; }

std::vector<GresEntry> parse_gres_list(std::string_view text) {
  std::vector<GresEntry> out;
  if (text == "(null)" || text == "N/A") return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.rfind("gres:", 0) == 0) item.remove_prefix(5);
    else if (item.rfind("gres/", 0) == 0) item.remove_prefix(5);  // TRES form: gres/NAME=COUNT
    if (item.empty()) continue;
    std::vector<std::string> parts;
    std::size_t p = 0;
    while (p <= item.size()) {
      const std::size_t colon = std::min(item.find_first_of(":=", p), item.size());
      parts.emplace_back(item.substr(p, colon - p));
      p = colon + 1;
    }
    GresEntry e;
    e.name = parts[0];
    e.count = "1";
    if (parts.size() == 2) {
      // NAME:COUNT or NAME:TYPE (a type never starts with a digit in practice).
      if (parse_count(parts[1])) e.count = parts[1];
      else e.type = parts[1];
    } else if (parts.size() >= 3) {
      e.type = parts[1];
      e.count = parts[2];
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string with_count(const std::vector<GresEntry>& list, const std::string& name, const std::string& count) {
  std::string out;
  bool found = false;
  for (const auto& e : list) {
    std::string item = e.name + (e.type.empty() ? "" : ":" + e.type) + ":";
    if (e.name == name && !found) {
      item += count;
      found = true;
    } else if (e.name == name) {
      continue;  // one booking of GPU memory per job
    } else {
      item += e.count;
    }
    out += (out.empty() ? "" : ",") + item;
  }
  if (!found) out += (out.empty() ? "" : ",") + name + ":" + count;
  return out;
}

std::optional<MiB> booked_mib(const std::vector<GresEntry>& list, const std::string& name) {
  std::uint64_t bytes = 0;
  bool any = false;
  for (const auto& e : list) {
    if (e.name != name) continue;
    const auto n = parse_count(e.count);
    if (!n) continue;
    bytes += *n;
    any = true;
  }
  if (!any) return std::nullopt;
  return static_cast<MiB>(bytes >> 20);
}

}  // namespace aegis::slurm
