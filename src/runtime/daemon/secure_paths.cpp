#include "runtime/daemon/secure_paths.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace aegis {

namespace {

bool trusted_owner(uid_t uid) { return uid == 0 || uid == geteuid(); }

// Every prefix of an absolute path: "/", "/a", "/a/b".
std::vector<std::string> prefixes(const std::string& path) {
  std::vector<std::string> out = {"/"};
  for (std::size_t p = 1; p <= path.size(); ++p)
    if ((p == path.size() || path[p] == '/') && path[p - 1] != '/') out.push_back(path.substr(0, p));
  return out;
}

// Checks one chain of path components (no following of links here: lstat).
std::string check_chain(const std::string& what, const std::string& path) {
  const auto parts = prefixes(path);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) return fmt::format("{}: {}: {}", what, p, std::strerror(errno));
    const bool last = i + 1 == parts.size();
    if (!trusted_owner(st.st_uid))
      return fmt::format("{}: {} is owned by uid {}, not by root or aegisd's user (uid {}): another user could "
                         "redirect or read what aegisd keeps there; refusing to start (docs/security.md)",
                         what, p, st.st_uid, geteuid());
    if (S_ISLNK(st.st_mode)) continue;  // its target is checked as part of the resolved path
    if (!S_ISDIR(st.st_mode)) return fmt::format("{}: {} is not a directory", what, p);
    const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    // A sticky, root-owned directory (/tmp) lets others add entries but not replace ours:
    // fine above a directory of our own, never as the directory itself.
    if (others_write && !(!last && (st.st_mode & S_ISVTX) && st.st_uid == 0))
      return fmt::format("{}: {} is writable by group or others (mode {:o}): another user could replace what "
                         "aegisd keeps there; refusing to start (docs/security.md)",
                         what, p, st.st_mode & 07777);
  }
  return "";
}

}  // namespace

std::string check_daemon_dir(const std::string& what, const std::string& dir, bool private_dir) {
  if (dir.empty() || dir[0] != '/') return fmt::format("{}: {} is not an absolute path", what, dir);
  // Parents first, so that we never create anything inside a directory we do not trust.
  const auto parts = prefixes(dir);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    struct stat st {};
    if (lstat(parts[i].c_str(), &st) == 0) continue;
    if (errno != ENOENT) return fmt::format("{}: {}: {}", what, parts[i], std::strerror(errno));
    if (i > 0) {
      if (auto e = check_chain(what, parts[i - 1]); !e.empty()) return e;
    }
    if (mkdir(parts[i].c_str(), last && private_dir ? 0700 : 0755) != 0 && errno != EEXIST)
      return fmt::format("{}: cannot create {}: {}", what, parts[i], std::strerror(errno));
  }
  if (auto e = check_chain(what, dir); !e.empty()) return e;
  char real[PATH_MAX];
  if (!realpath(dir.c_str(), real)) return fmt::format("{}: {}: {}", what, dir, std::strerror(errno));
  if (auto e = check_chain(what, real); !e.empty()) return e;
  struct stat st {};
  if (lstat(real, &st) != 0) return fmt::format("{}: {}: {}", what, real, std::strerror(errno));
  if (st.st_uid != geteuid())
    return fmt::format("{}: {} is owned by uid {}, not by aegisd's user (uid {}); refusing to start", what, real,
                       st.st_uid, geteuid());
  if (private_dir && (st.st_mode & 077) != 0 && chmod(real, 0700) != 0)
    return fmt::format("{}: {}: cannot make it private (chmod 0700): {}", what, real, std::strerror(errno));
  return "";
}

}  // namespace aegis
