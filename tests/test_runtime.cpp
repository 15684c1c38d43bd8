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
  // Job 1: not JSON at all; job 3 (the newest): a valid record of another job.
  raw_sql(path, "UPDATE jobs SET data = '{\"id\": garbage' WHERE id = " + std::to_string(ids[1]));
  raw_sql(path, "UPDATE jobs SET data = (SELECT data FROM jobs WHERE id = " + std::to_string(ids[0]) +
                    ") WHERE id = " + std::to_string(ids[3]));
  {
    Store s(path, false);
    const auto jobs = s.unfinished();
    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_EQ(jobs[0].id, ids[0]);
    EXPECT_EQ(jobs[1].id, ids[2]);
    const auto& q = s.last_quarantined();
    ASSERT_EQ(q.size(), 2u);
    EXPECT_EQ(q[0].id, ids[1]);
    EXPECT_EQ(q[0].reason.rfind("job record: ", 0), 0u) << q[0].reason;
    EXPECT_EQ(q[0].reason.find('\n'), std::string::npos);
    EXPECT_EQ(q[1].id, ids[3]);
    EXPECT_NE(q[1].reason.find("names job " + std::to_string(ids[0])), std::string::npos) << q[1].reason;
    // Asking for one of them: an error saying so, not "no such job", not a crash.
    for (JobId id : {ids[1], ids[3]}) {
      try {
        s.get(id);
        ADD_FAILURE() << "get of a quarantined job did not throw";
      } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("damaged and was set aside"), std::string::npos) << e.what();
      }
    }
    EXPECT_TRUE(s.get(ids[2]).has_value());
    EXPECT_EQ(s.list(true, 100).size(), 2u);
    EXPECT_EQ(s.last_list_skipped(), 0);
  }
  // Moved in the database: quarantine holds them with their reasons; jobs does not.
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM quarantine"), "2");
  EXPECT_EQ(raw_sql(path, "SELECT data FROM quarantine WHERE id = " + std::to_string(ids[1])), "{\"id\": garbage");
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM jobs"), "2");
  EXPECT_NE(raw_sql(path, "SELECT reason FROM quarantine WHERE id = " + std::to_string(ids[1])), "");
  // Even with the id sequence lost, a set-aside id is not given out again.
  raw_sql(path, "DELETE FROM sqlite_sequence");
  {
    Store s(path, false);
    EXPECT_TRUE(s.unfinished().size() == 2u && s.last_quarantined().empty());
    DaemonJob n = make_job("new");
    s.insert(n);
    EXPECT_GT(n.id, ids[3]);
    // A finished job's unparseable record: listings skip it and count it.
    n.state = JobState::Completed;
    s.update(n);
    raw_sql(path, "UPDATE jobs SET data = 'not json' WHERE id = " + std::to_string(n.id));
    EXPECT_EQ(s.list(true, 100).size(), 2u);
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
      if (n >= 2 && page.find("\"attempt_log\"") != std::string::npos) pages.push_back(n);
  }
  ASSERT_GT(pages.size(), 50u);
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
  EXPECT_EQ(c.engine.estimator, "auto");                // the daemon's chain
  EXPECT_EQ(c.engine.recovery, "retry");
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
  for (int i = 0; i < 200 && process_start_ticks(zombie); ++i) usleep(10000);
  EXPECT_FALSE(process_start_ticks(zombie));
  waitpid(zombie, &st, 0);
}

}  // namespace
}  // namespace aegis
