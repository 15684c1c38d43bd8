// The daemon's parts that need no process: exit classification, the store, the config.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/daemon/config.h"
#include "runtime/job/classify.h"
#include "runtime/launch/launcher.h"
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
