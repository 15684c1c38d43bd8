// Time limits and conservative backfill in the lifecycle (issue 32 item 5,
// src/lifecycle/backfill.h, time_limits.h), with a placer of whole GPUs (one job each).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "lifecycle/backfill.h"
#include "lifecycle/eta.h"
#include "lifecycle/lifecycle.h"
#include "tests/gpu_slots.h"

namespace aegis {
namespace {

using test::GpuSlots;

JobSpec job(JobId id, int gpus, std::optional<Seconds> limit) {
  JobSpec s;
  s.id = id;
  s.num_gpus = gpus;
  s.time_limit = limit;
  return s;
}

// The reservation rule alone: `any` lets a backfilled job join any running job (the
// published rule); the join rules, the default `by_reservation` among them, have their own tests.
Lifecycle make(bool backfill) {
  EngineConfig c;
  c.backfill = backfill;
  c.backfill_joins = "any";
  return Lifecycle(c, LifecycleOptions{});
}

TEST(ReservedStart, TheNthGpuToBeFreeOnOneServerElseWholeServers) {
  const std::vector<int> one{4};
  const std::vector<HeldGpu> held{{0, 0, 100}, {0, 1, 50}, {0, 2, 70}};
  EXPECT_EQ(reserved_start(1, one, held, 10), 10);   // GPU 3 is free now
  EXPECT_EQ(reserved_start(2, one, held, 10), 50);
  EXPECT_EQ(reserved_start(4, one, held, 10), 100);
  const std::vector<int> two{2, 2};
  const std::vector<HeldGpu> spread{{0, 0, 30}, {1, 1, 20}};
  EXPECT_EQ(reserved_start(2, two, spread, 0), 20);  // server 1 is whole at 20
  EXPECT_EQ(reserved_start(4, two, spread, 0), 30);  // a gang job: both servers
  const std::vector<HeldGpu> unlimited{{0, 0, std::numeric_limits<Seconds>::infinity()}};
  EXPECT_FALSE(reserved_start(4, one, unlimited, 0));  // a job without a limit holds a GPU it needs
  EXPECT_FALSE(reserved_start(1, {}, held, 0));        // a placer that cannot say
}

// reserved_start written out from its contract, from scratch: the reference the book's
// incremental answers are held to.
std::optional<Seconds> reserved_start_from_scratch(int num_gpus, const std::vector<int>& servers,
                                                   const std::vector<HeldGpu>& held, Seconds now,
                                                   const std::optional<HeadNeed>& need) {
  const Seconds never = std::numeric_limits<Seconds>::infinity();
  if (servers.empty() || num_gpus <= 0) return std::nullopt;
  Seconds best = never;
  std::vector<std::pair<Seconds, int>> whole;
  for (int s = 0; s < static_cast<int>(servers.size()); ++s) {
    std::vector<Seconds> ready;
    Seconds idle = now;
    for (int g = 0; g < servers[static_cast<std::size_t>(s)]; ++g) {
      std::vector<HeldGpu> on;
      for (const HeldGpu& h : held)
        if (h.server == s && h.gpu == g) on.push_back(h);
      std::stable_sort(on.begin(), on.end(), [](const HeldGpu& a, const HeldGpu& b) { return a.until > b.until; });
      // Ready once the jobs still there leave the head room (idle, without `need`).
      Seconds r = now;
      MiB booked = 0;
      bool exclusive = false;
      for (const HeldGpu& h : on) {
        booked += h.mib;
        exclusive = exclusive || h.exclusive;
        if (!(need && need->shares && !exclusive && need->usable_mib - booked >= need->need_mib)) {
          r = std::max(r, h.until);
          break;
        }
      }
      for (const HeldGpu& h : on) idle = std::max(idle, h.until);
      ready.push_back(r);
    }
    if (static_cast<int>(ready.size()) >= num_gpus) {
      std::sort(ready.begin(), ready.end());
      best = std::min(best, ready[static_cast<std::size_t>(num_gpus - 1)]);
    }
    whole.push_back({idle, servers[static_cast<std::size_t>(s)]});
  }
  if (best == never) {
    std::sort(whole.begin(), whole.end());
    int got = 0;
    for (const auto& [t, n] : whole)
      if ((got += n) >= num_gpus) {
        best = t;
        break;
      }
  }
  if (best == never) return std::nullopt;
  return best;
}

// The book a backfill pass asks once per candidate: each answer, with a candidate's GPUs
// held too and after those kept, is the from-scratch one, for heads on one server, larger
// than a server and sharing; and each candidate costs only the servers it is on (all 6
// servers were computed again per candidate before it).
TEST(ReservationBook, AnswersAsFromScratchRecomputingOnlyTheCandidatesServers) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<int> servers{4, 4, 4, 2, 4, 4};
  const Seconds now = 100;
  auto held_gpu = [&] {
    const int s = pick(0, 5);
    const Seconds until = pick(0, 9) == 0 ? std::numeric_limits<Seconds>::infinity() : now + 10 * pick(0, 30);
    return HeldGpu{s, pick(0, servers[static_cast<std::size_t>(s)] - 1), until, MiB{1000} * pick(0, 20), pick(0, 7) == 0};
  };
  const HeadNeed shares{true, 8000, 38000};
  int compared = 0;
  for (int round = 0; round < 200; ++round) {
    const int num_gpus = std::vector<int>{1, 2, 3, 4, 8, 12}[static_cast<std::size_t>(pick(0, 5))];
    const std::optional<HeadNeed> need = pick(0, 1) ? std::optional<HeadNeed>(shares) : std::nullopt;
    std::vector<HeldGpu> held;
    for (int k = pick(0, 40); k > 0; --k) held.push_back(held_gpu());
    ReservationBook book;
    book.reset(num_gpus, servers, held, now, need);
    std::uint64_t made = servers.size();
    ASSERT_EQ(book.answers_made(), made);
    for (int c = 0; c < 10; ++c) {
      // A candidate: one to three GPUs of one server (a gang candidate: two servers).
      std::vector<HeldGpu> extra;
      const HeldGpu first = held_gpu();
      const int servers_touched = pick(0, 4) == 0 ? 2 : 1;
      for (int t = 0; t < servers_touched; ++t)
        for (int k = pick(1, 3); k > 0; --k) {
          HeldGpu h = first;
          h.server = (first.server + t) % 6;
          h.gpu = pick(0, servers[static_cast<std::size_t>(h.server)] - 1);
          extra.push_back(h);
        }
      std::vector<HeldGpu> with = held;
      with.insert(with.end(), extra.begin(), extra.end());
      ASSERT_EQ(book.start_with(extra), reserved_start_from_scratch(num_gpus, servers, with, now, need))
          << "round " << round << " candidate " << c;
      made += static_cast<std::uint64_t>(servers_touched);
      EXPECT_EQ(book.answers_made(), made) << "only the candidate's servers are computed again";
      ++compared;
      if (pick(0, 1)) {  // kept: later candidates count it
        book.add(extra);
        held = with;
        made += static_cast<std::uint64_t>(servers_touched);
      }
      ASSERT_EQ(book.start(), reserved_start_from_scratch(num_gpus, servers, held, now, need));
    }
  }
  EXPECT_EQ(compared, 2000);
}

// Three GPUs: A (1 GPU, ends by 3600) runs; the head H wants all three, so its reservation
// is 3600. Behind it: D (2 h) would end after it, C (30 min) before, E has no limit.
struct Scene {
  Lifecycle life;
  GpuSlots gpus{3};
  Effects fx;
  explicit Scene(bool backfill) : life(make(backfill)) {
    life.submitted(job(1, 1, 3600), false, false, 0);
    fx = life.schedule(0, gpus);
    life.submitted(job(2, 3, 7200), false, false, 1);   // H
    life.submitted(job(3, 1, 7200), false, false, 2);   // D
    life.submitted(job(4, 1, std::nullopt), false, false, 3);  // E
    life.submitted(job(5, 1, 1800), false, false, 4);   // C
    fx = life.schedule(10, gpus);
  }
};

TEST(Backfill, AJobEndingBeforeTheHeadsReservationStartsAheadOfIt) {
  Scene s(true);
  ASSERT_EQ(s.fx.starts.size(), 1u);
  EXPECT_EQ(s.fx.starts[0].job, 5);                  // C, and not D (too long) or E (no limit)
  EXPECT_TRUE(s.fx.starts[0].backfilled);            // marked so (the simulator's --jobs-csv)
  const auto launch = std::find_if(s.fx.changes.begin(), s.fx.changes.end(),
                                   [](const Effects::Change& c) { return c.job == 5 && c.event == "launch"; });
  ASSERT_NE(launch, s.fx.changes.end());
  EXPECT_EQ(launch->detail, kBackfilledLaunch);      // and in its launch event (aegisd's history)
  EXPECT_EQ(s.fx.reserved_start, 3600);
  ASSERT_TRUE(s.fx.blocked);
  EXPECT_EQ(s.fx.blocked->reason, "no GPUs free");  // the head's reason stands
  EXPECT_EQ(s.life.queue_order(), std::vector<JobId>({2, 3, 4}));
}

TEST(Backfill, OffByDefaultTheHeadOfLineStaysStrict) {
  EXPECT_FALSE(EngineConfig{}.backfill);
  Scene s(false);
  EXPECT_TRUE(s.fx.starts.empty());
  EXPECT_FALSE(s.fx.reserved_start);
  EXPECT_EQ(s.life.queue_order(), std::vector<JobId>({2, 3, 4, 5}));
}

TEST(Backfill, NoReservationWithoutTheRunningJobsLimits) {
  auto life = make(true);
  GpuSlots gpus(2);
  life.submitted(job(1, 1, std::nullopt), false, false, 0);  // runs with no limit
  life.schedule(0, gpus);
  life.submitted(job(2, 2, 100), false, false, 1);
  life.submitted(job(3, 1, 10), false, false, 2);
  auto fx = life.schedule(5, gpus);
  EXPECT_TRUE(fx.starts.empty());  // the head's start is unknown: nothing goes ahead of it
  EXPECT_FALSE(fx.reserved_start);
}

// Random queues on 4 GPUs, every job ending by its limit: a head's reservation never moves
// later while it waits, and it starts by it. Backfill must also have started jobs out of order.
TEST(Backfill, NeverDelaysTheHeadsReservation) {
  int out_of_order = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    auto life = make(true);
    GpuSlots gpus(4);
    std::map<JobId, Seconds> ends;  // running job -> when it really ends (<= its limit)
    std::map<JobId, Seconds> reservation;
    JobId next = 1, last_started = 0;
    for (Seconds t = 0; t < 400; t += 1) {
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second > t) {
          ++it;
          continue;
        }
        gpus.release(it->first);
        life.ended(it->first, {AttemptOutcome::Completed, ""}, t);
        it = ends.erase(it);
      }
      if (t < 300 && rng() % 3 == 0) {
        const Seconds limit = static_cast<Seconds>(5 + rng() % 40);
        life.submitted(job(next++, 1 + static_cast<int>(rng() % 4), limit), false, false, t);
      }
      const auto order = life.queue_order();
      auto fx = life.schedule(t, gpus);
      // A start is marked backfilled exactly when it comes after the waiting head in the
      // queue (the jobs ahead of the head started in order, before it was reserved).
      const auto pos = [&](JobId id) { return std::find(order.begin(), order.end(), id) - order.begin(); };
      const auto head_pos = fx.reserved_start ? pos(life.queue_order().front()) : static_cast<std::ptrdiff_t>(order.size());
      for (const auto& st : fx.starts) EXPECT_EQ(st.backfilled, pos(st.job) > head_pos) << "seed " << seed << " t " << t;
      for (const auto& st : fx.starts) {
        const JobSpec& sp = life.find(st.job)->spec();
        // Ends somewhere in its limit's second half.
        ends[st.job] = t + *sp.time_limit - static_cast<Seconds>(rng() % static_cast<unsigned>(*sp.time_limit / 2));
        if (auto r = reservation.find(st.job); r != reservation.end()) {
          EXPECT_LE(t, r->second) << "seed " << seed;
        }
        if (st.job < last_started) ++out_of_order;
        last_started = std::max(last_started, st.job);
      }
      if (fx.reserved_start) {
        const JobId head = life.queue_order().front();
        auto [r, fresh] = reservation.try_emplace(head, *fx.reserved_start);
        if (!fresh) {
          EXPECT_LE(*fx.reserved_start, r->second) << "seed " << seed << " head " << head << " t " << t;
          r->second = std::min(r->second, *fx.reserved_start);
        }
      }
    }
  }
  EXPECT_GT(out_of_order, 0);
}

TEST(TimeLimit, AnAttemptPastItsLimitIsStoppedAndFailsWithTheReason) {
  auto life = make(false);
  GpuSlots gpus(1);
  life.submitted(job(1, 1, 5400), false, false, 0);
  life.schedule(10, gpus);
  EXPECT_TRUE(life.expire(5409).signals.empty());  // not yet
  EXPECT_EQ(life.next_deadline(), 5410);
  auto fx = life.expire(5410);
  ASSERT_EQ(fx.signals, std::vector<JobId>({1}));
  ASSERT_FALSE(fx.changes.empty());
  EXPECT_EQ(fx.changes[0].event, "timeout");
  EXPECT_TRUE(life.expire(5420).signals.empty());  // once
  // The stop ends it however the process reports it: failed, with the limit named.
  fx = life.ended(1, {AttemptOutcome::Failed, "killed by signal 15"}, 5411);
  EXPECT_EQ(life.find(1)->state, JobState::Failed);
  EXPECT_EQ(life.find(1)->reason, "timeout: ran past its time limit of 1h30m");
  EXPECT_FALSE(life.has_work());  // not sent to the recovery rule
}

TEST(TimeLimit, ACompletionBeforeTheStopStandsAndNoLimitMeansNoStop) {
  auto life = make(false);
  GpuSlots gpus(2);
  life.submitted(job(1, 1, 60), false, false, 0);
  life.submitted(job(2, 1, std::nullopt), false, false, 0);
  life.schedule(0, gpus);
  EXPECT_EQ(life.expire(1e9).signals, std::vector<JobId>({1}));
  life.ended(1, {AttemptOutcome::Completed, "exit status 0"}, 61);
  EXPECT_EQ(life.find(1)->state, JobState::Completed);
  EXPECT_EQ(life.find(2)->state, JobState::Running);
}

TEST(TimeLimit, EachAttemptHasItsOwnDeadlineAndARestoreKeepsIt) {
  auto life = make(false);
  GpuSlots gpus(1);
  life.submitted(job(1, 1, 100), false, false, 0);
  life.schedule(0, gpus);
  // It never started (lost): back in the queue; its next attempt runs from 50.
  life.ended(1, {AttemptOutcome::Lost, "never started"}, 40);
  gpus.release(1);
  life.schedule(50, gpus);
  EXPECT_TRUE(life.expire(120).signals.empty());  // the first attempt's deadline is void
  EXPECT_EQ(life.expire(150).signals, std::vector<JobId>({1}));
  // A daemon restarted: the job as it stored it, running its attempt from 50.
  LifeJob copy = *life.find(1);
  auto again = make(false);
  copy.timed_out = false;
  again.restore(copy);
  EXPECT_EQ(again.next_deadline(), 150);
  EXPECT_EQ(again.expire(151).signals, std::vector<JobId>({1}));
  again.ended(1, {AttemptOutcome::Failed, "killed by signal 15"}, 152);
  EXPECT_EQ(again.find(1)->state, JobState::Failed);
}

// Two GPUs: A (ends by 100) and B (by 300) run; C wants both, then D, E (no limit), F.
TEST(StartEstimates, TheQueueServedForwardWithJobsEndingAtTheirLimits) {
  auto life = make(false);
  GpuSlots gpus(2);
  life.submitted(job(1, 1, 100), false, false, 0);
  life.submitted(job(2, 1, 300), false, false, 0);
  life.schedule(0, gpus);
  life.submitted(job(3, 2, 50), false, false, 1);
  life.submitted(job(4, 1, 10), false, false, 2);
  life.submitted(job(5, 1, std::nullopt), false, false, 3);
  life.submitted(job(6, 1, 10), false, false, 4);
  const std::vector<int> servers{2};
  const auto e = estimate_starts(life, 10, servers);
  using Start = std::pair<JobId, std::optional<Seconds>>;
  EXPECT_EQ(e.starts, (std::vector<Start>{{3, 300}, {4, 350}, {5, 350}, {6, 360}}));
  EXPECT_EQ(life.queue_order().size(), 4u);  // the live state is untouched
  EXPECT_EQ(life.find(3)->state, JobState::Queued);
  // With backfill on, D and F (10 s each) go ahead of C, which keeps its start.
  auto bf = make(true);
  GpuSlots g2(2);
  bf.submitted(job(1, 1, 100), false, false, 0);
  bf.submitted(job(2, 1, 300), false, false, 0);
  bf.schedule(0, g2);
  bf.submitted(job(3, 2, 50), false, false, 1);
  bf.submitted(job(4, 1, 10), false, false, 2);
  bf.submitted(job(6, 1, 10), false, false, 4);
  EXPECT_EQ(estimate_starts(bf, 10, servers).starts, (std::vector<Start>{{3, 300}, {4, 100}, {6, 110}}));
}

TEST(StartEstimates, NoEstimateBehindAJobWithoutALimitAndTheWorkIsOnePassPerEnd) {
  auto life = make(false);
  GpuSlots gpus(1);
  life.submitted(job(1, 1, std::nullopt), false, false, 0);
  life.schedule(0, gpus);
  life.submitted(job(2, 1, 10), false, false, 1);
  const std::vector<int> one{1};
  auto e = estimate_starts(life, 5, one);
  ASSERT_EQ(e.starts.size(), 1u);
  EXPECT_FALSE(e.starts[0].second);
  EXPECT_EQ(e.passes, 1);
  // 500 queued jobs on 4 GPUs: one pass per job that ends, and one more.
  auto big = make(true);
  GpuSlots four(4);
  for (JobId i = 1; i <= 500; ++i) big.submitted(job(i, 1 + static_cast<int>(i % 3), 10 + static_cast<Seconds>(i % 7)), false, false, 0);
  const std::vector<int> servers{4};
  e = estimate_starts(big, 0, servers);
  EXPECT_LE(e.passes, 501);
  for (const auto& [id, at] : e.starts) EXPECT_TRUE(at) << id;
}

TEST(TimeLimit, FormatsForPeople) {
  EXPECT_EQ(format_time_limit(90), "1m30s");
  EXPECT_EQ(format_time_limit(7200), "2h");
  EXPECT_EQ(format_time_limit(90000), "1d1h");
  EXPECT_EQ(format_time_limit(0), "0s");
}


// Sharing-aware reservations: GPUs of 40,000 MiB that jobs share by the memory booked for
// them (`mib`, per job), as the engine's memory rule does; the head asks its own `mib`.
class SharedGpus : public Placer {
 public:
  explicit SharedGpus(int n) : on(static_cast<std::size_t>(n)), count{n} {}
  static constexpr MiB kUsable = 40000;
  std::map<JobId, MiB> mib;                       // what each job books per GPU
  std::vector<std::map<JobId, MiB>> on;           // per GPU: its jobs
  std::vector<int> count;
  MiB free(std::size_t g) const {
    MiB f = kUsable;
    for (const auto& [id, m] : on[g]) f -= m;
    return f;
  }
  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    Launch l;
    l.job = job.spec.id;
    l.admitted_mib = mib.at(job.spec.id);
    for (std::size_t g = 0; g < on.size() && static_cast<int>(l.gpus.size()) < job.spec.num_gpus; ++g)
      if (free(g) >= l.admitted_mib) l.gpus.push_back(static_cast<int>(g));
    if (static_cast<int>(l.gpus.size()) < job.spec.num_gpus) return std::nullopt;
    Placement p;
    p.parts.push_back({0, l, kUsable});
    return p;
  }
  void started(const QueuedJob& job, const Placement& p, Seconds) override {
    for (int g : p.parts.front().launch.gpus) on[static_cast<std::size_t>(g)][job.spec.id] = mib.at(job.spec.id);
  }
  void release(JobId id) {
    for (auto& g : on) g.erase(id);
  }
  std::optional<std::string> never_runs(const QueuedJob& job) const override {
    if (job.spec.num_gpus > static_cast<int>(on.size())) return std::string("job.gpus: too many");
    return std::nullopt;
  }
  std::variant<Requeue, Stop> recover(const Failure& f) const override { return Stop{f.job.spec.id, f.detail}; }
  std::span<const int> server_gpus() const override { return count; }
  std::optional<HeadNeed> head_need(const QueuedJob& head) const override {
    return HeadNeed{true, mib.at(head.spec.id), kUsable};
  }
};

TEST(ReservedStart, CountsTheMemoryTheHeadCanShare) {
  const std::vector<int> two{2};
  const Seconds kOn = std::numeric_limits<Seconds>::infinity();
  std::vector<HeldGpu> held{{0, 0, 100, 10000, false}, {0, 0, 50, 20000, false}, {0, 1, 200, 30000, false}};
  const HeadNeed shares{true, 15000, 40000};
  EXPECT_EQ(reserved_start(1, two, held, 0, shares), 50);  // beside the 10,000 MiB job on GPU 0
  EXPECT_EQ(reserved_start(1, two, held, 0), 100);          // idle GPUs only: when GPU 0 is idle
  EXPECT_EQ(reserved_start(2, two, held, 0, shares), 200);
  held[0].exclusive = true;                                 // nobody may join it: GPU 0 at 100
  EXPECT_EQ(reserved_start(1, two, held, 0, shares), 100);
  const HeadNeed alone{false, 15000, 40000};
  EXPECT_EQ(reserved_start(1, two, held, 0, alone), 100);
  // A job without a limit that leaves room is no obstacle under sharing.
  const std::vector<HeldGpu> unlimited{{0, 1, kOn, 5000, false}, {0, 0, kOn, 39000, false}};
  EXPECT_EQ(reserved_start(1, two, unlimited, 7, shares), 7);
  EXPECT_FALSE(reserved_start(2, two, unlimited, 7, shares));
}

// One GPU: A (10,000 MiB, to 1000) and B (20,000 MiB, to 3000) run; the head H asks 15,000,
// so it can start beside B once A ends: reserved at 1000, not 3000 (the GPU idle). C (8,000,
// ends at 2010) fits now and would end by 3000, but would leave H too little at 1000: it
// waits. D (4,000, ends at 5010) leaves H its room: it goes ahead though it ends later.
TEST(Backfill, TheReservationCountsSharedMemoryAndABackfillLeavesTheHeadItsRoom) {
  auto life = make(true);
  SharedGpus gpus(1);
  gpus.mib = {{1, 10000}, {2, 20000}, {3, 15000}, {4, 8000}, {5, 4000}};
  life.submitted(job(1, 1, 1000), false, false, 0);
  life.submitted(job(2, 1, 3000), false, false, 0);
  ASSERT_EQ(life.schedule(0, gpus).starts.size(), 2u);
  life.submitted(job(3, 1, 7200), false, false, 1);  // H
  life.submitted(job(4, 1, 2000), false, false, 2);  // C
  life.submitted(job(5, 1, 5000), false, false, 3);  // D
  auto fx = life.schedule(10, gpus);
  EXPECT_EQ(fx.reserved_start, 1000);
  ASSERT_EQ(fx.starts.size(), 1u);
  EXPECT_EQ(fx.starts[0].job, 5);
  gpus.release(1);
  life.ended(1, {AttemptOutcome::Completed, ""}, 1000);
  fx = life.schedule(1000, gpus);
  ASSERT_FALSE(fx.starts.empty());
  EXPECT_EQ(fx.starts[0].job, 3);  // the head at its reservation
}

// Random queues on 3 shared GPUs, jobs of random memory ending by their limits, some
// without one: a head's reservation never moves later while it waits, and it starts by it.
// Backfill must also have started jobs out of order, some of them ending after the head's
// reservation (which only a sharing-aware check allows).
TEST(Backfill, NeverDelaysTheHeadsSharedReservation) {
  int out_of_order = 0, past_reservation = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    auto life = make(true);
    SharedGpus gpus(3);
    std::map<JobId, Seconds> ends;
    std::map<JobId, Seconds> reservation;
    JobId next = 1, last_started = 0;
    for (Seconds t = 0; t < 400; t += 1) {
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second > t) {
          ++it;
          continue;
        }
        gpus.release(it->first);
        life.ended(it->first, {AttemptOutcome::Completed, ""}, t);
        it = ends.erase(it);
      }
      if (t < 300 && rng() % 3 == 0) {
        const Seconds limit = static_cast<Seconds>(5 + rng() % 40);
        const JobId id = next++;
        gpus.mib[id] = 4000 + static_cast<MiB>(rng() % 9) * 4000;  // 4,000 to 36,000
        // One job in eight runs without a limit (only short ones, so queues drain).
        const bool unlimited = rng() % 8 == 0;
        life.submitted(job(id, 1 + static_cast<int>(rng() % 3), unlimited ? std::nullopt : std::optional(limit)),
                       false, false, t);
        if (unlimited) gpus.mib[id] = 2000;
      }
      auto fx = life.schedule(t, gpus);
      const std::optional<Seconds> head_r = fx.reserved_start;
      // FIFO: a job started behind the waiting head has a larger id; it was backfilled.
      const JobId waiting_head = head_r ? life.queue_order().front() : 0;
      for (const auto& st : fx.starts) {
        const JobSpec& sp = life.find(st.job)->spec();
        const Seconds limit = sp.time_limit ? *sp.time_limit : 30;
        ends[st.job] = t + limit - static_cast<Seconds>(rng() % static_cast<unsigned>(limit / 2));
        if (auto r = reservation.find(st.job); r != reservation.end()) {
          EXPECT_LE(t, r->second) << "seed " << seed << " job " << st.job;
        }
        if (st.job < last_started) ++out_of_order;
        if (head_r && st.job > waiting_head && (!sp.time_limit || t + *sp.time_limit > *head_r)) ++past_reservation;
        last_started = std::max(last_started, st.job);
      }
      if (fx.reserved_start) {
        const JobId head = life.queue_order().front();
        auto [r, fresh] = reservation.try_emplace(head, *fx.reserved_start);
        if (!fresh) {
          EXPECT_LE(*fx.reserved_start, r->second) << "seed " << seed << " head " << head << " t " << t;
          r->second = std::min(r->second, *fx.reserved_start);
        }
      }
    }
  }
  EXPECT_GT(out_of_order, 0);
  EXPECT_GT(past_reservation, 0);
}

// `backfill_joins`: which running jobs a job started out of order may share a GPU with.
// Shared GPUs of 40,000 MiB; A and B (30,000 MiB each, ending at 1000) run on GPUs 0 and 1.
class CountingGpus : public SharedGpus {
 public:
  using SharedGpus::SharedGpus;
  int declined_count = 0;
  void declined(const QueuedJob&, const Placement&) override { ++declined_count; }
};

struct JoinScene {
  Lifecycle life;
  CountingGpus gpus;
  Effects fx;
  // The head H (job 3) wants every GPU at 30,000 MiB: reserved at 1000. Behind it `behind`:
  // (id, MiB, limit), submitted in that order at 2 and scheduled at 10.
  // `a_limit`: A's limit (B's is 1000); `join_slowdown`: backfill_join_slowdown.
  JoinScene(const std::string& joins, int n_gpus, std::vector<std::tuple<JobId, MiB, Seconds>> behind,
            Seconds a_limit = 1000, double join_slowdown = 1.0)
      : life([&] {
          EngineConfig c;
          c.backfill = true;
          c.backfill_joins = joins;
          c.backfill_join_slowdown = join_slowdown;
          return Lifecycle(c, LifecycleOptions{});
        }()),
        gpus(n_gpus) {
    gpus.mib = {{1, 30000}, {2, 30000}, {3, 30000}};
    life.submitted(job(1, 1, a_limit), false, false, 0);
    life.submitted(job(2, 1, 1000), false, false, 0);
    life.schedule(0, gpus);  // A on GPU 0, B on GPU 1
    life.submitted(job(3, n_gpus, 7200), false, false, 1);
    for (const auto& [id, mib, limit] : behind) {
      gpus.mib[id] = mib;
      life.submitted(job(id, 1, limit), false, false, 2);
    }
    fx = life.schedule(10, gpus);
  }
  std::vector<JobId> started() const {
    std::vector<JobId> out;
    for (const auto& st : fx.starts) out.push_back(st.job);
    return out;
  }
};

// Three GPUs, GPU 2 idle. All behind the head end by its reservation: C (20,000) fits only
// on idle GPU 2; D (5,000) would join A on GPU 0; E (15,000) would join C, backfilled in
// the same pass. With `none` only C starts, and D and E are declined so the dispatcher may
// offer them other servers; with `any` (the published rule) all three start.
TEST(Backfill, WithJoinsNoneAJobStartedOutOfOrderTakesOnlyIdleGpus) {
  EXPECT_EQ(EngineConfig{}.backfill_joins, "by_reservation");
  const std::vector<std::tuple<JobId, MiB, Seconds>> behind{{4, 20000, 500}, {5, 5000, 500}, {6, 15000, 500}};
  JoinScene none("none", 3, behind);
  EXPECT_EQ(none.fx.reserved_start, 1000);
  EXPECT_EQ(none.started(), std::vector<JobId>({4}));
  EXPECT_EQ(none.gpus.declined_count, 2);
  EXPECT_EQ(none.life.queue_order(), std::vector<JobId>({3, 5, 6}));
  JoinScene any("any", 3, behind);
  EXPECT_EQ(any.started(), std::vector<JobId>({4, 5, 6}));
  EXPECT_EQ(any.gpus.declined_count, 0);
}

// Two GPUs, none idle. C (5,000, ends at 2010) would join A, which ends at 1000, before it,
// and leaves the head its room; D (5,000, ends at 510) would join A and C, which end after
// it. `earlier_ending` lets C join (A ends first) but not D; `none` neither; `any` both.
TEST(Backfill, WithJoinsEarlierEndingAJobStartedOutOfOrderJoinsOnlyJobsEndingBeforeIt) {
  const std::vector<std::tuple<JobId, MiB, Seconds>> behind{{4, 5000, 2000}, {5, 5000, 500}};
  JoinScene earlier("earlier_ending", 2, behind);
  EXPECT_EQ(earlier.fx.reserved_start, 1000);
  EXPECT_EQ(earlier.started(), std::vector<JobId>({4}));
  EXPECT_EQ(JoinScene("none", 2, behind).started(), std::vector<JobId>());
  EXPECT_EQ(JoinScene("any", 2, behind).started(), std::vector<JobId>({4, 5}));
}

// Two GPUs, none idle; A and B end at 1000, the head's reservation. `by_reservation`: C
// (5,000, ends at 2010) may join A, which ends by the reservation; D (ends at 2110) would
// join A and C, and C runs past it: declined (earlier_ending lets D join C, which ends
// first). E (ends at 310) may join A, which ends after E but by the reservation
// (earlier_ending refuses it).
TEST(Backfill, WithJoinsByReservationAJobStartedOutOfOrderJoinsOnlyJobsEndingByTheReservation) {
  const std::vector<std::tuple<JobId, MiB, Seconds>> long_ones{{4, 5000, 2000}, {5, 5000, 2100}};
  JoinScene by("by_reservation", 2, long_ones);
  EXPECT_EQ(by.fx.reserved_start, 1000);
  EXPECT_EQ(by.started(), std::vector<JobId>({4}));
  EXPECT_EQ(by.gpus.declined_count, 1);
  EXPECT_EQ(JoinScene("earlier_ending", 2, long_ones).started(), std::vector<JobId>({4, 5}));
  const std::vector<std::tuple<JobId, MiB, Seconds>> short_one{{4, 5000, 300}};
  EXPECT_EQ(JoinScene("by_reservation", 2, short_one).started(), std::vector<JobId>({4}));
  EXPECT_EQ(JoinScene("earlier_ending", 2, short_one).started(), std::vector<JobId>());
}

// backfill_join_slowdown: a job joined is counted slowed over what it has left. Two GPUs;
// A (on GPU 0) ends at 500, B (on GPU 1) at 1000: the head's reservation, B's end. C (8,000
// MiB, ends at 310) fits only beside A, D (5,000, ends at 310) then only beside B. Counted
// slowed by 1.28 from 10, A ends at 637, by the reservation: C joins it; B would end at
// 1277, past it: D is declined. At 1 (not slowed) D joins B, whose end is the reservation;
// at 2.1 A's slowed end (1039) passes it too and neither starts.
TEST(Backfill, WithJoinsByReservationAJobIsJoinedOnlyIfItsSlowedEndIsByTheReservation) {
  EXPECT_EQ(EngineConfig{}.backfill_join_slowdown, 1.28);
  const std::vector<std::tuple<JobId, MiB, Seconds>> behind{{4, 8000, 300}, {5, 5000, 300}};
  JoinScene slowed("by_reservation", 2, behind, 500, 1.28);
  EXPECT_EQ(slowed.fx.reserved_start, 1000);
  EXPECT_EQ(slowed.started(), std::vector<JobId>({4}));
  EXPECT_EQ(slowed.gpus.declined_count, 1);
  EXPECT_EQ(slowed.life.queue_order(), std::vector<JobId>({3, 5}));
  EXPECT_EQ(JoinScene("by_reservation", 2, behind, 500, 1.0).started(), std::vector<JobId>({4, 5}));
  EXPECT_EQ(JoinScene("by_reservation", 2, behind, 500, 2.1).started(), std::vector<JobId>());
  // The factor is by_reservation's only: `any` lets both join whatever it is.
  EXPECT_EQ(JoinScene("any", 2, behind, 500, 1.28).started(), std::vector<JobId>({4, 5}));
}

// A join the slowdown declines turns with time alone: A (GPU 0) ends at 900, the head is
// reserved at 1000. Counted slowed by 1.28 from 10, A ends at 1149: C (8,000 MiB, which fits
// only beside A, a limit of 300) is declined, and the pass says when that turns: from
// (900 x 1.28 - 1000) / 0.28 = 542.9 on, A's slowed end is by the reservation. Asked again
// at 542 C still waits; at 543 it starts (ending at 843, by the reservation). A decline that
// no time turns (B, whose end is the reservation itself) reports nothing.
TEST(Backfill, AJoinTheSlowdownDeclinesSaysWhenItTurns) {
  JoinScene scene("by_reservation", 2, {{4, 8000, 300}}, 900, 1.28);
  EXPECT_EQ(scene.fx.reserved_start, 1000);
  EXPECT_TRUE(scene.started().empty());
  ASSERT_EQ(scene.fx.join_turns.size(), 1u);
  EXPECT_EQ(scene.fx.join_turns[0].first, 0);
  EXPECT_NEAR(scene.fx.join_turns[0].second, (900 * 1.28 - 1000) / 0.28, 1e-5);
  Effects early = scene.life.schedule(542, scene.gpus);
  EXPECT_TRUE(early.starts.empty());
  Effects turned = scene.life.schedule(543, scene.gpus);
  ASSERT_EQ(turned.starts.size(), 1u);
  EXPECT_EQ(turned.starts[0].job, 4);
  EXPECT_TRUE(turned.starts[0].backfilled);
  // At 1 (not slowed) nothing turns: C joins A at once.
  JoinScene unslowed("by_reservation", 2, {{4, 8000, 300}}, 900, 1.0);
  EXPECT_EQ(unslowed.started(), std::vector<JobId>({4}));
  EXPECT_TRUE(unslowed.fx.join_turns.empty());
  // D (5,000 MiB, fits only beside B, whose end is the reservation) never turns.
  JoinScene never("by_reservation", 2, {{4, 8000, 300}, {5, 5000, 300}}, 500, 1.28);
  EXPECT_EQ(never.started(), std::vector<JobId>({4}));
  EXPECT_TRUE(never.fx.join_turns.empty());
}

// GPUs whose jobs may use more memory than was booked for them (`used`, per job), as a job
// booked at the estimator-free floor does: the engine refuses by memory in use, which the
// reservation, counting booked memory, cannot see.
class OverusedGpus : public SharedGpus {
 public:
  using SharedGpus::SharedGpus;
  std::map<JobId, MiB> used;
  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    Launch l;
    l.job = job.spec.id;
    l.admitted_mib = mib.at(job.spec.id);
    for (std::size_t g = 0; g < on.size() && static_cast<int>(l.gpus.size()) < job.spec.num_gpus; ++g) {
      MiB in_use = 0;
      for (const auto& [id, m] : on[g]) in_use += std::max(m, used.count(id) ? used.at(id) : m);
      if (kUsable - in_use >= l.admitted_mib) l.gpus.push_back(static_cast<int>(g));
    }
    if (static_cast<int>(l.gpus.size()) < job.spec.num_gpus) return std::nullopt;
    Placement p;
    p.parts.push_back({0, l, kUsable});
    return p;
  }
};

// Two GPUs. A (booked 5,000 MiB, using 38,000, ends by 1000) runs on GPU 0; GPU 1 is idle.
// The head H (2 GPUs, 15,000) fits beside A by booked memory, so the shared reservation
// says "now", but the placer refuses it. C (1 GPU, ends at 5010) would take idle GPU 1:
// counted by booked memory it keeps a reservation of now, and H then waits for C as well
// (on venus, `backfill_joins = none` was worse than no backfill this way). The head is
// reserved idle GPUs instead: 1000, when A ends; C waits, D (ends at 510) goes ahead, and H
// starts at 1000. Under every `backfill_joins`.
TEST(Backfill, AReservationOfNowThatTheEngineRefusedFallsBackToIdleGpus) {
  for (const char* joins : {"any", "none", "earlier_ending", "by_reservation"}) {
    EngineConfig c;
    c.backfill = true;
    c.backfill_joins = joins;
    Lifecycle life(c, LifecycleOptions{});
    OverusedGpus gpus(2);
    gpus.mib = {{1, 5000}, {2, 15000}, {3, 5000}, {4, 5000}};
    gpus.used = {{1, 38000}, {3, 38000}};
    life.submitted(job(1, 1, 1000), false, false, 0);  // A
    ASSERT_EQ(life.schedule(0, gpus).starts.size(), 1u);
    life.submitted(job(2, 2, 7200), false, false, 1);  // H
    life.submitted(job(3, 1, 5000), false, false, 2);  // C
    life.submitted(job(4, 1, 500), false, false, 3);   // D
    auto fx = life.schedule(10, gpus);
    EXPECT_EQ(fx.reserved_start, 1000) << joins;
    ASSERT_EQ(fx.starts.size(), 1u) << joins;
    EXPECT_EQ(fx.starts[0].job, 4) << joins;
    gpus.release(4);
    life.ended(4, {AttemptOutcome::Completed, ""}, 510);
    EXPECT_TRUE(life.schedule(510, gpus).starts.empty()) << joins;  // C still waits for H
    gpus.release(1);
    life.ended(1, {AttemptOutcome::Completed, ""}, 1000);
    fx = life.schedule(1000, gpus);
    ASSERT_FALSE(fx.starts.empty()) << joins;
    EXPECT_EQ(fx.starts[0].job, 2) << joins;  // the head at its reservation
  }
}

}  // namespace
}  // namespace aegis
