// Issue 32 item 6, notifications: which lifecycle changes are told and their payload, the
// ETA-slip rule, the delivery queue (bounded per user, round robin, never blocking the
// caller), and the two real deliveries: a command run as the job's owner with the payload
// on stdin (killed past its timeout) and an HTTP POST to a local server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "runtime/daemon/daemon.h"
#include "runtime/daemon/notifier.h"
#include "runtime/daemon/notify.h"
#include "sched/policies.h"
#include "tests/fake_env.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

DaemonJob job_with(std::string_view notify) {
  DaemonJob j;
  j.id = 42;
  j.uid = 1234;
  j.gid = 1234;
  j.user = "ann";
  j.request.name = "train";
  j.request.command = {"true"};
  j.request.notify = std::get<api::NotifySet>(api::parse_notify(notify));
  j.state = JobState::Running;
  Attempt a;
  a.number = 2;
  j.attempts.push_back(a);
  return j;
}

TEST(NotifyMapping, EachLifecycleChangeIsToldAsItsEventOnlyWhenAskedFor) {
  const DaemonJob all = job_with("all");
  const std::vector<std::pair<std::string, std::string>> told = {
      {"launch", "start"}, {"oom", "oom"},      {"requeue", "requeue"},
      {"completed", "end"}, {"failed", "fail"}, {"cancelled", "cancel"}};
  for (const auto& [change, event] : told) {
    const auto n = notice_for(all, change, "why", 100);
    ASSERT_TRUE(n) << change;
    EXPECT_EQ(n->event, event);
  }
  for (const char* change : {"submit", "activity", "exit", "cancel"}) EXPECT_FALSE(notice_for(all, change, "", 100));
  // Only the events asked for; oom asks for the requeue (the recovery) too.
  const DaemonJob some = job_with("start,oom");
  EXPECT_TRUE(notice_for(some, "launch", "", 1));
  EXPECT_TRUE(notice_for(some, "requeue", "", 1));
  EXPECT_FALSE(notice_for(some, "completed", "", 1));
  EXPECT_FALSE(notice_for(job_with(""), "launch", "", 1));  // the default: none
}

TEST(NotifyMapping, ThePayloadCarriesTheDocumentedFields) {
  DaemonJob j = job_with("end");
  j.state = JobState::Completed;
  j.reason = "its own reason";
  const auto n = notice_for(j, "completed", "", 1700000000.5);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->uid, 1234u);
  EXPECT_EQ(n->user, "ann");
  const auto p = nlohmann::json::parse(n->payload);
  EXPECT_EQ(p, nlohmann::json::parse(R"({"version":1,"job":42,"user":"ann","uid":1234,"name":"train","event":"end",
      "state":"completed","reason":"its own reason","time":1700000000.5,"attempt":2})"));
  EXPECT_EQ(n->payload.find('\n'), std::string::npos);  // one line
  // A long reason is cut; a cut inside a UTF-8 sequence is replaced, never thrown over.
  const std::string long_reason = std::string(kNoticeReasonMaxBytes - 1, 'x') + "\xc3\xa9 tail";
  const auto cut = notice_for(j, "completed", long_reason, 1);
  const std::string reason = nlohmann::json::parse(cut->payload)["reason"];
  EXPECT_EQ(reason.substr(reason.size() - 3), "...");
  EXPECT_LT(reason.size(), kNoticeReasonMaxBytes + 8);
}

TEST(NotifyEta, ASlipIsMeasuredFromWhatWasLastTold) {
  EtaSlipWatch w(600);
  EXPECT_FALSE(w.update(1, 1000));       // the first ETA is the promise
  EXPECT_FALSE(w.update(1, 1600));       // 600 s later: not more than the threshold
  const auto slip = w.update(1, 1601);   // 601 s later
  ASSERT_TRUE(slip);
  EXPECT_DOUBLE_EQ(*slip, 601);
  EXPECT_FALSE(w.update(1, 2000));       // measured from 1601 now
  EXPECT_FALSE(w.update(1, 900));        // better news becomes the promise ...
  EXPECT_TRUE(w.update(1, 1501));        // ... so 601 s after it is a slip
  w.forget(1);
  EXPECT_FALSE(w.update(1, 99999));      // forgotten: a new promise
  EXPECT_EQ(w.watched(), 1u);
}

Notice notice(uid_t uid, int k) {
  Notice n;
  n.job = k;
  n.uid = uid;
  n.user = "u" + std::to_string(uid);
  n.event = "start";
  n.payload = "{}";
  return n;
}

// A delivery that blocks until released, recording the order it was called in.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::vector<JobId> order;
  std::string operator()(const Notice& n) {
    std::unique_lock lock(mu);
    order.push_back(n.job);
    cv.wait(lock, [&] { return open; });
    return n.job % 2 ? "" : "refused";
  }
  void release() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

TEST(Notifier, AStuckDeliveryNeverBlocksPostAndTheQueueIsBoundedPerUser) {
  Gate gate;
  NotifierSettings s;
  s.queue_max = 5;
  s.per_user_max = 2;
  Notifier q(s, [&](const Notice& n) { return gate(n); });
  ASSERT_TRUE(q.enabled());
  // User 1's first notice is taken by the worker and stuck there; posting goes on at once.
  EXPECT_TRUE(q.post(notice(1, 1)));
  for (int i = 0; i < 200 && [&] { std::lock_guard l(gate.mu); return gate.order.empty(); }(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(q.post(notice(1, 3)));
  EXPECT_TRUE(q.post(notice(1, 5)));
  EXPECT_FALSE(q.post(notice(1, 7)));  // user 1 has 2 waiting: its share is full
  EXPECT_TRUE(q.post(notice(2, 11)));  // another user still gets in
  EXPECT_TRUE(q.post(notice(3, 21)));
  EXPECT_TRUE(q.post(notice(3, 23)));
  EXPECT_FALSE(q.post(notice(4, 31)));  // 5 waiting in all
  EXPECT_EQ(q.counts().dropped, 2);
  EXPECT_EQ(q.counts().waiting, 5);
  gate.release();
  ASSERT_TRUE(q.wait_idle(60));
  // Round robin over users after the one served last (1): 2, 3, 1, 3, 1.
  EXPECT_EQ(gate.order, (std::vector<JobId>{1, 11, 21, 3, 23, 5}));
  EXPECT_EQ(q.counts().delivered, 6);  // odd jobs succeed (all of these)
  EXPECT_EQ(q.counts().failed, 0);
}

TEST(Notifier, NothingConfiguredMeansNoWorkerAndNothingQueued) {
  Notifier q(NotifierSettings{});
  EXPECT_FALSE(q.enabled());
  EXPECT_FALSE(q.post(notice(1, 1)));
}

// A directory every user may write (the hook runs as another user when we are root).
std::string open_dir() {
  const std::string d = test::temp_path("hook");
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  chmod(d.c_str(), 01777);
  return d;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(NotifyCommand, RunsAsTheJobsOwnerWithThePayloadOnStdin) {
  const std::string d = open_dir();
  const std::string hook = d + "/hook.sh";
  std::ofstream(hook) << "#!/bin/sh\nid -u > " << d << "/$AEGIS_JOB_ID.uid\ncat > " << d
                      << "/$AEGIS_JOB_ID.json\necho \"$1 $AEGIS_NOTIFY_EVENT $USER $(pwd)\" > " << d
                      << "/$AEGIS_JOB_ID.args\n";
  chmod(hook.c_str(), 0755);
  Notice n = notice(geteuid() == 0 ? 65534 : geteuid(), 7);  // root: as nobody
  n.gid = geteuid() == 0 ? 65534 : getegid();
  n.user = "nobody";
  n.event = "end";
  n.payload = R"({"job":7,"event":"end"})";
  EXPECT_EQ(deliver_command(hook, n, 30), "");
  EXPECT_EQ(slurp(d + "/7.uid"), std::to_string(n.uid) + "\n");
  EXPECT_EQ(slurp(d + "/7.json"), n.payload);
  EXPECT_EQ(slurp(d + "/7.args"), "end end nobody /\n");
  // A failing hook's status is the answer.
  std::ofstream(hook) << "#!/bin/sh\nexit 3\n";
  EXPECT_EQ(deliver_command(hook, n, 30), hook + ": exit status 3");
  EXPECT_EQ(deliver_command(d + "/missing", n, 30), d + "/missing: exit status 127 (it could not be run)");
  std::filesystem::remove_all(d);
}

TEST(NotifyCommand, AHangingHookIsKilledAtItsTimeout) {
  const std::string d = open_dir();
  const std::string hook = d + "/hang.sh";
  std::ofstream(hook) << "#!/bin/sh\nsleep 1000 &\necho $! > " << d << "/child\nwait\n";
  chmod(hook.c_str(), 0755);
  Notice n = notice(geteuid() == 0 ? 65534 : geteuid(), 8);
  n.gid = geteuid() == 0 ? 65534 : getegid();
  n.user = "nobody";
  EXPECT_EQ(deliver_command(hook, n, 3), hook + ": still running after 3 s (notify_timeout_s); killed");
  // Its whole session went with it: the sleep it started is gone too.
  const std::string child_text = slurp(d + "/child");
  ASSERT_FALSE(child_text.empty()) << "the hook did not start within 3 s";
  const pid_t child = std::stoi(child_text);
  for (int i = 0; i < 500 && kill(child, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(kill(child, 0), 0);
  std::filesystem::remove_all(d);
}

TEST(NotifyHttp, PostsThePayloadAndReportsAnUnreachableUrl) {
  httplib::Server server;
  std::mutex mu;
  std::string body, event, type;
  server.Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    body = req.body;
    event = req.get_header_value("X-Aegis-Event");
    type = req.get_header_value("Content-Type");
    res.status = 204;
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { server.listen_after_bind(); });
  Notice n = notice(5, 9);
  n.event = "fail";
  n.payload = R"({"job":9,"event":"fail"})";
  EXPECT_EQ(deliver_http("http://127.0.0.1:" + std::to_string(port) + "/hook", n, 10), "");
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(body, n.payload);
    EXPECT_EQ(event, "fail");
    EXPECT_EQ(type, "application/json");
  }
  EXPECT_EQ(deliver_http("http://127.0.0.1:" + std::to_string(port) + "/elsewhere", n, 10),
            "POST http://127.0.0.1:" + std::to_string(port) + "/elsewhere: answered 404");
  server.stop();
  t.join();
  const std::string gone = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  EXPECT_EQ(deliver_http(gone, n, 2).rfind("POST " + gone + ": ", 0), 0u);
}

// aegisd's config for the daemon tests below: a fresh state directory and a hook (in `dir`)
// that appends each payload to <dir>/<job id>.log.
DaemonConfig hook_config(const std::string& dir, const std::string& state) {
  const std::string hook = dir + "/hook.sh";
  std::ofstream(hook) << "#!/bin/sh\n{ cat; echo; } >> " << dir << "/$AEGIS_JOB_ID.log\n";
  chmod(hook.c_str(), 0755);
  DaemonConfig cfg;
  cfg.daemon.state_dir = test::temp_path(state);
  std::filesystem::remove_all(cfg.daemon.state_dir);
  mkdir(cfg.daemon.state_dir.c_str(), 0700);
  cfg.daemon.durability = "normal";
  cfg.daemon.mps_pipe_dir = "/tmp/fake-mps-pipe";
  cfg.daemon.notify_command = hook;
  cfg.engine = policy_config(cfg.daemon.policy);
  return cfg;
}

// The daemon on a fake environment (tests/fake_env.h) with a real hook: a job asking for
// every event is told, in order, of its start, its OOM and requeue, its second start and
// its end; a job asking for nothing is told nothing; the ETA seam tells a slip once.
TEST(NotifyDaemon, TheCommittedChangesOfAJobReachItsHookInOrder) {
  if (geteuid() != 0) GTEST_SKIP() << "the hook runs as the job's (fake) user: needs root";
  const std::string d = open_dir();
  test::FakeEnv env;
  env.gpus = test::fake_gpus(1, 40960);
  DaemonConfig cfg = hook_config(d, "state");
  cfg.daemon.notify_eta_slip_s = 600;
  Daemon daemon(cfg, env);
  auto submit = [&](const std::string& notify) {
    api::SubmitRequest r;
    r.job.command = {"python3", "train.py"};
    r.job.workdir = "/tmp";
    r.job.name = "train";
    r.job.notify = std::get<api::NotifySet>(api::parse_notify(notify));
    const auto reply = daemon.respond(r, Caller{1001, 1001, 1}).object;
    EXPECT_TRUE(reply["ok"].get<bool>()) << reply.dump();
    return reply["id"].get<JobId>();
  };
  auto tick = [&] {
    env.clock += 1;
    daemon.tick(env.clock);
  };
  const JobId told = submit("all");
  tick();
  const JobId quiet = submit("");       // waits behind the first on the one GPU
  const JobId waiting = submit("eta");  // also waits
  env.end(told, 1, 1 << 8, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  tick();
  // The ETA seam: the first ETA is the promise; 601 s later is a slip, told once.
  EXPECT_TRUE(daemon.note_etas({{waiting, env.clock + 100}}, env.clock).empty());
  EXPECT_EQ(daemon.note_etas({{waiting, env.clock + 701}, {quiet, env.clock + 5000}}, env.clock),
            std::vector<JobId>{waiting});
  EXPECT_TRUE(daemon.note_etas({{waiting, env.clock + 800}}, env.clock).empty());
  env.end(told, 2, 0);
  tick();
  ASSERT_TRUE(daemon.notifier().wait_idle(60));
  std::vector<std::string> events;
  std::ifstream log(d + "/" + std::to_string(told) + ".log");
  for (std::string line; std::getline(log, line);) {
    const auto p = nlohmann::json::parse(line);
    EXPECT_EQ(p["job"], told);
    EXPECT_EQ(p["user"], "ann");
    events.push_back(p["event"].get<std::string>() + "/" + std::to_string(p["attempt"].get<int>()) + "/" +
                     p["state"].get<std::string>());
  }
  EXPECT_EQ(events, (std::vector<std::string>{"start/1/running", "oom/1/running", "requeue/1/queued",
                                              "start/2/running", "end/2/completed"}));
  EXPECT_FALSE(std::filesystem::exists(d + "/" + std::to_string(quiet) + ".log"));
  const auto eta = nlohmann::json::parse(slurp(d + "/" + std::to_string(waiting) + ".log"));
  EXPECT_EQ(eta["event"], "eta");
  EXPECT_EQ(eta["slip_s"], 601);
  EXPECT_EQ(daemon.notifier().counts().delivered, 6);
  std::filesystem::remove_all(d);
  std::filesystem::remove_all(cfg.daemon.state_dir);
}

// Issue 32 items 5-6: aegisd itself computes the expected starts at its ticks (every
// notify_eta_check_s) and tells a slip: the job ahead, out of memory at 500 s, starts again
// with a new time limit, so the waiting job's start moves 500 s later.
TEST(NotifyDaemon, AnEtaSlipIsFoundAtTheTicks) {
  if (geteuid() != 0) GTEST_SKIP() << "the hook runs as the job's (fake) user: needs root";
  const std::string d = open_dir();
  test::FakeEnv env;
  env.gpus = test::fake_gpus(1, 40960);
  DaemonConfig cfg = hook_config(d, "state-eta");
  cfg.daemon.notify_eta_slip_s = 100;
  cfg.daemon.notify_eta_check_s = 1;
  Daemon daemon(cfg, env);
  auto submit = [&](MiB mem, const std::string& notify) {
    api::SubmitRequest r;
    r.job.command = {"python3", "train.py"};
    r.job.workdir = "/tmp";
    r.job.mem_mib = mem;
    r.job.time_limit_s = 1000;
    r.job.notify = std::get<api::NotifySet>(api::parse_notify(notify));
    const auto reply = daemon.respond(r, Caller{1001, 1001, 1}).object;
    EXPECT_TRUE(reply["ok"].get<bool>()) << reply.dump();
    return reply["id"].get<JobId>();
  };
  auto tick = [&](Seconds dt) {
    env.clock += dt;
    daemon.tick(env.clock);
  };
  const JobId ahead = submit(20480, "");
  tick(1);
  const JobId waiting = submit(38000, "eta");  // fits only on the whole GPU: waits for `ahead`
  tick(1);                                     // the first ETA: the promise, not told
  tick(1);
  ASSERT_TRUE(daemon.notifier().wait_idle(60));
  EXPECT_FALSE(std::filesystem::exists(d + "/" + std::to_string(waiting) + ".log"));
  tick(497);
  env.end(ahead, 1, 1 << 8, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  tick(1);  // requeued and started again: its new limit ends 500 s later
  tick(1);
  ASSERT_TRUE(daemon.notifier().wait_idle(60));
  const auto told = nlohmann::json::parse(slurp(d + "/" + std::to_string(waiting) + ".log"));
  EXPECT_EQ(told["event"], "eta");
  EXPECT_GE(told["slip_s"].get<double>(), 490);
  EXPECT_LE(told["slip_s"].get<double>(), 510);
  std::filesystem::remove_all(d);
  std::filesystem::remove_all(cfg.daemon.state_dir);
}

TEST(NotifySettings, TheCommandMustBeRootsAndTheUrlHttp) {
  DaemonSettings s;
  EXPECT_EQ(check_notify_settings(s), "");
  s.notify_command = "hook.sh";
  EXPECT_EQ(check_notify_settings(s), "notify_command: hook.sh is not an absolute path");
  s.notify_command = "/bin/true";
  EXPECT_EQ(check_notify_settings(s), "");
  s.notify_url = "ftp://x/";
  EXPECT_EQ(check_notify_settings(s), "notify_url: expected http://HOST[:PORT][/PATH] or https://..., got 'ftp://x/'");
  s.notify_url = "http://127.0.0.1:8080/aegis";
  EXPECT_EQ(check_notify_settings(s), "");
  if (geteuid() == 0) {
    const std::string d = open_dir();
    const std::string hook = d + "/w.sh";
    std::ofstream(hook) << "#!/bin/sh\n";
    chmod(hook.c_str(), 0777);
    s.notify_command = hook;
    EXPECT_EQ(check_notify_settings(s), "notify_command: " + hook + " is writable by group or others");
    std::filesystem::remove_all(d);
  }
}

}  // namespace
}  // namespace aegis
