// Issue 30, item 3: under MPS the driver reports every client's utilisation against the MPS
// server's pid (the H200 run's nvml-calls/). In the MPS trial no job got a first activity and
// each job's history recorded utilisation 0.00. Here the emulated GPU reports as that driver
// did, and aegisd must anchor MPS jobs from what it shows and record only what is theirs.
#include "tests/emulated_replay.h"

namespace aegis {
namespace {

struct MpsRig : test::EmulatedRig {
  test::Sleeper server;  // stands for nvidia-cuda-mps-server
  MpsRig() : test::EmulatedRig("1x143771", true, true, "aegis", "mps") {
    env.infrastructure.insert(server.pid());
  }
  // A client process of the server, holding `mib` and running at `solo`.
  void client(pid_t pid, MiB mib, const emu::Activity& solo) {
    play(static_cast<std::uint32_t>(pid), 0, mib, solo);
    state->mark_mps_client(static_cast<std::uint32_t>(pid), static_cast<std::uint32_t>(server.pid()));
  }
  // The utilisation a new job of `name`'s signature gets from history (null: none recorded).
  nlohmann::json history_util(const std::string& name) {
    const JobId next = submit(1001, name);
    return show(next)["utilisation"]["gpu_util"];
  }
};

const emu::Activity kIdle{0, 0, 0, 0};
const emu::Activity kTrainA{0.3, 0.15, 0.15, 0.6};
const emu::Activity kTrainB{0.5, 0.25, 0.25, 0.9};

TEST(MpsAttribution, TheEmulatedDriverReportsClientsWorkAgainstTheirServer) {
  MpsRig rig;
  test::Sleeper c;
  rig.client(c.pid(), 4000, kTrainB);
  const auto g = rig.env.sample_gpus(SampleRequest{})[0];
  bool server_listed = false, client_listed = false;
  for (const auto& p : g.processes) {
    if (p.pid == static_cast<std::uint32_t>(rig.server.pid())) {
      server_listed = true;
      EXPECT_EQ(p.used_mib, emu::kMpsServerMib);
      ASSERT_TRUE(p.sm_util);
      EXPECT_NEAR(*p.sm_util, 0.9, 0.005) << "the client's work, against the server";
    }
    if (p.pid == static_cast<std::uint32_t>(c.pid())) {
      client_listed = true;
      EXPECT_TRUE(p.mps_client);
      EXPECT_EQ(p.used_mib, 4000);
      EXPECT_FALSE(p.sm_util) << "no sample of its own";
    }
  }
  EXPECT_TRUE(server_listed);
  EXPECT_TRUE(client_listed);
}

TEST(MpsAttribution, MpsJobsAreAnchoredAndTheirHistoryHoldsOnlyTheirOwnSamples) {
  MpsRig rig;
  test::Sleeper a_pid, b_pid;
  Seconds t = 1000;
  const JobId a = rig.submit(1001, "a");
  rig.tick_at(t);
  rig.env.owner[a_pid.pid()] = {a, 1};
  // A alone: its context, then training. The server's samples are its own.
  int a_idle = 0, a_training = 0;  // A's samples while it is the only client
  for (int i = 0; i < 3; ++i, ++a_idle) {
    rig.client(a_pid.pid(), 500, kIdle);
    rig.tick_at(++t);
  }
  const Seconds a_trains = t + 1;
  for (int i = 0; i < 5; ++i, ++a_training) {
    rig.client(a_pid.pid(), 6000, kTrainA);
    rig.tick_at(++t);
  }
  auto att = rig.show(a)["attempt_log"][0];
  ASSERT_FALSE(att["first_activity"].is_null()) << "the sole client's work is the server's sample";
  EXPECT_EQ(att["first_activity"].get<double>(), a_trains);
  EXPECT_EQ(att["anchor"], "process-util");
  // B joins once A's window has passed: its work is mixed with A's in the server's sample,
  // so it is anchored on the GPU's activity rising (it is the only new job there).
  const JobId b = rig.submit(1001, "b");
  JobId b_id = 0;
  for (int i = 0; i < 60 && !b_id; ++i, ++a_training) {
    rig.client(a_pid.pid(), 6000, kTrainA);
    rig.tick_at(++t);
    if (rig.show(b)["state"] == "running") b_id = b;
  }
  ASSERT_EQ(b_id, b) << "B was placed beside A";
  rig.env.owner[b_pid.pid()] = {b, 1};
  for (int i = 0; i < 2; ++i) {
    rig.client(b_pid.pid(), 500, kIdle);
    rig.tick_at(++t);
  }
  const Seconds b_trains = t + 1;
  for (int i = 0; i < 6; ++i) {
    rig.client(b_pid.pid(), 5000, kTrainB);
    rig.tick_at(++t);
  }
  att = rig.show(b)["attempt_log"][0];
  ASSERT_FALSE(att["first_activity"].is_null()) << "MPS job B never anchored";
  EXPECT_EQ(att["first_activity"].get<double>(), b_trains);
  EXPECT_EQ(att["anchor"], "gpu-activity");
  // Both end: A's history holds its utilisation from while it was the only client; B was
  // never alone nor the only client, so its history holds no utilisation (never a 0.00).
  rig.state->release(static_cast<std::uint32_t>(b_pid.pid()));
  rig.env.end(b, 1, 0);
  rig.tick_at(++t);  // A is the only client again: its sample
  ++a_training;
  rig.state->release(static_cast<std::uint32_t>(a_pid.pid()));
  rig.env.end(a, 1, 0);
  rig.tick_at(++t);
  ASSERT_EQ(rig.show(a)["state"], "completed");
  ASSERT_EQ(rig.show(b)["state"], "completed");
  const auto a_util = rig.history_util("a");
  ASSERT_TRUE(a_util.is_number()) << "A's own samples were recorded";
  // The history takes the GPU's utilisation over the intervals A was the only client (the
  // sampling change: per-process samples stop at the anchor), whose first interval is the
  // one before its first sample: within one interval's weight of the per-sample mean.
  EXPECT_NEAR(a_util.get<double>(), kTrainA.util * a_training / (a_training + a_idle), 0.03)
      << "the mean of its samples while it was the only client (its start-up's zeros included)";
  EXPECT_TRUE(rig.history_util("b").is_null()) << "B's history: " << rig.history_util("b").dump();
}

// Two clients of one server from their start to their end: neither job's work can be told
// apart, so neither history holds a utilisation (the MPS trial recorded 0.00 for each).
TEST(MpsAttribution, JobsSharingTheirServerThroughoutRecordNoUtilisation) {
  MpsRig rig;
  rig.cfg.engine.observation = false;  // both placed at once, side by side
  rig.cfg.engine.exclusive_first = false;
  rig.d = std::make_unique<Daemon>(rig.cfg, rig.env);
  test::Sleeper a_pid, b_pid;
  Seconds t = 1000;
  const JobId a = rig.submit(1001, "a"), b = rig.submit(1001, "b");
  rig.tick_at(t);
  ASSERT_EQ(rig.show(a)["state"], "running");
  ASSERT_EQ(rig.show(b)["state"], "running");
  rig.env.owner[a_pid.pid()] = {a, 1};
  rig.env.owner[b_pid.pid()] = {b, 1};
  for (int i = 0; i < 10; ++i) {
    rig.client(a_pid.pid(), 6000, kTrainA);
    rig.client(b_pid.pid(), 5000, kTrainB);
    rig.tick_at(++t);
  }
  for (auto [id, pid] : {std::pair{a, a_pid.pid()}, std::pair{b, b_pid.pid()}}) {
    rig.state->release(static_cast<std::uint32_t>(pid));
    rig.env.end(id, 1, 0);
  }
  rig.tick_at(++t);
  ASSERT_EQ(rig.show(a)["state"], "completed");
  ASSERT_EQ(rig.show(b)["state"], "completed");
  EXPECT_TRUE(rig.history_util("a").is_null()) << "A's history: " << rig.history_util("a").dump();
  EXPECT_TRUE(rig.history_util("b").is_null()) << "B's history: " << rig.history_util("b").dump();
}

}  // namespace
}  // namespace aegis
