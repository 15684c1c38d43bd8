// The dashboard's feed (src/runtime/daemon/dashboard_feed.h) on a fake environment: its
// replies are the API's own, carry no environment, are built only while someone watches,
// and its ring of samples keeps the last N ticks with each running job's memory.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "runtime/daemon/daemon.h"
#include "runtime/daemon/dashboard_feed.h"
#include "sched/policies.h"
#include "tests/fake_env.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

// The feed asks for the page's fields only (issue 33 item 1).
std::vector<std::string> dashboard_fields() { return {std::begin(kDashboardFields), std::end(kDashboardFields)}; }

struct FeedRig {
  test::FakeEnv env;
  DaemonConfig cfg;
  std::unique_ptr<Daemon> d;
  FeedRig() {
    cfg.daemon.state_dir = test::temp_path("state");
    mkdir(cfg.daemon.state_dir.c_str(), 0700);
    cfg.daemon.durability = "normal";
    cfg.engine = policy_config(cfg.daemon.policy);
    env.gpus = test::fake_gpus(2, 40960);
    d = std::make_unique<Daemon>(cfg, env);
  }
  JobId submit(uid_t uid, MiB mem, std::map<std::string, std::string> job_env = {}) {
    api::SubmitRequest r;
    r.job.command = {"python3", "train.py"};
    r.job.workdir = "/tmp";
    r.job.name = "train";
    r.job.mem_mib = mem;
    r.job.env = std::move(job_env);
    const auto reply = d->respond(r, Caller{uid, uid, 1}).object;
    EXPECT_TRUE(reply["ok"].get<bool>()) << reply.dump();
    return reply["id"].get<JobId>();
  }
  void tick(DashboardFeed& feed) {
    env.clock += 1;
    d->tick(env.clock);
    feed.publish(*d, env.clock);
  }
};

TEST(DashboardFeed, RepliesAreTheApiRepliesWithoutEnvironmentAndOnlyWhileWatched) {
  FeedRig rig;
  DashboardFeed feed(10, 1000);
  const JobId id = rig.submit(1001, 8000, {{"WANDB_API_KEY", "secret-7f3a"}});
  rig.tick(feed);
  // Nobody has looked yet: the listing is not built.
  EXPECT_FALSE(feed.replies(rig.env.clock, 0).queue);
  rig.tick(feed);  // now someone has
  const auto r = feed.replies(rig.env.clock, 0);
  ASSERT_TRUE(r.queue && r.gpus);
  EXPECT_EQ(*r.queue, reply_text(rig.d->respond(api::ListRequest{true, false, false, dashboard_fields()}, Caller{1001, 1001, 1})));
  EXPECT_EQ(*r.active, reply_text(rig.d->respond(api::ListRequest{false, false, false, dashboard_fields()}, Caller{1001, 1001, 1})));
  EXPECT_EQ(*r.gpus, reply_text(rig.d->respond(api::GpusRequest{}, Caller{1001, 1001, 1})));
  EXPECT_EQ(r.queue->find("secret-7f3a"), std::string::npos);
  EXPECT_EQ(r.queue->find("WANDB_API_KEY"), std::string::npos);
  // The owner's own view has it: the check above could have failed.
  const auto own = rig.d->respond(api::ShowRequest{id}, Caller{1001, 1001, 1}).object.dump();
  EXPECT_NE(own.find("secret-7f3a"), std::string::npos);
}

TEST(DashboardFeed, ListsTheNewestMaxJobsOfQueueAll) {
  FeedRig rig;
  DashboardFeed feed(10, 10);
  for (int i = 0; i < 12; ++i) rig.submit(1001, 1000);
  feed.replies(rig.env.clock, 0);  // someone looks
  rig.tick(feed);
  const auto listed = nlohmann::json::parse(*feed.replies(rig.env.clock, 0).queue)["jobs"];
  auto all = nlohmann::json::parse(reply_text(rig.d->respond(api::ListRequest{true, false, false, dashboard_fields()}, Caller{1001, 1001, 1})))["jobs"];
  ASSERT_EQ(all.size(), 12u);
  all.erase(all.begin() + 10, all.end());
  EXPECT_EQ(listed, all);
}

TEST(DashboardFeed, TheRingKeepsTheLastFramesWithEachRunningJobsMemory) {
  FeedRig rig;
  DashboardFeed feed(3, 1000);
  const JobId a = rig.submit(1001, 8000);
  rig.tick(feed);  // a starts on a GPU
  const int gpu = rig.env.env_of(a, "CUDA_VISIBLE_DEVICES") == "GPU-fake-0" ? 0 : 1;
  rig.env.activity(a, 1, gpu, 6000, 4242);
  for (int i = 0; i < 4; ++i) rig.tick(feed);
  const auto all = nlohmann::json::parse(feed.frames_json(0));
  ASSERT_EQ(all["frames"].size(), 3u);  // 5 ticks, 3 kept
  EXPECT_EQ(all["oldest"].get<double>(), all["frames"][0][0].get<double>());
  EXPECT_EQ(all["frames"][2][0].get<double>(), rig.env.clock);
  // [t, gpus: [used, smact, observing], jobs: [id, [gpu], [mib]]]
  const auto& last = all["frames"][2];
  ASSERT_EQ(last[1].size(), 2u);
  ASSERT_EQ(last[2].size(), 1u);
  EXPECT_EQ(last[2][0][0].get<JobId>(), a);
  EXPECT_EQ(last[2][0][1], nlohmann::json::array({gpu}));
  EXPECT_EQ(last[2][0][2], nlohmann::json::array({6000}));
  // Only what came after `since`.
  const auto newer = nlohmann::json::parse(feed.frames_json(rig.env.clock - 1.5));
  EXPECT_EQ(newer["frames"].size(), 2u);
}

// The poll loop's wait (issue 33 item 6): nothing until the next build, and the loop is
// woken by it; at the wait's end whatever the feed holds. Never blocks.
TEST(DashboardFeed, RepliesReadyWaitsWithoutBlockingAndWakesTheLoop) {
  FeedRig rig;
  DashboardFeed feed(10, 1000);
  int woken = 0;
  feed.on_publish([&] { ++woken; });
  rig.tick(feed);
  const double asked = rig.env.clock;
  EXPECT_FALSE(feed.replies_ready(asked, asked, 2));  // none built yet, and this reader wants them
  EXPECT_EQ(woken, 0);
  rig.tick(feed);
  EXPECT_EQ(woken, 1);
  const auto r = feed.replies_ready(asked, rig.env.clock, 2);
  ASSERT_TRUE(r && r->queue);
  // Fresh enough for a reader that asks within the wait: at once.
  EXPECT_TRUE(feed.replies_ready(rig.env.clock + 1, rig.env.clock + 1, 2));
  // Stale for a later reader until the wait is over, then what there is.
  EXPECT_FALSE(feed.replies_ready(rig.env.clock + 5, rig.env.clock + 5, 2));
  EXPECT_TRUE(feed.replies_ready(rig.env.clock + 5, rig.env.clock + 7, 2));
  feed.on_publish(nullptr);
  rig.tick(feed);
  EXPECT_EQ(woken, 1);
}

}  // namespace
}  // namespace aegis
