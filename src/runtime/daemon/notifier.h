// Issue 32 item 6: delivers notices (notify.h) off the event loop. One worker thread takes
// them from a bounded queue, round robin over users (one user's slow hook delays the others
// by at most one timeout per round), and runs the admin's command as the job's owner with
// the payload on stdin, and/or POSTs it to the admin's URL. A failure (non-zero exit,
// timeout, unreachable URL) is logged and counted; a full queue drops the notice (logged).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/daemon/config.h"
#include "runtime/daemon/notify.h"

namespace aegis {

struct NotifierSettings {
  std::string command;             // "" = none
  std::string url;                 // "" = none
  double timeout_s = 10;           // each delivery (command run, or connect/read/write of the POST)
  std::int64_t queue_max = 1000;   // notices waiting, all users
  std::int64_t per_user_max = 100; // notices waiting, one user
  static NotifierSettings from(const DaemonSettings& s);
};

// The daemon settings' one-line problem, or "": notify_command an absolute path of an
// executable regular file owned by root (or the daemon's user), writable by no one else,
// in a directory that passes check_daemon_dir; notify_url http:// or https://HOST[:PORT][/PATH].
std::string check_notify_settings(const DaemonSettings& s);

// One delivery each; "" when delivered, else why not (one line). Both return within about
// timeout_s (the POST: connect, write and read each bounded by it).
// The command runs with argv {command, event}, the payload on stdin, stdout and stderr to
// /dev/null, a fixed environment (PATH, LC_ALL, HOME, USER, LOGNAME, AEGIS_NOTIFY_EVENT,
// AEGIS_JOB_ID), in /, in a session of its own, as the notice's uid, gid and the user's
// groups (never root for another user's job); past the timeout its session is killed.
std::string deliver_command(const std::string& command, const Notice& n, double timeout_s);
std::string deliver_http(const std::string& url, const Notice& n, double timeout_s);

class Notifier {
 public:
  using Deliver = std::function<std::string(const Notice&)>;  // "" delivered, else why
  // With the real deliveries (command, then URL, each when set); no thread when neither is.
  explicit Notifier(NotifierSettings s);
  // With another delivery (tests).
  Notifier(NotifierSettings s, Deliver deliver);
  ~Notifier();  // waits for the delivery in progress (bounded by its timeout); drops the rest
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  bool enabled() const { return static_cast<bool>(deliver_); }
  // Queues a notice and returns at once; false (counted, logged) when the queue or its
  // user's share of it is full.
  bool post(Notice n);
  struct Counts {
    std::int64_t delivered = 0, failed = 0, dropped = 0, waiting = 0;
  };
  Counts counts() const;
  // Until nothing waits or is being delivered, or `seconds` pass; true if idle (tests).
  bool wait_idle(double seconds);

 private:
  void run();
  NotifierSettings s_;
  Deliver deliver_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::map<uid_t, std::deque<Notice>> waiting_;  // per user, in order
  std::size_t total_ = 0;
  uid_t last_served_ = 0;
  bool served_any_ = false;
  bool busy_ = false;
  bool stop_ = false;
  std::int64_t delivered_ = 0, failed_ = 0, dropped_ = 0;
  double last_drop_log_ = -1e300;
  std::thread worker_;
};

}  // namespace aegis
