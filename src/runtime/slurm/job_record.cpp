#include "runtime/slurm/job_record.h"

#include <cctype>
#include <cstdlib>

namespace aegis::slurm {

namespace {

// "Key=" where Key is letters, digits and the punctuation Slurm uses in its keys
// (AllocNode:Sid, CPUs/Task, ReqB:S:C:T).
std::size_t key_length(std::string_view word) {
  if (word.empty() || !std::isalpha(static_cast<unsigned char>(word[0]))) return 0;
  for (std::size_t i = 1; i < word.size(); ++i) {
    const char c = word[i];
    if (c == '=') return i;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':' && c != '/') return 0;
  }
  return 0;
}

std::string none_if_null(const std::string& v) { return v == "(null)" || v == "N/A" ? "" : v; }

}  // namespace

std::optional<JobRecord> parse_job_record(std::string_view line) {
  JobRecord r;
  std::string* last = nullptr;
  std::size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\n' || line[pos] == '\t')) ++pos;
    if (pos >= line.size()) break;
    std::size_t end = line.find_first_of(" \n\t", pos);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view word = line.substr(pos, end - pos);
    pos = end;
    if (const std::size_t k = key_length(word); k > 0) {
      last = &r.fields[std::string(word.substr(0, k))];
      *last = std::string(word.substr(k + 1));
    } else if (last) {
      *last += " ";
      *last += word;
    }
  }
  auto get = [&](const char* k) {
    auto it = r.fields.find(k);
    return it == r.fields.end() ? std::string() : it->second;
  };
  r.id = get("JobId");
  if (r.id.empty()) return std::nullopt;
  const std::string user = get("UserId");
  if (const auto open = user.find('('); open != std::string::npos) {
    char* end = nullptr;
    const unsigned long uid = std::strtoul(user.c_str() + open + 1, &end, 10);
    if (end && *end == ')') r.uid = static_cast<uid_t>(uid);
  }
  r.state = get("JobState");
  r.partition = get("Partition");
  r.nodes = none_if_null(get("NodeList"));
  r.excluded_nodes = none_if_null(get("ExcNodeList"));
  r.tres_per_node = none_if_null(get("TresPerNode"));
  r.requeue_allowed = get("Requeue") == "1";
  r.restarts = std::atoi(get("Restarts").c_str());
  return r;
}

}  // namespace aegis::slurm
