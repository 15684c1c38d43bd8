// The launch path's parts without a daemon: the launch file, capped logs, the attempt's
// records, process identity (pidfds), a job's processes (descendants, cgroup), and the
// checks of the directories a root daemon writes in.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "runtime/daemon/secure_paths.h"
#include "runtime/launch/attempt_dir.h"
#include "runtime/launch/capped_log.h"
#include "runtime/launch/job_processes.h"
#include "runtime/launch/launch_file.h"
#include "runtime/launch/proc.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A scratch directory of this test's own (mode 0700).
std::string scratch_dir() {
  std::string t = test::temp_path("launch");
  mkdir(t.c_str(), 0700);
  return t;
}

TEST(LaunchFile, RoundTripsEveryField) {
  LaunchFile f;
  f.uid = 1001;
  f.gid = 1002;
  f.user = "ann";
  f.workdir = "/home/ann/run";
  f.argv = {"python3", "train.py", "--lr", "0.1", "", "with=equals"};
  f.env = {"A=1", "LD_PRELOAD=/tmp/x.so", "EMPTY="};
  f.kill_grace_s = 2.5;
  f.log_max_bytes = 1 << 20;
  f.log_tail_bytes = 4096;
  f.log_min_free_bytes = 64 << 20;
  f.cgroup_mount = "/sys/fs/cgroup";
  f.cgroup = "/aegis/1-2/job-3-1";
  auto back = decode_launch_file(encode_launch_file(f));
  ASSERT_TRUE(std::holds_alternative<LaunchFile>(back)) << std::get<std::string>(back);
  const auto& g = std::get<LaunchFile>(back);
  EXPECT_EQ(g.uid, 1001u);
  EXPECT_EQ(g.gid, 1002u);
  EXPECT_EQ(g.user, "ann");
  EXPECT_EQ(g.workdir, f.workdir);
  EXPECT_EQ(g.argv, f.argv);
  EXPECT_EQ(g.env, f.env);
  EXPECT_DOUBLE_EQ(g.kill_grace_s, 2.5);
  EXPECT_EQ(g.log_max_bytes, f.log_max_bytes);
  EXPECT_EQ(g.log_tail_bytes, 4096u);
  EXPECT_EQ(g.log_min_free_bytes, f.log_min_free_bytes);
  EXPECT_EQ(g.cgroup, f.cgroup);
  EXPECT_EQ(g.cgroup_mount, f.cgroup_mount);
}

TEST(LaunchFile, RejectsWhatIsNotOne) {
  LaunchFile f;
  f.argv = {"true"};
  const std::string good = encode_launch_file(f);
  auto error = [](const std::string& data) {
    auto r = decode_launch_file(data);
    return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string("accepted");
  };
  EXPECT_EQ(error(good.substr(0, good.size() - 1)), "launch file: a field without its NUL terminator");
  EXPECT_EQ(error(good.substr(good.find('\0') + 1)), "launch file: no version 1 field");
  EXPECT_EQ(error(good + std::string("bogus=1") + '\0'), "launch file: unknown field 'bogus'");
  EXPECT_EQ(error(good + std::string("uid=x") + '\0'), "launch file: bad value of uid");
  EXPECT_EQ(error(good + std::string("env=NOEQUALS") + '\0'), "launch file: bad env entry");
  LaunchFile rel = f;
  rel.workdir = "relative";
  EXPECT_EQ(error(encode_launch_file(rel)), "launch file: workdir is not absolute");
  LaunchFile none = f;
  none.argv.clear();
  EXPECT_EQ(error(encode_launch_file(none)), "launch file: no command");
}

TEST(CappedLog, KeepsEverythingUnderTheCap) {
  const std::string path = test::temp_path("log");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CappedLog log(fd, 100, 10);
  log.write("hello ", 6);
  log.write("world\n", 6);
  log.finish();
  close(fd);
  EXPECT_EQ(slurp(path), "hello world\n");
  EXPECT_EQ(log.dropped(), 0u);
}

TEST(CappedLog, CutsAtTheCapAndKeepsTheTail) {
  const std::string path = test::temp_path("log");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CappedLog log(fd, 10, 4);
  log.write("0123456789ABCDEF", 16);  // 10 kept, 6 past the cap
  for (int i = 0; i < 5; ++i) log.write("xy", 2);
  log.write("END!", 4);
  log.finish();
  close(fd);
  const std::string text = slurp(path);
  EXPECT_EQ(text.rfind("0123456789\n[aegis: output cut at 10 bytes", 0), 0u) << text;
  // Past the cap: "ABCDEF" + 10 x-y bytes + "END!" = 20 bytes, of which the last 4 are kept.
  EXPECT_NE(text.find("[aegis: 16 bytes of output were dropped; the last 4 bytes follow]\nEND!"), std::string::npos)
      << text;
  EXPECT_EQ(text.substr(text.size() - 4), "END!");
  EXPECT_EQ(log.dropped(), 16u);
  EXPECT_EQ(log.written(), 10u);
}

TEST(CappedLog, TailWrapsAroundInOrder) {
  const std::string path = test::temp_path("log");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CappedLog log(fd, 1, 5);
  log.write("a", 1);
  for (char c = 'b'; c <= 'k'; ++c) log.write(&c, 1);  // the ring turns twice
  log.finish();
  close(fd);
  const std::string text = slurp(path);
  EXPECT_EQ(text.substr(text.size() - 5), "ghijk") << text;
}

TEST(CappedLog, AWriteErrorLosesBytesNotTheJob) {
  // A pipe nobody drains stands for a full disk: writes fail (EAGAIN), then work again.
  int p[2];
  ASSERT_EQ(pipe2(p, O_NONBLOCK), 0);
  const int size = fcntl(p[1], F_GETPIPE_SZ);
  CappedLog log(p[1], 0, 0);
  const std::string fill(static_cast<std::size_t>(size), 'f');
  log.write(fill.data(), fill.size());
  log.write("lost", 4);
  EXPECT_EQ(log.dropped(), 4u);
  std::string drained(static_cast<std::size_t>(size), '\0');
  ASSERT_EQ(read(p[0], drained.data(), drained.size()), size);
  log.write("back", 4);
  char buf[256] = {};
  const ssize_t n = read(p[0], buf, sizeof buf - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)).find("[aegis: 4 bytes of output were lost"), 1u);
  EXPECT_NE(std::string(buf).find("back"), std::string::npos);
  close(p[0]);
  close(p[1]);
}

TEST(CappedLog, OutputStopsAboveTheFreeSpaceGuard) {
  // No filesystem has this much free: every byte is held back, counted, and the log ends
  // with one line saying why (no note per write, which would fill the disk by itself).
  const std::string path = test::temp_path("log");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CappedLog log(fd, 0, 0, std::uint64_t{1} << 62);
  for (int i = 0; i < 1000; ++i) log.write("0123456789", 10);
  EXPECT_EQ(log.written(), 0u);
  EXPECT_EQ(log.dropped(), 10000u);
  EXPECT_EQ(slurp(path), "");
  log.finish();
  close(fd);
  const std::string text = slurp(path);
  EXPECT_NE(text.find("[aegis: 10000 bytes of output were lost: its filesystem keeps"), std::string::npos) << text;
  EXPECT_NE(text.find("(log_min_free_bytes)]"), std::string::npos) << text;
  // A guard any filesystem meets writes everything.
  const int fd2 = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CappedLog small(fd2, 0, 0, 1);
  small.write("kept\n", 5);
  small.finish();
  close(fd2);
  EXPECT_EQ(slurp(path), "kept\n");
}

LaunchFile a_launch() {
  LaunchFile f;
  f.uid = getuid();
  f.gid = getgid();
  f.argv = {"true"};
  return f;
}

TEST(AttemptDir, PreparedExclusivelyWithPendingRecords) {
  const std::string state = scratch_dir();
  const AttemptDir d = attempt_dir(state, 7, 1);
  prepare_attempt(d, a_launch());
  for (const auto& f : {d.launch(), d.child(), d.exit(), d.lock(), d.stdout_log(), d.stderr_log()}) {
    struct stat st {};
    ASSERT_EQ(lstat(f.c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  EXPECT_EQ(slurp(d.child()).size(), kRecordBytes);
  EXPECT_EQ(read_child(d).status, Record<ChildRecord>::Pending);
  EXPECT_EQ(read_exit(d).status, Record<ExitRecord>::Pending);
  EXPECT_EQ(attempt_liveness(d), Liveness::Gone);

  // Never started: a second preparation replaces it. Started: never.
  prepare_attempt(d, a_launch());
  ChildRecord c;
  c.pgid = 1234;
  c.shim = {4321, 99};
  ASSERT_TRUE(write_record(d.child(), child_record_text(c)));
  EXPECT_EQ(slurp(d.child()).size(), kRecordBytes);
  const auto back = read_child(d);
  ASSERT_TRUE(back.written());
  EXPECT_EQ(back.value.pgid, 1234);
  EXPECT_EQ(back.value.shim, (ProcessRef{4321, 99}));
  try {
    prepare_attempt(d, a_launch());
    FAIL() << "an attempt that started was replaced";
  } catch (const LaunchError& e) {
    EXPECT_NE(std::string(e.what()).find("in use already exists"), std::string::npos) << e.what();
  }
}

TEST(AttemptDir, ExitRecordInPlaceAndLiveness) {
  const std::string state = scratch_dir();
  const AttemptDir d = attempt_dir(state, 8, 2);
  prepare_attempt(d, a_launch());
  const int held = open(d.lock().c_str(), O_RDWR);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  EXPECT_EQ(attempt_liveness(d), Liveness::Alive);
  close(held);
  EXPECT_EQ(attempt_liveness(d), Liveness::Gone);
  ExitRecord e;
  e.wait_status = 3 << 8;
  e.ended_at = 12.5;
  e.start_error = std::string(1000, 'x');  // cut to fit the record, the fields kept
  e.log_dropped_bytes = 42;
  ASSERT_TRUE(write_record(d.exit(), exit_record_text(e)));
  EXPECT_EQ(slurp(d.exit()).size(), kRecordBytes);
  const auto r = read_exit(d);
  ASSERT_TRUE(r.written());
  EXPECT_EQ(r.value.wait_status, 3 << 8);
  EXPECT_EQ(r.value.log_dropped_bytes, 42u);
  EXPECT_EQ(r.value.start_error.size(), 300u);
  // An unreadable record (here: a directory where it should be) is not a pending one.
  ASSERT_EQ(unlink(d.exit().c_str()), 0);
  ASSERT_EQ(mkdir(d.exit().c_str(), 0700), 0);
  EXPECT_EQ(read_exit(d).status, Record<ExitRecord>::Unreadable);
}

TEST(LaunchError, FullDisksAndDescriptorsAreTransient) {
  EXPECT_TRUE(LaunchError("x", ENOSPC).transient());
  EXPECT_TRUE(LaunchError("x", EMFILE).transient());
  EXPECT_FALSE(LaunchError("x", ENOENT).transient());
  EXPECT_FALSE(LaunchError("x", EEXIST).transient());
}

TEST(Proc, PidfdsNameOneProcessForGood) {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  const auto start = process_start_ticks(child);
  ASSERT_TRUE(start);
  EXPECT_EQ(open_pidfd({child, *start + 1}), -1);  // another process's start time: refused
  const int fd = open_pidfd({child, *start});
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(pidfd_signal(fd, SIGKILL));
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st));
  EXPECT_FALSE(pidfd_signal(fd, SIGKILL));  // reaped: nothing to signal, whoever has the pid now
  close(fd);
  EXPECT_FALSE(signal_process({child, *start}, SIGKILL));
  EXPECT_EQ(process_uid(getpid()), getuid());
}

// A job's tree: a child that starts a grandchild in a new session, then waits.
pid_t start_tree(int report_fd) {
  const pid_t child = fork();
  if (child == 0) {
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      setsid();
      pause();
      _exit(0);
    }
    (void)!write(report_fd, &grandchild, sizeof grandchild);
    pause();
    _exit(0);
  }
  return child;
}

TEST(JobProcesses, DescendantsOfTheShimIncludeEscapedOnes) {
  // This test process plays the shim: a subreaper, so orphans come back to it.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = start_tree(p[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(read(p[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  const auto procs = JobProcesses::descendants({getpid(), *process_start_ticks(getpid())});
  EXPECT_TRUE(procs.contains(child));
  EXPECT_TRUE(procs.contains(grandchild));
  EXPECT_FALSE(procs.contains(getppid()));
  EXPECT_EQ(procs.list().size(), 2u);
  EXPECT_EQ(procs.signal(SIGKILL), 2);
  for (int i = 0; i < 2; ++i) waitpid(-1, nullptr, 0);
  EXPECT_FALSE(procs.any());
  close(p[0]);
  close(p[1]);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST(JobProcesses, ASessionOfAnotherUserIsNotTheJobs) {
  const pid_t child = fork();
  if (child == 0) {
    setsid();
    pause();
    _exit(0);
  }
  for (int i = 0; i < 6000 && session_of(child) != child; ++i) usleep(5000);  // up to 30 s: a loaded machine
  EXPECT_EQ(session_of(child), child);
  const auto ticks = *process_start_ticks(child);
  EXPECT_TRUE(JobProcesses::session(child, getuid(), ticks).contains(child));
  EXPECT_FALSE(JobProcesses::session(child, getuid() + 1, ticks).contains(child));  // someone else's
  EXPECT_FALSE(JobProcesses::session(child, getuid(), ticks + 1).contains(child));  // older than the job
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(JobProcesses, CgroupHoldsEveryProcessAndKillsThemAtOnce) {
  std::string why;
  const std::string mount = cgroup2_mount();
  const auto base = prepare_cgroup_base(mount, "unit-" + std::to_string(getpid()), &why);
  if (!base) GTEST_SKIP() << "no cgroup v2 for this process: " << why;
  const std::string job = *base + "/job-1-1";
  ASSERT_TRUE(create_cgroup(mount + job));
  int go[2], p[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = fork();
  if (child == 0) {
    char c;
    (void)!read(go[0], &c, 1);  // joined first, then the tree
    start_tree(p[1]);
    pause();
    _exit(0);
  }
  ASSERT_TRUE(join_cgroup(mount + job, child));
  ASSERT_EQ(write(go[1], "g", 1), 1);
  pid_t grandchild = 0;
  ASSERT_EQ(read(p[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  const auto procs = JobProcesses::cgroup(mount, job);
  EXPECT_TRUE(procs.contains(child));
  EXPECT_TRUE(procs.contains(grandchild));  // in a session of its own, still in the cgroup
  EXPECT_FALSE(procs.contains(getpid()));
  EXPECT_EQ(procs.list().size(), 3u);
  procs.kill();
  waitpid(child, nullptr, 0);
  for (int i = 0; i < 3000 && procs.any(); ++i) usleep(10000);  // up to 30 s: a loaded machine
  EXPECT_FALSE(procs.any());
  EXPECT_TRUE(remove_cgroup(mount + job));
  remove_cgroup(mount + *base);
}

TEST(SecurePaths, RefusesDirectoriesOthersCanChange) {
  const std::string base = scratch_dir();
  // Made when missing: private, parents traversable.
  const std::string fresh = base + "/a/b/state";
  EXPECT_EQ(check_daemon_dir("state_dir", fresh, true), "");
  struct stat st {};
  ASSERT_EQ(stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Ours but readable by others: made private.
  const std::string readable = base + "/readable";
  mkdir(readable.c_str(), 0755);
  chmod(readable.c_str(), 0755);
  EXPECT_EQ(check_daemon_dir("state_dir", readable, true), "");
  stat(readable.c_str(), &st);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Writable by others: refused, itself or as a parent (unless sticky and root's).
  const std::string open_dir = base + "/open";
  mkdir(open_dir.c_str(), 0777);
  chmod(open_dir.c_str(), 0777);
  EXPECT_NE(check_daemon_dir("state_dir", open_dir, true).find("writable by group or others"), std::string::npos);
  EXPECT_NE(check_daemon_dir("state_dir", open_dir + "/inside", true).find(open_dir), std::string::npos);
  // A link in the path is followed, and what it leads to is checked too.
  const std::string link = base + "/link";
  ASSERT_EQ(symlink(open_dir.c_str(), link.c_str()), 0);
  EXPECT_NE(check_daemon_dir("socket", link, false).find("writable by group or others"), std::string::npos);
  EXPECT_NE(check_daemon_dir("socket", "relative/dir", false).find("not an absolute path"), std::string::npos);
  if (geteuid() == 0) {
    const std::string theirs = base + "/theirs";
    mkdir(theirs.c_str(), 0700);
    ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
    EXPECT_NE(check_daemon_dir("state_dir", theirs, true).find("owned by uid 65534"), std::string::npos);
    EXPECT_NE(check_daemon_dir("state_dir", theirs + "/sub", true).find("owned by uid 65534"), std::string::npos);
  }
}

}  // namespace
}  // namespace aegis
