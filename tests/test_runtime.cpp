// The daemon's parts that need no process: exit classification, the store, the config.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sqlite3.h>
#include <sstream>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/daemon/config.h"
#include "runtime/job/classify.h"
#include "runtime/job/job_json.h"
#include "runtime/job/job_signature.h"
#include "runtime/launch/launcher.h"
#include "runtime/store/id_floor.h"
#include "runtime/store/store.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

int exited(int code) { return code << 8; }  // a wait status for exit(code)

TEST(Classify, SuccessFailureAndSignals) {
  EXPECT_EQ(classify_exit(exited(0), "", false).kind, ExitKind::Success);
  auto v = classify_exit(exited(2), "Traceback: ValueError: bad input\n", false);
  EXPECT_EQ(v.kind, ExitKind::Failed);
  EXPECT_EQ(v.reason, "exit status 2");
  v = classify_exit(SIGKILL, "", false);
  EXPECT_EQ(v.kind, ExitKind::Failed);
  EXPECT_EQ(v.reason.rfind("killed by signal 9", 0), 0u);
  EXPECT_EQ(classify_exit(SIGTERM, "", true).kind, ExitKind::Cancelled);
  v = classify_exit(std::nullopt, "", false);
  EXPECT_EQ(v.reason, "ended while the daemon was down; exit status unknown");
}

TEST(Classify, OutOfMemoryMessagesOfTheFrameworks) {
  const char* lines[] = {
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 39.39 GiB total capacity)",
      "RuntimeError: CUDA error: out of memory",
      "torch.cuda.OutOfMemoryError: ...",
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape",
      "2023-01-01 W tensorflow/core/common_runtime/bfc_allocator.cc] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.2GiB",
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.",
      "CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
      "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
      "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
      "cudaErrorMemoryAllocation",
      "E external/xla: Failed to allocate request for 1.00GiB (1073741824B) on device ordinal 0",
      "Killed (OOM)",
  };
  for (const char* l : lines) {
    const std::string log = std::string("epoch 1 loss 0.3\n") + l + "\nexiting\n";
    const auto v = classify_exit(exited(1), log, false);
    EXPECT_EQ(v.kind, ExitKind::Oom) << l;
    EXPECT_EQ(v.reason, std::string(l).substr(0, 300)) << l;
  }
  // Words that merely contain "oom" are not OOM.
  EXPECT_EQ(classify_exit(exited(1), "zoom level 3\nbroom closet\nroom=4\n", false).kind, ExitKind::Failed);
  // A job killed by a signal whose log says it ran out of memory is an OOM too.
  EXPECT_EQ(classify_exit(SIGABRT, "CUDA out of memory.\n", false).kind, ExitKind::Oom);
}

// The line aegisd believes only with an outage it saw itself (mps_supervisor.h, issue 33).
TEST(Classify, MpsConnectionFailureLine) {
  const std::string line =
      "RuntimeError: CUDA error: MPS client failed to connect to the MPS control daemon or the MPS server";
  EXPECT_EQ(find_mps_connect_line("loading data\n" + line + "\n"), line);
  EXPECT_FALSE(find_mps_connect_line("MPS client connected\nepoch 1\n"));
  // Alone it is an ordinary failure: the daemon decides with what it saw of the daemon.
  EXPECT_EQ(classify_exit(exited(1), line, false).kind, ExitKind::Failed);
}

DaemonJob make_job(const std::string& name) {
  DaemonJob j;
  j.uid = 1000;
  j.gid = 1000;
  j.user = "alice";
  j.request.name = name;
  j.request.command = {"/bin/echo", "hi"};
  j.request.workdir = "/tmp";
  j.request.env = {{"A", "1"}};
  j.request.mem_mib = 12000;
  j.submitted_at = 1000;
  return j;
}

TEST(Store, JobsSurviveReopeningWithTheirAttemptsInQueueOrder) {
  const std::string path = test::temp_path("store.db");
  {
    Store s(path, false);
    DaemonJob a = make_job("a"), b = make_job("b"), c = make_job("c");
    s.insert(a);
    s.insert(b);
    s.insert(c);
    EXPECT_EQ(a.id + 1, b.id);
    EXPECT_LT(a.queue_seq, b.queue_seq);
    // a runs; c finishes; b waits.
    a.state = JobState::Running;
    Attempt at;
    at.number = 1;
    at.gpu_uuids = {"GPU-1"};
    at.launched_at = 1001;
    at.first_activity = 1003.5;
    at.pgid = 4242;
    a.attempts.push_back(at);
    a.attached_to = ClientProcess{777, 123456789012ull};
    s.begin();
    s.update(a);
    c.state = JobState::Completed;
    s.update(c);
    s.event(a.id, 1001, "launch", "attempt 1");
    s.commit();
    // A rolled-back change leaves nothing.
    s.begin();
    b.state = JobState::Cancelled;
    s.update(b);
    s.rollback();
  }
  Store s(path, true);
  const auto unfinished = s.unfinished();
  ASSERT_EQ(unfinished.size(), 2u);
  EXPECT_EQ(unfinished[0].request.name, "a");
  EXPECT_EQ(unfinished[0].state, JobState::Running);
  ASSERT_EQ(unfinished[0].attempts.size(), 1u);
  EXPECT_EQ(unfinished[0].attempts[0].pgid, 4242);
  EXPECT_DOUBLE_EQ(*unfinished[0].attempts[0].first_activity, 1003.5);
  EXPECT_EQ(unfinished[0].request.env.at("A"), "1");
  EXPECT_EQ(*unfinished[0].request.mem_mib, 12000);
  ASSERT_TRUE(unfinished[0].attached_to);
  EXPECT_EQ(unfinished[0].attached_to->pid, 777);
  EXPECT_EQ(unfinished[0].attached_to->start_ticks, 123456789012ull);
  EXPECT_FALSE(unfinished[1].attached_to);
  EXPECT_EQ(unfinished[1].request.name, "b");
  EXPECT_EQ(unfinished[1].state, JobState::Queued);
  EXPECT_EQ(s.list(true, 10).size(), 3u);
  EXPECT_EQ(s.events(unfinished[0].id).size(), 1u);
  EXPECT_FALSE(s.get(999).has_value());
  // New jobs queue after the old ones.
  DaemonJob d = make_job("d");
  s.insert(d);
  EXPECT_GT(d.queue_seq, unfinished[1].queue_seq);
  std::remove(path.c_str());
}

// Runs SQL on a database file behind the store's back (as a damaged disk or an admin
// would); returns the first column of the first row, if any.
std::string raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::string out;
  const char* tail = sql.c_str();
  while (tail && *tail) {
    EXPECT_EQ(sqlite3_prepare_v2(db, tail, -1, &st, &tail), SQLITE_OK) << sqlite3_errmsg(db) << " in " << sql;
    if (!st) break;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
      if (out.empty() && sqlite3_column_text(st, 0)) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    EXPECT_EQ(rc, SQLITE_DONE) << sqlite3_errmsg(db) << " in " << sql;
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

// Backfill's durations are rebuilt at start from these (issue 32): per signature (jobs.signature,
// schema 4), only the last N attempts that completed successfully, by end, oldest end first.
TEST(Store, RecentSuccessfulRunsAreEachSignaturesLastNCompletedAttempts) {
  const std::string path = test::temp_path("successful.db");
  remove_db(path);
  Store s(path, false);
  auto attempt = [](int number, Seconds launched, std::optional<Seconds> ended, AttemptOutcome outcome) {
    Attempt a;
    a.number = number;
    a.gpu_uuids = {"GPU-1"};
    a.launched_at = launched;
    a.ended_at = ended;
    a.outcome = outcome;
    return a;
  };
  // Five runs of one command (ended at 500, 100, 400, 200, 300: not in id order), the first
  // after an OOM; one of another user's tagged 2-GPU command; one running, one failed.
  std::vector<DaemonJob> echo(5, make_job("echo"));
  const Seconds ends[] = {500, 100, 400, 200, 300};
  DaemonJob tagged = make_job("tagged"), running = make_job("running"), failed = make_job("failed");
  tagged.uid = 1001;
  tagged.request.gpus = 2;
  tagged.request.tags = {"lr", "bert"};
  for (auto& j : echo) s.insert(j);
  for (DaemonJob* j : {&tagged, &running, &failed}) s.insert(*j);
  echo[0].attempts = {attempt(1, 10, 50, AttemptOutcome::Oom), attempt(2, 60, ends[0], AttemptOutcome::Completed)};
  for (std::size_t i = 1; i < echo.size(); ++i)
    echo[i].attempts = {attempt(1, ends[i] - 10 * static_cast<double>(i), ends[i], AttemptOutcome::Completed)};
  for (std::size_t i = 0; i < echo.size(); ++i) {
    echo[i].state = JobState::Completed;
    echo[i].ended_at = ends[i];  // a job ends with its successful attempt
  }
  tagged.attempts = {attempt(1, 300, 450, AttemptOutcome::Completed)};
  tagged.state = JobState::Completed;
  tagged.ended_at = 450;
  running.attempts = {attempt(1, 500, std::nullopt, AttemptOutcome::Running)};
  running.state = JobState::Running;
  failed.attempts = {attempt(1, 590, 600, AttemptOutcome::Failed)};
  failed.state = JobState::Failed;
  failed.ended_at = 600;
  for (auto& j : echo) s.update(j);
  for (DaemonJob* j : {&tagged, &running, &failed}) s.update(*j);
  // The column holds the daemon's own signature (job_signature.h), whatever the tags' order.
  EXPECT_EQ(raw_sql(path, "SELECT signature FROM jobs WHERE id = " + std::to_string(tagged.id)), signature_of(tagged));
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(DISTINCT signature) FROM jobs"), "2");
  const std::string echo_sig = signature_of(echo[0]), tagged_sig = signature_of(tagged);
  ASSERT_NE(echo_sig, tagged_sig);

  const auto two = s.recent_successful_runs(2);
  ASSERT_EQ(two.size(), 3u);  // echo's last two (400, 500) and the tagged one; not 100, 200, 300
  EXPECT_EQ(two[0].signature, echo_sig);
  EXPECT_DOUBLE_EQ(two[0].ended_at, 400);
  EXPECT_DOUBLE_EQ(two[0].ended_at - two[0].launched_at, 20);
  EXPECT_EQ(two[1].signature, tagged_sig);
  EXPECT_DOUBLE_EQ(two[1].launched_at, 300);
  EXPECT_EQ(two[2].signature, echo_sig);
  EXPECT_DOUBLE_EQ(two[2].launched_at, 60);  // its successful attempt, not the OOM
  EXPECT_DOUBLE_EQ(two[2].ended_at, 500);

  const auto all = s.recent_successful_runs(10);  // a window larger than the runs: all six, by end
  ASSERT_EQ(all.size(), 6u);
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].ended_at, all[i].ended_at);
  EXPECT_DOUBLE_EQ(all[0].ended_at, 100);
  EXPECT_EQ(s.recent_successful_runs(0).size(), 2u);  // at least one per signature
  remove_db(path);
}

TEST(Store, RollbackWithoutATransactionDoesNothing) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  Store s(path, false);
  s.rollback();  // none open: no error, no abort
  EXPECT_FALSE(s.in_transaction());
  s.begin();
  DaemonJob a = make_job("a");
  s.insert(a);
  s.rollback();
  EXPECT_FALSE(s.in_transaction());
  s.rollback();  // again: SQLite may have rolled back already; still nothing
  EXPECT_FALSE(s.get(a.id).has_value());
  // A commit with nothing open is an error (its changes would be lost), as StoreError.
  try {
    s.commit();
    ADD_FAILURE() << "commit without a transaction did not throw";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("database: commit: ", 0), 0u) << e.what();
    EXPECT_FALSE(e.disk_full);
  }
  EXPECT_FALSE(s.last_error_was_full());
  remove_db(path);
}

// Issue 33 item 6: a -wal lost while the database was closed is told at the next open
// (from the -shm's index), and a whole set of files is not.
TEST(Store, ALostWriteAheadLogIsToldAtOpen) {
  const std::string path = test::temp_path("wal.db"), lost = test::temp_path("wal-lost.db"),
                    whole = test::temp_path("wal-whole.db");
  for (const auto& p : {path, lost, whole}) remove_db(p);
  JobId id = 0;
  {
    Store s(path, false);
    EXPECT_FALSE(s.wal_lost());
    DaemonJob a = make_job("a");
    s.insert(a);
    id = a.id;
    // Copied while it is open (as after kill -9): the commits are in the -wal only.
    namespace fs = std::filesystem;
    for (const char* suffix : {"", "-shm"}) fs::copy_file(path + suffix, lost + suffix);
    for (const char* suffix : {"", "-wal", "-shm"}) fs::copy_file(path + suffix, whole + suffix);
  }
  {
    Store s(lost, false);
    ASSERT_TRUE(s.wal_lost());
    EXPECT_NE(s.wal_lost()->find("wal-lost.db-wal is missing: "), std::string::npos) << *s.wal_lost();
    EXPECT_FALSE(s.get(id).has_value());  // what SQLite does: the commits are undone
  }
  {
    Store s(lost, false);  // SQLite rebuilt the index: told once
    EXPECT_FALSE(s.wal_lost());
  }
  {
    Store s(whole, false);
    EXPECT_FALSE(s.wal_lost());
    EXPECT_TRUE(s.get(id).has_value());
  }
  for (const auto& p : {path, lost, whole}) remove_db(p);
}

TEST(Store, AnUnreadableRowIsSetAsideAndTheOthersLoad) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  JobId ids[4];
  {
    Store s(path, false);
    for (int i = 0; i < 4; ++i) {
      DaemonJob j = make_job("j" + std::to_string(i));
      s.insert(j);
      ids[i] = j.id;
    }
  }
  // Job 1: a request the API would refuse; job 3 (the newest): no command left; job 2: a
  // value its table's CHECK would refuse, written behind SQLite's back.
  raw_sql(path, "UPDATE jobs SET gpus = 0 WHERE id = " + std::to_string(ids[1]));
  raw_sql(path, "DELETE FROM job_args WHERE job_id = " + std::to_string(ids[3]));
  raw_sql(path, "PRAGMA ignore_check_constraints = ON; UPDATE jobs SET queue = 'side' WHERE id = " +
                    std::to_string(ids[2]));
  {
    Store s(path, false);
    const auto jobs = s.unfinished();
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(jobs[0].id, ids[0]);
    const auto& q = s.last_quarantined();
    ASSERT_EQ(q.size(), 3u);
    EXPECT_EQ(q[0].id, ids[1]);
    EXPECT_EQ(q[0].reason, "request: gpus: must be an integer between 1 and 64");
    EXPECT_EQ(q[1].id, ids[2]);
    EXPECT_EQ(q[1].reason, "jobs.queue: 'side' for a job that is queued");
    EXPECT_EQ(q[2].id, ids[3]);
    EXPECT_EQ(q[2].reason.rfind("request: command: ", 0), 0u) << q[2].reason;
    // Asking for one of them: an error saying so, not "no such job", not a crash.
    for (JobId id : {ids[1], ids[3]}) {
      try {
        s.get(id);
        ADD_FAILURE() << "get of a quarantined job did not throw";
      } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("damaged and was set aside"), std::string::npos) << e.what();
      }
    }
    EXPECT_TRUE(s.get(ids[0]).has_value());
    EXPECT_EQ(s.list(true, 100).size(), 1u);
    EXPECT_EQ(s.last_list_skipped(), 0);
  }
  // Moved in the database: quarantine holds them, a copy of their rows and the reasons;
  // jobs and its child tables do not.
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM quarantine"), "3");
  const std::string copy = raw_sql(path, "SELECT data FROM quarantine WHERE id = " + std::to_string(ids[1]));
  EXPECT_NE(copy.find("jobs: id=" + std::to_string(ids[1]) + " uid=1000"), std::string::npos) << copy;
  EXPECT_NE(copy.find(" gpus=0 "), std::string::npos) << copy;
  EXPECT_NE(copy.find("job_args: job_id=" + std::to_string(ids[1]) + " pos=1 arg='hi'"), std::string::npos) << copy;
  EXPECT_NE(copy.find("job_env: job_id=" + std::to_string(ids[1]) + " name='A' value='1'"), std::string::npos)
      << copy;
  EXPECT_EQ(raw_sql(path, "SELECT state || ' ' || uid FROM quarantine WHERE id = " + std::to_string(ids[1])),
            "queued 1000");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM jobs"), "1");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM job_args"), "2");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM job_env"), "1");
  EXPECT_NE(raw_sql(path, "SELECT reason FROM quarantine WHERE id = " + std::to_string(ids[1])), "");
  // Even with the id sequence lost, a set-aside id is not given out again.
  raw_sql(path, "DELETE FROM sqlite_sequence");
  {
    Store s(path, false);
    EXPECT_TRUE(s.unfinished().size() == 1u && s.last_quarantined().empty());
    DaemonJob n = make_job("new");
    s.insert(n);
    EXPECT_GT(n.id, ids[3]);
    // A finished job's unreadable row: listings skip it and count it.
    n.state = JobState::Completed;
    s.update(n);
    raw_sql(path, "UPDATE jobs SET workdir = 'relative' WHERE id = " + std::to_string(n.id));
    EXPECT_EQ(s.list(true, 100).size(), 1u);
    EXPECT_EQ(s.last_list_skipped(), 1);
    EXPECT_THROW(s.get(n.id), StoreError);
  }
  remove_db(path);
}

TEST(Store, ADamagedDatabaseFailsRequestsWithStoreError) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  {
    Store s(path, false);
    s.begin();
    // Three queued jobs first (the first pages of the table), then 2000 finished ones.
    for (int i = 0; i < 3; ++i) {
      DaemonJob j = make_job("queued" + std::to_string(i));
      s.insert(j);
    }
    for (int i = 0; i < 2000; ++i) {
      DaemonJob j = make_job("done" + std::to_string(i));
      s.insert(j);
      j.state = JobState::Completed;
      j.ended_at = 2000;
      s.update(j);
      s.event(j.id, 2000, "completed", "exit status 0");
    }
    s.commit();
  }  // closed: the WAL is checkpointed into the file
  // Garbage over the pages in the middle of the file that hold job records (page size 4096;
  // pages 1 and 2 are the header and the schema's tables).
  std::vector<long> pages;
  {
    std::ifstream f(path, std::ios::binary);
    std::string page(4096, '\0');
    for (long n = 0; f.read(page.data(), 4096); ++n)
      if (n >= 2 && page.find("done") != std::string::npos) pages.push_back(n);
  }
  ASSERT_GT(pages.size(), 20u);
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    const std::string garbage(4096, '\xab');
    for (std::size_t k = pages.size() / 2; k < pages.size() / 2 + 4; ++k) {
      f.seekp(pages[k] * 4096);
      f.write(garbage.data(), 4096);
    }
  }
  std::optional<Store> s;
  try {
    s.emplace(path, false);
  } catch (const StoreError& e) {
    FAIL() << "the damaged database did not open: " << e.what();
  }
  // A listing that meets a damaged page fails, as StoreError, in the middle of the event
  // loop's group commit; the commit and the changes made before it are unharmed.
  s->begin();
  DaemonJob fresh = make_job("submitted-meanwhile");
  s->insert(fresh);
  try {
    s->list(true, 100000);
    ADD_FAILURE() << "listing a damaged table did not fail";
  } catch (const StoreError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("database: select jobs: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
    EXPECT_FALSE(e.disk_full);
  }
  EXPECT_TRUE(s->in_transaction());
  EXPECT_NO_THROW(s->commit());
  ASSERT_TRUE(s->get(fresh.id).has_value());
  EXPECT_EQ(s->get(fresh.id)->request.name, "submitted-meanwhile");
  // The queued jobs live on intact pages, reached through the state index.
  try {
    const auto jobs = s->unfinished();
    ASSERT_EQ(jobs.size(), 4u);
    EXPECT_EQ(jobs[0].request.name, "queued0");
    EXPECT_EQ(jobs[3].request.name, "submitted-meanwhile");
    EXPECT_TRUE(s->last_quarantined().empty());
  } catch (const StoreError& e) {
    ADD_FAILURE() << "unfinished() of intact rows failed: " << e.what();
  }
  // Every job: found, absent, or a StoreError; never anything else.
  int errors = 0;
  for (JobId id = 1; id <= 2004; ++id) {
    try {
      s->get(id);
      s->events(id);
    } catch (const StoreError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  s.reset();
  remove_db(path);
}

// Issue 33 item 1: a listing's read of the store takes each argv string's first characters
// (one past the listing's cut) and no environment; a plain read has them whole.
TEST(Store, AListingPageReadsTheArgvsFirstCharactersOnly) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  Store s(path, false);
  DaemonJob a = make_job("a");
  a.request.command = {"/bin/echo", std::string(100000, 'x') + "tail", "\u00e9\u00e9\u00e9"};
  s.insert(a);
  const auto page = s.list_page(0, 10, std::nullopt, 8);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].request.command,
            (std::vector<std::string>{"/bin/echo", std::string(9, 'x'), "\u00e9\u00e9\u00e9"}));  // short: whole
  EXPECT_TRUE(page[0].request.env.empty());
  const auto whole = s.list_page(0, 10);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].request.command, a.request.command);
  EXPECT_EQ(whole[0].request.env.at("A"), "1");
  EXPECT_EQ(s.get(a.id)->request.command, a.request.command);  // the next read is whole again
  // A listing without the request reads no argv at all.
  const auto bare = s.list_page(0, 10, std::nullopt, 8, false);
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_TRUE(bare[0].request.command.empty());
  EXPECT_EQ(bare[0].request.name, "a");
  EXPECT_EQ(s.get(a.id)->request.command, a.request.command);
}

TEST(Store, ReservedIdsAreNeverGivenOut) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  {
    Store s(path, false);
    s.reserve_ids_above(7);  // a new database: no sequence yet
    DaemonJob a = make_job("a");
    s.insert(a);
    EXPECT_EQ(a.id, 8);
    s.reserve_ids_above(100);
    DaemonJob b = make_job("b");
    s.insert(b);
    EXPECT_EQ(b.id, 101);
    s.reserve_ids_above(50);  // never lowers
    s.begin();                // inside the caller's transaction too
    s.reserve_ids_above(101);
    DaemonJob c = make_job("c");
    s.insert(c);
    s.commit();
    EXPECT_EQ(c.id, 102);
  }
  Store s(path, false);
  DaemonJob d = make_job("d");
  s.insert(d);
  EXPECT_EQ(d.id, 103);
  remove_db(path);
}

// A job with every field set to something other than its default.
DaemonJob full_job() {
  DaemonJob j;
  j.uid = 1001;
  j.gid = 1002;
  j.user = "bérénice";
  j.state = JobState::Running;
  j.recovery = RecoveryState{24000, true, 2};
  j.submitted_at = 1700000000.25;
  j.started_at = 1700000001.5;
  j.cancel_requested = true;
  j.reason = "cancelling: asked by root";
  j.attached_to = ClientProcess{4321, (1ull << 63) + 12345};  // the top bit too
  auto& r = j.request;
  r.name = "train-2.v2";
  r.command = {"/usr/bin/python3", "-c", "print('héllo ✓')", "a=b", "", "--lr=0.1"};
  r.workdir = "/home/bérénice/runs";
  r.env = {{"PATH", "/usr/bin:/bin"}, {"OPTS", "a=b=c --x=\"y\""}, {"GREETING", "こんにちは 🌍"}, {"EMPTY", ""}};
  r.gpus = 3;
  r.mem_mib = 12000;
  r.profiled_mib = 9000;
  r.faketensor_mib = 8500;
  r.exclusive = true;
  r.restartable = true;
  r.tags = {"nlp", "size=large", "v:2"};
  r.hint_gpu_util = 0.75;
  r.hint_sharing_score = 2;
  ModelFeatures m;
  m.depth = 24;
  m.total_activations = 1.5e12;
  m.total_parameters = 3.4e8;
  m.batch_size = 32;
  m.batchnorm_layers = 3;
  m.dropout_layers = 5;
  m.activation = "GELU";
  m.layer_counts = {{"linear", 96}, {"layernorm", 49}, {"embedding", 2}};
  r.model = m;
  Attempt a1;
  a1.number = 1;
  a1.gpu_uuids = {"GPU-aaaa", "GPU-bbbb", "GPU-cccc"};
  a1.launched_at = 1700000001.5;
  a1.first_activity = 1700000003.0;
  a1.exclusive = false;
  a1.admitted_mib = 12000;
  a1.free_at_placement = 30000;
  a1.gpu_total_mib = 40960;
  a1.pgid = 5000;
  a1.shim_pid = 4999;
  a1.peak_mib = 39000;
  a1.ended_at = 1700000100.0;
  a1.outcome = AttemptOutcome::Oom;
  a1.detail = "torch.OutOfMemoryError: CUDA out of memory.";
  a1.exit_code = 1;
  Attempt a2 = a1;
  a2.number = 2;
  a2.gpu_uuids = {"GPU-dddd", "GPU-eeee", "GPU-ffff"};
  a2.exclusive = true;
  a2.launched_at = 1700000200.0;
  a2.first_activity.reset();
  a2.ended_at.reset();
  a2.outcome = AttemptOutcome::Running;
  a2.detail = "";
  a2.exit_code.reset();
  a2.pgid = 6000;
  a2.shim_pid = 5999;
  j.attempts = {a1, a2};
  return j;
}

// Equal in every field the API shows (to_json has them all: the request with its
// environment and model, every attempt, the attach tie).
void expect_same(const DaemonJob& a, const DaemonJob& b) {
  EXPECT_EQ(to_json(a).dump(2), to_json(b).dump(2));
  EXPECT_EQ(a.in_recovery_queue, b.in_recovery_queue);
}

TEST(Store, EveryFieldOfAJobRoundTrips) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  DaemonJob running = full_job();
  DaemonJob finished = full_job();
  finished.state = JobState::Failed;
  finished.ended_at = 1700000300.0;
  finished.cancel_requested = false;
  finished.attached_to.reset();
  finished.request.model.reset();
  finished.request.hint_gpu_util.reset();
  finished.attempts[1].ended_at = 1700000300.0;
  finished.attempts[1].outcome = AttemptOutcome::Failed;
  finished.attempts[1].detail = "killed by signal 9 (Killed)";
  finished.attempts[1].signal = 9;
  DaemonJob recovering = make_job("recovering");
  recovering.in_recovery_queue = true;
  recovering.recovery = RecoveryState{30000, false, 1};
  {
    Store s(path, true);
    s.insert(running);
    s.insert(finished);
    s.insert(recovering);
  }
  Store s(path, false);
  const auto unfinished = s.unfinished();
  for (const auto& q : s.last_quarantined()) ADD_FAILURE() << q.id << ": " << q.reason;
  ASSERT_EQ(unfinished.size(), 2u);
  expect_same(unfinished[0], running);
  expect_same(unfinished[1], recovering);
  EXPECT_TRUE(unfinished[1].in_recovery_queue);
  for (const auto& j : {running, finished, recovering}) {
    const auto got = s.get(j.id);
    ASSERT_TRUE(got) << j.id;
    expect_same(*got, j);
  }
  const auto all = s.list(true, 10);
  ASSERT_EQ(all.size(), 3u);
  expect_same(all[1], finished);
  EXPECT_EQ(s.last_list_skipped(), 0);
  // The fields as the store holds them: typed columns, no JSON.
  const auto id = std::to_string(running.id);
  EXPECT_EQ(raw_sql(path, "SELECT typeof(attached_start_ticks) || ' ' || typeof(mem_mib) || ' ' || "
                          "typeof(hint_gpu_util) || ' ' || model_activation FROM jobs WHERE id = " + id),
            "integer integer real GELU");
  EXPECT_EQ(raw_sql(path, "SELECT value FROM job_env WHERE name = 'OPTS' AND job_id = " + id), "a=b=c --x=\"y\"");
  EXPECT_EQ(raw_sql(path, "SELECT group_concat(arg, '|') FROM job_args WHERE job_id = " + id),
            "/usr/bin/python3|-c|print('héllo ✓')|a=b||--lr=0.1");
  EXPECT_EQ(raw_sql(path, "SELECT uuid FROM attempt_gpus WHERE job_id = " + id + " AND number = 2 AND pos = 1"),
            "GPU-eeee");
  EXPECT_EQ(raw_sql(path, "SELECT outcome || ' ' || exit_code FROM attempts WHERE number = 1 AND job_id = " + id),
            "oom 1");
  EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "4");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM sqlite_master WHERE sql LIKE '%data%'"), "1");  // quarantine only
  remove_db(path);
}

// The utilisation predicted at submission (the lpa order's) comes back as written, none
// as none; a source without a value (or a value without one) is a damaged row.
TEST(Store, APredictedUtilisationComesBackAndOneWithoutItsSourceIsSetAside) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  DaemonJob predicted = make_job("predicted"), plain = make_job("plain"), damaged = make_job("damaged");
  predicted.predicted_util = 0.375;
  predicted.predicted_util_source = "history";
  damaged.predicted_util = 0.5;
  damaged.predicted_util_source = "model-spec";
  {
    Store s(path, false);
    for (DaemonJob* j : {&predicted, &plain, &damaged}) s.insert(*j);
  }
  EXPECT_EQ(raw_sql(path, "SELECT predicted_util_source FROM jobs WHERE id = " + std::to_string(plain.id)), "");
  raw_sql(path, "UPDATE jobs SET predicted_util = NULL WHERE id = " + std::to_string(damaged.id));
  Store s(path, false);
  const auto jobs = s.unfinished();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].predicted_util, 0.375);
  EXPECT_EQ(jobs[0].predicted_util_source, "history");
  EXPECT_FALSE(jobs[1].predicted_util.has_value());
  EXPECT_EQ(jobs[1].predicted_util_source, "");
  ASSERT_EQ(s.last_quarantined().size(), 1u);
  EXPECT_EQ(s.last_quarantined()[0].reason, "jobs.predicted_util_source: 'model-spec' with predicted_util NULL");
  remove_db(path);
}

// Issue 32: an array element's place and a job's dependencies come back after a reopen, and
// an array's elements are listed by its id.
TEST(Store, ArraysAndDependenciesComeBack) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  DaemonJob first = make_job("e0"), second = make_job("e1"), after = make_job("after");
  {
    Store s(path, false);
    s.insert(first);
    first.array_id = first.id;
    first.array_index = 0;
    first.array_limit = 8;
    s.write_links(first.id, first);
    s.insert(second);
    second.array_id = first.id;
    second.array_index = 3;
    second.array_limit = 8;
    s.write_links(second.id, second);
    s.insert(after);
    after.after = {{first.id, "ok"}, {second.id, "failed"}};
    s.write_links(after.id, after);
  }
  Store s(path, false);
  const auto e1 = s.get(second.id);
  ASSERT_TRUE(e1);
  EXPECT_EQ(e1->array_id, first.id);
  EXPECT_EQ(e1->array_index, 3);
  EXPECT_EQ(e1->array_limit, 8);
  EXPECT_EQ(s.get(after.id)->after, after.after);
  EXPECT_FALSE(s.get(after.id)->array_id);
  EXPECT_EQ(s.array_elements(first.id), (std::vector<JobId>{first.id, second.id}));
  EXPECT_TRUE(s.array_elements(after.id).empty());
}

// Schema 3 (issue 32 item 1): the priority, the checkpoint warning and a preemption in
// progress come back; a schema-2 database gains the columns, its jobs at their defaults.
TEST(Store, PreemptionFieldsComeBackAndASchema2DatabaseGainsThem) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  DaemonJob victim = make_job("victim"), plain = make_job("plain");
  victim.request.priority = -3;
  victim.request.checkpoint_signal = 10;
  victim.request.checkpoint_lead_s = 120;
  victim.preempted_for = 77;
  victim.preempt_warned_at = 1000.5;
  victim.preempt_stop_at = 1120.5;
  victim.preempt_stopping = true;
  {
    Store s(path, false);
    s.insert(victim);
    s.insert(plain);
  }
  {
    Store s(path, false);
    const auto jobs = s.unfinished();
    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_EQ(jobs[0].request.priority, -3);
    EXPECT_EQ(jobs[0].request.checkpoint_signal, 10);
    EXPECT_EQ(jobs[0].request.checkpoint_lead_s, 120);
    EXPECT_EQ(jobs[0].preempted_for, std::optional<JobId>(77));
    EXPECT_EQ(jobs[0].preempt_warned_at, 1000.5);
    EXPECT_EQ(jobs[0].preempt_stop_at, 1120.5);
    EXPECT_TRUE(jobs[0].preempt_stopping);
    EXPECT_FALSE(jobs[1].preempted_for.has_value());
    EXPECT_EQ(jobs[1].request.priority, 0);
  }
  // As a schema-2 aegisd left it: none of the columns.
  for (const char* c : {"priority", "checkpoint_signal", "checkpoint_lead_s", "preempted_for", "preempt_warned_at",
                        "preempt_stop_at", "preempt_stopping"})
    raw_sql(path, std::string("ALTER TABLE jobs DROP COLUMN ") + c);
  raw_sql(path, "UPDATE meta SET value = '2' WHERE key = 'schema'");
  Store s(path, false);
  EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "4");
  const auto jobs = s.unfinished();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].request.priority, 0);
  EXPECT_FALSE(jobs[0].preempted_for.has_value());
  EXPECT_FALSE(jobs[0].preempt_stopping);
  remove_db(path);
}

// Issue 32 item 6: a job's notify set comes back as written (none as none); a schema-2
// database (no notify column) is migrated to 3 by adding it, its jobs notified of nothing;
// a notify text that is not an event list is a damaged row.
TEST(Store, ANotifySetComesBackAndASchema2DatabaseGetsTheColumn) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  DaemonJob told = make_job("told"), plain = make_job("plain"), damaged = make_job("damaged");
  told.request.notify = std::get<api::NotifySet>(api::parse_notify("end,start,oom"));
  {
    Store s(path, false);
    for (DaemonJob* j : {&told, &plain, &damaged}) s.insert(*j);
  }
  EXPECT_EQ(raw_sql(path, "SELECT notify FROM jobs WHERE id = " + std::to_string(told.id)), "start,oom,end");
  raw_sql(path, "UPDATE jobs SET notify = 'start,bogus' WHERE id = " + std::to_string(damaged.id));
  {
    Store s(path, false);
    const auto jobs = s.unfinished();
    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_EQ(api::to_string(jobs[0].request.notify), "start,oom,end");
    EXPECT_TRUE(jobs[1].request.notify.empty());
    ASSERT_EQ(s.last_quarantined().size(), 1u);
    EXPECT_EQ(s.last_quarantined()[0].reason.rfind("jobs.notify: unknown event 'bogus'", 0), 0u)
        << s.last_quarantined()[0].reason;
  }
  // Back to schema 2 as an older aegisd left it: no notify column, version '2'.
  raw_sql(path, "ALTER TABLE jobs DROP COLUMN notify; UPDATE meta SET value = '2' WHERE key = 'schema'");
  {
    Store s(path, false);
    EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "4");
    const auto jobs = s.unfinished();
    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_TRUE(jobs[0].request.notify.empty());
    EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM jobs WHERE notify = ''"), "2");
  }
  remove_db(path);
}

TEST(Store, EveryStateAndOutcomeNameIsAccepted) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  Store s(path, false);
  for (auto state : {JobState::Queued, JobState::Running, JobState::Completed, JobState::Failed,
                     JobState::Cancelled}) {
    DaemonJob j = make_job("j");
    j.state = state;
    for (auto o : {AttemptOutcome::Running, AttemptOutcome::Completed, AttemptOutcome::Oom, AttemptOutcome::Failed,
                   AttemptOutcome::FailedStart, AttemptOutcome::Cancelled, AttemptOutcome::Lost,
                   AttemptOutcome::Unknown}) {
      Attempt a;
      a.number = static_cast<int>(j.attempts.size()) + 1;
      a.outcome = o;
      j.attempts.push_back(a);
    }
    s.insert(j);
    const auto got = s.get(j.id);
    ASSERT_TRUE(got);
    expect_same(*got, j);
  }
  remove_db(path);
}

TEST(Store, UpdateRewritesTheChildRows) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  Store s(path, false);
  DaemonJob j = full_job();
  s.insert(j);
  const auto id = std::to_string(j.id);
  auto count = [&](const char* table) {
    return raw_sql(path, std::string("SELECT COUNT(*) FROM ") + table + " WHERE job_id = " + id);
  };
  EXPECT_EQ(count("job_env"), "4");
  EXPECT_EQ(count("attempt_gpus"), "6");
  // Fewer of everything: the rows that are gone must go.
  j.request.command = {"/bin/true"};
  j.request.env = {{"OPTS", "x=1"}, {"NEW", "ünïcode"}};
  j.request.tags = {"only"};
  j.request.model->layer_counts = {{"conv2d", 7}};
  j.attempts.pop_back();
  j.attempts[0].gpu_uuids = {"GPU-zzzz"};
  j.attempts[0].exit_code.reset();
  j.attempts[0].signal = 6;
  j.state = JobState::Queued;
  s.update(j);
  expect_same(*s.get(j.id), j);
  EXPECT_EQ(count("job_args"), "1");
  EXPECT_EQ(count("job_env"), "2");
  EXPECT_EQ(count("job_tags"), "1");
  EXPECT_EQ(count("job_model_layers"), "1");
  EXPECT_EQ(count("attempts"), "1");
  EXPECT_EQ(count("attempt_gpus"), "1");
  // More again, and no model at all.
  Attempt a;
  a.number = 2;
  a.gpu_uuids = {"GPU-1", "GPU-2"};
  j.attempts.push_back(a);
  j.request.model.reset();
  j.state = JobState::Running;
  s.update(j);
  expect_same(*s.get(j.id), j);
  EXPECT_EQ(count("job_model_layers"), "0");
  EXPECT_EQ(count("attempt_gpus"), "3");
  // A change rolled back is gone, and writing it again lands (the store does not take
  // it for written).
  auto changed = j;
  changed.request.env["ROLLED"] = "back";
  s.begin();
  s.update(changed);
  s.rollback();
  expect_same(*s.get(j.id), j);
  s.update(changed);
  EXPECT_EQ(s.get(j.id)->request.env.at("ROLLED"), "back");
  // An update of a job that is not there (set aside) writes nothing.
  DaemonJob ghost = make_job("ghost");
  ghost.id = 999;
  EXPECT_NO_THROW(s.update(ghost));
  EXPECT_FALSE(s.get(999).has_value());
  remove_db(path);
}

// The layout before schema 2, as aegisd wrote it up to issue 12 (one copy for every test).
std::string schema1_sql() {
  std::ifstream in(std::string(AEGIS_SOURCE_DIR) + "/tests/golden/store_schema1.sql");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Records as schema 1's to_json wrote them (nlohmann sorts the keys).
constexpr const char* kQueuedV1 =
    R"({"attached_to":null,"attempt_log":[],"attempts":0,"cancel_requested":false,"ended_at":null,"gid":1000,)"
    R"("gpu_uuids":[],"gpus":1,"id":3,"name":"waiting","queue":"recovery","queue_seq":7,"reason":"waits",)"
    R"("recovery":{"exclusive_only":true,"floor_mib":20000,"oom_count":1},)"
    R"("request":{"command":["/bin/sh","-c","echo $X"],"env":{"X":"a=b ü"},"exclusive":false,"gpus":1,)"
    R"("hints":{"gpu_util":0.5,"sharing_score":1},"mem_mib":12000,"name":"waiting","tags":["t1","k=v"],)"
    R"("model":{"activation":"ReLU","batch_size":8,"batchnorm_layers":0,"depth":4,"dropout_layers":1,)"
    R"("layer_counts":{"linear":4},"total_activations":1000,"total_parameters":5000},"workdir":"/tmp"},)"
    R"("started_at":null,"state":"queued","submitted_at":1000.5,"uid":1000,"user":"alice"})";
constexpr const char* kRunningV1 =
    R"({"attached_to":{"pid":777,"start_ticks":123456789012},"attempt_log":[)"
    R"({"admitted_mib":5120,"detail":"torch.OutOfMemoryError: CUDA out of memory","ended_at":1010.0,)"
    R"("exclusive":false,"first_activity":1002.5,"free_at_placement_mib":40000,"gpu_total_mib":40960,)"
    R"("gpus":["GPU-1"],"launched_at":1001.0,"number":1,"outcome":"oom","peak_mib":41000,"pgid":4242,"shim_pid":4241},)"
    R"({"admitted_mib":20000,"detail":"","ended_at":null,"exclusive":true,"first_activity":null,)"
    R"("free_at_placement_mib":40960,"gpu_total_mib":40960,"gpus":["GPU-2","GPU-3"],"launched_at":1020.0,)"
    R"("number":2,"outcome":"","peak_mib":0,"pgid":5252,"shim_pid":5251}],)"
    R"("attempts":2,"cancel_requested":true,"ended_at":null,"gid":1000,"gpu_uuids":["GPU-2","GPU-3"],"gpus":2,)"
    R"("id":5,"name":"train","queue":"","queue_seq":4,"reason":"cancelling","recovery":{"exclusive_only":true,)"
    R"("floor_mib":20000,"oom_count":1},"request":{"command":["python3","train.py"],"exclusive":false,"gpus":2,)"
    R"("name":"train","restartable":true,"workdir":"/home/alice"},"started_at":1001.0,"state":"running",)"
    R"("submitted_at":1000.0,"uid":1000,"user":"alice"})";
constexpr const char* kFailedV1 =
    R"({"attached_to":null,"attempt_log":[{"admitted_mib":5120,"detail":"exit status 3","ended_at":900.0,)"
    R"("exclusive":false,"first_activity":null,"free_at_placement_mib":40000,"gpu_total_mib":40960,"gpus":["GPU-1"],)"
    R"("launched_at":890.0,"number":1,"outcome":"failed","peak_mib":0,"pgid":100,"shim_pid":99}],"attempts":1,)"
    R"("cancel_requested":false,"ended_at":900.0,"gid":1000,"gpu_uuids":[],"gpus":1,"id":2,"name":"bad",)"
    R"("queue":"","queue_seq":2,"reason":"exit status 3","recovery":{"exclusive_only":false,"floor_mib":0,)"
    R"("oom_count":0},"request":{"command":["false"],"exclusive":false,"gpus":1,"name":"bad"},)"
    R"("started_at":890.0,"state":"failed","submitted_at":880.0,"uid":1000,"user":"alice"})";

void make_schema1(const std::string& path) {
  remove_db(path);
  raw_sql(path, schema1_sql());
  auto row = [&](int id, const char* state, int seq, const std::string& data) {
    std::string quoted = "'";
    for (char c : data) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    quoted += "'";
    raw_sql(path, "INSERT INTO jobs(id, uid, state, queue_seq, submitted_at, data) VALUES(" + std::to_string(id) +
                      ", 1000, '" + state + "', " + std::to_string(seq) + ", 1000, " + quoted + ")");
  };
  row(2, "failed", 2, kFailedV1);
  row(3, "queued", 7, kQueuedV1);
  row(4, "queued", 3, R"({"id": 4, "user": garbage)");
  row(5, "running", 4, kRunningV1);
  raw_sql(path, "UPDATE sqlite_sequence SET seq = 40 WHERE name = 'jobs';"
                "INSERT INTO events(job_id, t, kind, detail) VALUES(5, 1001, 'launch', 'attempt 1');"
                "INSERT INTO history VALUES('sig', 41000, 2, 1000);"
                "INSERT INTO quarantine VALUES(1, 1000, 'queued', '{', 'job record: old', 10)");
}

TEST(Store, MigratesASchema1Database) {
  const std::string path = test::temp_path("store.db");
  make_schema1(path);
  {
    Store s(path, false);
    EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "4");
    const auto jobs = s.unfinished();
    // The bad row: set aside with its record as it was, and reported once.
    ASSERT_EQ(s.last_quarantined().size(), 1u);
    EXPECT_EQ(s.last_quarantined()[0].id, 4);
    EXPECT_EQ(s.last_quarantined()[0].reason.rfind("job record: ", 0), 0u) << s.last_quarantined()[0].reason;
    EXPECT_EQ(raw_sql(path, "SELECT data FROM quarantine WHERE id = 4"), R"({"id": 4, "user": garbage)");
    EXPECT_EQ(raw_sql(path, "SELECT reason FROM quarantine WHERE id = 1"), "job record: old");
    EXPECT_THROW(s.get(4), StoreError);
    // Queue order kept: the running job (seq 4) before the queued one (seq 7).
    ASSERT_EQ(jobs.size(), 2u);
    const DaemonJob& run = jobs[0];
    EXPECT_EQ(run.id, 5);
    EXPECT_EQ(run.state, JobState::Running);
    EXPECT_TRUE(run.cancel_requested);
    EXPECT_EQ(run.reason, "cancelling");
    ASSERT_TRUE(run.attached_to);
    EXPECT_EQ(run.attached_to->pid, 777);
    EXPECT_EQ(run.attached_to->start_ticks, 123456789012ull);
    EXPECT_EQ(run.recovery.floor_mib, 20000);
    EXPECT_TRUE(run.recovery.exclusive_only);
    EXPECT_EQ(run.recovery.oom_count, 1);
    EXPECT_TRUE(run.request.restartable);
    EXPECT_EQ(run.request.command, (std::vector<std::string>{"python3", "train.py"}));
    ASSERT_EQ(run.attempts.size(), 2u);
    EXPECT_EQ(run.attempts[0].outcome, AttemptOutcome::Oom);
    EXPECT_EQ(run.attempts[0].pgid, 4242);
    EXPECT_EQ(run.attempts[0].peak_mib, 41000);
    EXPECT_EQ(run.attempts[1].outcome, AttemptOutcome::Running);
    EXPECT_EQ(run.attempts[1].pgid, 5252);
    EXPECT_EQ(run.attempts[1].shim_pid, 5251);
    EXPECT_TRUE(run.attempts[1].exclusive);
    EXPECT_EQ(run.attempts[1].gpu_uuids, (std::vector<std::string>{"GPU-2", "GPU-3"}));
    EXPECT_FALSE(run.attempts[1].ended_at);
    const DaemonJob& queued = jobs[1];
    EXPECT_EQ(queued.id, 3);
    EXPECT_TRUE(queued.in_recovery_queue);
    EXPECT_EQ(queued.queue_seq, 7);
    EXPECT_EQ(queued.request.env.at("X"), "a=b ü");
    EXPECT_EQ(queued.request.tags, (std::vector<std::string>{"t1", "k=v"}));
    EXPECT_EQ(*queued.request.hint_sharing_score, 1);
    ASSERT_TRUE(queued.request.model);
    EXPECT_EQ(queued.request.model->layer_counts.at("linear"), 4);
    EXPECT_EQ(raw_sql(path, "SELECT signature FROM jobs WHERE id = 3"), signature_of(queued));  // schema 4
    EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM jobs WHERE signature = ''"), "0");
    // The finished job: its exit status, from the words schema 1 kept.
    const auto failed = s.get(2);
    ASSERT_TRUE(failed);
    EXPECT_EQ(failed->state, JobState::Failed);
    EXPECT_EQ(*failed->attempts[0].exit_code, 3);
    EXPECT_FALSE(failed->attempts[0].signal);
    EXPECT_EQ(to_json(*failed)["exit_code"], 3);
    // Events, history and ids carried over.
    EXPECT_EQ(s.events(5).size(), 1u);
    EXPECT_EQ(s.peaks().at("sig"), 41000);
    DaemonJob fresh = make_job("fresh");
    s.insert(fresh);
    EXPECT_EQ(fresh.id, 41);
    EXPECT_GT(fresh.queue_seq, 7);
    EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobs_v1'"), "0");
  }
  // Reopened: schema 4 as it is, nothing migrated twice, nothing reported again.
  Store s(path, false);
  EXPECT_EQ(s.unfinished().size(), 3u);
  EXPECT_TRUE(s.last_quarantined().empty());
  remove_db(path);
}

TEST(Store, AMigrationThatCannotReadTheOldTableLeavesItAsItWas) {
  const std::string path = test::temp_path("store.db");
  make_schema1(path);
  raw_sql(path, "ALTER TABLE jobs DROP COLUMN data");  // not schema 1 after all
  try {
    Store s(path, false);
    ADD_FAILURE() << "opened";
  } catch (const StoreError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("database: migrate schema 1 to 2: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("(the database is left as it was)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "1");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM jobs"), "4");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('jobs_v1', 'attempts')"), "0");
  remove_db(path);
}

// Schema 3 -> 4: a database as a schema-3 aegisd left it (no signature column, no index)
// gets each job's signature when the store opens, in the opening transaction; one whose
// migration fails is left as it was, and the store says why in one line.
TEST(Store, MigratesASchema3DatabaseToSignatures) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  DaemonJob done = make_job("done"), other = make_job("other"), queued = make_job("queued");
  other.uid = 1001;
  other.request.command = {"python3", "train.py", "--epochs", "12"};
  other.request.tags = {"b", "a"};
  {
    Store s(path, false);
    for (DaemonJob* j : {&done, &other, &queued}) s.insert(*j);
    for (DaemonJob* j : {&done, &other}) {
      Attempt a;
      a.number = 1;
      a.launched_at = 100;
      a.ended_at = j == &done ? 130 : 190;
      a.outcome = AttemptOutcome::Completed;
      j->attempts = {a};
      j->state = JobState::Completed;
      j->ended_at = a.ended_at;
      s.update(*j);
    }
  }
  auto to_schema3 = [&] {
    raw_sql(path, "DROP INDEX jobs_signature; ALTER TABLE jobs DROP COLUMN signature; "
                  "UPDATE meta SET value = '3' WHERE key = 'schema'");
  };
  auto has_signature = [&] {
    return raw_sql(path, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'signature'") + " " +
           raw_sql(path, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'jobs_signature'");
  };
  to_schema3();
  ASSERT_EQ(has_signature(), "0 0");
  // A migration that cannot read a job's argv: nothing of it lands.
  raw_sql(path, "ALTER TABLE job_args RENAME COLUMN arg TO argument");
  try {
    Store s(path, false);
    ADD_FAILURE() << "opened";
  } catch (const StoreError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("database: migrate schema 3 to 4: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("(the database is left as it was)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "3");
  EXPECT_EQ(has_signature(), "0 0");
  raw_sql(path, "ALTER TABLE job_args RENAME COLUMN argument TO arg");
  {
    Store s(path, false);
    EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "4");
    EXPECT_EQ(has_signature(), "1 1");
    for (const DaemonJob* j : {&done, &other, &queued})
      EXPECT_EQ(raw_sql(path, "SELECT signature FROM jobs WHERE id = " + std::to_string(j->id)), signature_of(*j))
          << j->request.name;
    const auto runs = s.recent_successful_runs(10);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].signature, signature_of(done));
    EXPECT_EQ(runs[1].signature, signature_of(other));
    EXPECT_EQ(s.unfinished().size(), 1u);
    EXPECT_TRUE(s.last_quarantined().empty());
  }
  remove_db(path);
}

TEST(Store, ANewerSchemaIsRefused) {
  const std::string path = test::temp_path("store.db");
  remove_db(path);
  { Store s(path, false); }
  auto error = [&] {
    try {
      Store s(path, false);
    } catch (const StoreError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  raw_sql(path, "UPDATE meta SET value = '5' WHERE key = 'schema'");
  EXPECT_EQ(error(), path + ": database schema 5 is newer than this aegisd knows (4): written by a newer aegisd; "
                            "refusing to use it");
  EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "5");  // untouched
  raw_sql(path, "UPDATE meta SET value = 'two' WHERE key = 'schema'");
  EXPECT_EQ(error(), path + ": unknown database schema 'two' (table meta): refusing to use it");
  // Schema 2 (before issue 32) is migrated additively: the new tables, then schema 4's column.
  raw_sql(path, "UPDATE meta SET value = '2' WHERE key = 'schema'");
  raw_sql(path, "DROP TABLE job_after");
  raw_sql(path, "DROP TABLE job_array");
  EXPECT_EQ(error(), "");
  EXPECT_EQ(raw_sql(path, "SELECT value FROM meta WHERE key = 'schema'"), "4");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM job_after"), "0");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM job_array"), "0");
  remove_db(path);
}

TEST(IdFloor, HighestIdFromJobDirectoriesAndTheWatermark) {
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_path("state");
  fs::remove_all(dir);
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 0);  // no state directory at all
  fs::create_directories(dir);
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 0);
  for (const char* d : {"jobs/3/1", "jobs/12/2", "jobs/abc", "jobs/7x", "jobs/-40", "jobs/99999999999999999999999"})
    fs::create_directories(dir / d);
  std::ofstream(dir / "jobs" / "900") << "a file, not a job directory";
  fs::create_directory_symlink(dir / "jobs" / "3", dir / "jobs" / "800");
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 12);
  record_id_floor(dir.string(), 40);
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 40);
  record_id_floor(dir.string(), 20);  // never lowered
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 40);
  struct stat st {};
  ASSERT_EQ(lstat((dir / "id-floor").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A temporary file left by a crash does not stop the next write.
  std::ofstream(dir / ("id-floor.tmp." + std::to_string(getpid()))) << "7";
  record_id_floor(dir.string(), 41);
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 41);
  // jobs/ cleaned: the watermark remembers.
  fs::remove_all(dir / "jobs");
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 41);
  fs::create_directories(dir / "jobs" / "57");
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 57);
  // A symbolic link in place of jobs/ is not followed.
  fs::remove_all(dir / "jobs");
  fs::create_directories(dir / "elsewhere" / "5000");
  fs::create_directory_symlink(dir / "elsewhere", dir / "jobs");
  EXPECT_EQ(highest_job_id_on_disk(dir.string()), 41);
  // The daemon's start: a new database still gives ids above everything on disk.
  const std::string db = (dir / "aegis.db").string();
  Store s(db, false);
  s.reserve_ids_above(highest_job_id_on_disk(dir.string()));
  DaemonJob j = make_job("j");
  s.insert(j);
  EXPECT_EQ(j.id, 42);
  fs::remove_all(dir);
}

TEST(Store, RefusesADatabaseFileThatIsNotPlainlyItsOwn) {
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_path("dbfiles");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string real = (dir / "real.db").string();
  { Store s(real, false); }
  auto error = [](const std::string& path) {
    try {
      Store s(path, false);
    } catch (const StoreError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // A symbolic link as the database.
  const std::string link = (dir / "link.db").string();
  fs::create_symlink(real, link);
  EXPECT_EQ(error(link), link + ": is a symbolic link: refusing to use it");
  // ... or as its WAL.
  const std::string db = (dir / "a.db").string();
  { Store s(db, false); }
  fs::remove(db + "-wal");
  fs::create_symlink(dir / "elsewhere", db + "-wal");
  EXPECT_EQ(error(db), db + "-wal: is a symbolic link: refusing to use it");
  fs::remove(db + "-wal");
  EXPECT_EQ(error(db), "");
  // Writable by others; a second hard link; not a regular file.
  chmod(db.c_str(), 0666);
  EXPECT_EQ(error(db), db + ": writable by group or others (mode 0666): refusing to use it");
  chmod(db.c_str(), 0600);
  fs::create_hard_link(db, dir / "b.db");
  EXPECT_EQ(error(db), db + ": has 2 hard links: refusing to use it");
  fs::remove(dir / "b.db");
  EXPECT_EQ(error(db), "");
  // A link among the directories above it is the administrator's choice: fine.
  fs::create_directories(dir / "real");
  fs::create_directory_symlink(dir / "real", dir / "via");
  EXPECT_EQ(error((dir / "via" / "c.db").string()), "");
  EXPECT_TRUE(fs::exists(dir / "real" / "c.db"));
  fs::create_directories(dir / "d.db");
  EXPECT_EQ(error((dir / "d.db").string()), (dir / "d.db").string() + ": not a regular file: refusing to use it");
  if (geteuid() == 0) {
    ASSERT_EQ(chown(db.c_str(), 12345, 12345), 0);
    EXPECT_EQ(error(db), db + ": owned by uid 12345, not by aegisd (uid 0): refusing to use it");
  }
  fs::remove_all(dir);
}

TEST(Store, AFullDiskIsReportedAsSuchAndLeavesNoTransactionOpen) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a small tmpfs)";
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_path("full");
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here";
  bool full = false;
  {
    Store s((dir / "aegis.db").string(), false);
    for (int i = 0; i < 2000 && !full; ++i) {
      s.begin();
      try {
        for (int k = 0; k < 20; ++k) {
          DaemonJob j = make_job(std::string(500, 'x') + std::to_string(i));
          s.insert(j);
        }
        s.commit();
      } catch (const StoreError& e) {
        full = true;
        EXPECT_TRUE(e.disk_full) << e.what();
        EXPECT_TRUE(s.last_error_was_full());
        s.rollback();  // what Tx's destructor does: whatever SQLite did, never throws
        s.rollback();
        EXPECT_FALSE(s.in_transaction());
      }
    }
  }
  umount2(dir.c_str(), MNT_DETACH);
  fs::remove_all(dir);
  EXPECT_TRUE(full) << "the disk never filled up";
}

TEST(DaemonConfig, FileOverridesAndPrecedence) {
  test::TempFile f(
      "state_dir = \"/srv/aegis\"\npolicy = \"carma\"\nsmact_threshold = 0.7\n[engine]\nobservation_window_s = 45\n",
      ".toml");
  auto c = load_daemon_config(f.path(), {"observation_window_s=50", "gpu_backend=emulated"});
  EXPECT_EQ(c.daemon.state_dir, "/srv/aegis");
  EXPECT_EQ(c.daemon.gpu_backend, "emulated");
  EXPECT_DOUBLE_EQ(c.engine.smact_threshold, 0.7);      // the file over CARMA's 0.80
  EXPECT_DOUBLE_EQ(c.engine.smocc_threshold, 0.45);     // CARMA's preset
  EXPECT_DOUBLE_EQ(c.engine.observation_window_s, 50);  // --set over the file
  EXPECT_EQ(c.engine.estimator, "none");                // CARMA's, as the registry has it: nothing rewritten
  EXPECT_EQ(c.engine.recovery, "retry");
  // The default policy names the server's estimate chain itself.
  const auto d = load_daemon_config("", {});
  EXPECT_EQ(d.daemon.policy, "aegis-auto");
  EXPECT_EQ(d.engine.estimator, "auto");
}

TEST(DaemonConfig, PrintedConfigReadsBackTheSame) {
  auto c = load_daemon_config("", {"policy=aegis-peak", "metrics_port=9400", "ladder_fractions=0.3,0.6"});
  test::TempFile f(to_toml(c), ".toml");
  auto again = load_daemon_config(f.path(), {});
  EXPECT_EQ(to_toml(again), to_toml(c));
}

TEST(DaemonConfig, ErrorsNameTheFileAndKey) {
  auto error = [](const std::string& text) {
    test::TempFile f(text, ".toml");
    try {
      load_daemon_config(f.path(), {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("gpu_backend = \"cuda\"\n").find("gpu_backend: 'cuda' is not one of nvml,emulated"), std::string::npos);
  EXPECT_NE(error("no_such_key = 1\n").find("unknown parameter 'no_such_key'"), std::string::npos);
  EXPECT_NE(error("smact_threshold = \"high\"\n").find("smact_threshold: expected a number"), std::string::npos);
  EXPECT_NE(error("state_dir = \n").find(".toml:1:"), std::string::npos);
  EXPECT_NE(error("[gpu]\nx = 1\n").find("unknown table [gpu]"), std::string::npos);
  EXPECT_NE(error("policy = \"gandiva\"\n").find("policy: 'gandiva' is not one of"), std::string::npos);
}

TEST(Launcher, ProcessStartTellsAProcessFromALaterOneWithItsPid) {
  // Our own start time matches what /proc says in field 22; a gone process has none.
  std::ifstream f("/proc/self/stat");
  std::string stat;
  std::getline(f, stat);
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> fields((std::istream_iterator<std::string>(rest)), std::istream_iterator<std::string>());
  ASSERT_GT(fields.size(), 19u);
  EXPECT_EQ(process_start_ticks(getpid()), std::stoull(fields[19]));  // field 22 is the 20th after the name
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int st = 0;
  EXPECT_EQ(waitpid(child, &st, 0), child);
  EXPECT_FALSE(process_start_ticks(child));
  EXPECT_FALSE(process_start_ticks(0));
  // A zombie is no client: it has ended.
  const pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  for (int i = 0; i < 3000 && process_start_ticks(zombie); ++i) usleep(10000);  // up to 30 s: a loaded machine
  EXPECT_FALSE(process_start_ticks(zombie));
  waitpid(zombie, &st, 0);
}

}  // namespace
}  // namespace aegis
