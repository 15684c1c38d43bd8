#include "runtime/launch/launch_file.h"

#include <charconv>
#include <cstdlib>

namespace aegis {

namespace {

void field(std::string& out, std::string_view key, std::string_view value) {
  out.append(key);
  out += '=';
  out.append(value);
  out += '\0';
}

template <class T>
bool parse_number(std::string_view v, T& out) {
  const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  return r.ec == std::errc() && r.ptr == v.data() + v.size();
}

}  // namespace

std::string encode_launch_file(const LaunchFile& f) {
  std::string out;
  field(out, "version", "1");
  field(out, "uid", std::to_string(f.uid));
  field(out, "gid", std::to_string(f.gid));
  field(out, "user", f.user);
  field(out, "workdir", f.workdir);
  field(out, "grace", std::to_string(f.kill_grace_s));
  field(out, "log_max_bytes", std::to_string(f.log_max_bytes));
  field(out, "log_tail_bytes", std::to_string(f.log_tail_bytes));
  field(out, "log_min_free_bytes", std::to_string(f.log_min_free_bytes));
  field(out, "cgroup_mount", f.cgroup_mount);
  field(out, "cgroup", f.cgroup);
  for (const auto& a : f.argv) field(out, "arg", a);
  for (const auto& e : f.env) field(out, "env", e);
  return out;
}

std::variant<LaunchFile, std::string> decode_launch_file(std::string_view data) {
  LaunchFile f;
  bool version = false;
  while (!data.empty()) {
    const auto nul = data.find('\0');
    if (nul == std::string_view::npos) return std::string("launch file: a field without its NUL terminator");
    const std::string_view item = data.substr(0, nul);
    data.remove_prefix(nul + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) return std::string("launch file: a field without '='");
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    bool ok = true;
    if (key == "version") ok = version = value == "1";
    else if (key == "uid") ok = parse_number(value, f.uid);
    else if (key == "gid") ok = parse_number(value, f.gid);
    else if (key == "user") f.user = value;
    else if (key == "workdir") f.workdir = value;
    else if (key == "grace") {
      f.kill_grace_s = std::strtod(std::string(value).c_str(), nullptr);
      ok = f.kill_grace_s >= 0;
    } else if (key == "log_max_bytes") ok = parse_number(value, f.log_max_bytes);
    else if (key == "log_tail_bytes") ok = parse_number(value, f.log_tail_bytes);
    else if (key == "log_min_free_bytes") ok = parse_number(value, f.log_min_free_bytes);
    else if (key == "cgroup_mount") f.cgroup_mount = value;
    else if (key == "cgroup") f.cgroup = value;
    else if (key == "arg") f.argv.emplace_back(value);
    else if (key == "env") {
      if (value.find('=') == std::string_view::npos || value.front() == '=') return "launch file: bad env entry";
      f.env.emplace_back(value);
    } else {
      return "launch file: unknown field '" + std::string(key.substr(0, 32)) + "'";
    }
    if (!ok) return "launch file: bad value of " + std::string(key);
  }
  if (!version) return std::string("launch file: no version 1 field");
  if (f.argv.empty() || f.argv.front().empty()) return std::string("launch file: no command");
  if (f.workdir.empty() || f.workdir.front() != '/') return std::string("launch file: workdir is not absolute");
  if (f.cgroup.empty() != f.cgroup_mount.empty()) return std::string("launch file: cgroup without its mount");
  return f;
}

}  // namespace aegis
