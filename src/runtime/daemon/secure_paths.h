// The places a root daemon writes must be its own: a directory that another user created
// first, or could change, would let them redirect the daemon's writes through a symbolic
// link, read the database (every job's environment) or put their own socket where users
// submit. Checked once at start, before anything is opened (docs/security.md).
#pragma once
#include <string>

namespace aegis {

// Makes `dir` if missing (mode 0700, parents 0755) and checks it and every directory above
// it, as written and as resolved: each owned by root or the daemon's user, and none
// writable by others, except ancestors with the sticky bit (/tmp) above a directory of our
// own. `private_dir`: `dir` itself must also be closed to group and others (it is made
// 0700 when it is ours and merely readable by them). Returns "" when safe, else one line.
std::string check_daemon_dir(const std::string& what, const std::string& dir, bool private_dir);

}  // namespace aegis
