// Issue 30, item 2: on a real H200, PyTorch jobs ran small kernels for 5-11 s before their
// training loop, and every anchor fired on the first of them. Each recorded job's
// per-second memory, SM activity and utilisation (tests/data/h200_timelines.csv) is
// replayed through the emulated GPU into aegisd's anchoring path: every anchor must land
// within 2 s of the start of that job's heavy phase, computed here from the recording.
#include <fstream>
#include <map>
#include <sstream>

#include "tests/emulated_replay.h"

namespace aegis {
namespace {

struct Row {
  double t = 0;  // seconds since launch
  bool own = false;
  MiB gpu_used_mib = 0;
  double smact = 0, util = 0;
};
struct Timeline {
  std::string name;  // run/job/attempt
  std::vector<Row> rows;
};

std::vector<Timeline> load() {
  std::ifstream f(std::string(AEGIS_SOURCE_DIR) + "/tests/data/h200_timelines.csv");
  EXPECT_TRUE(f) << "tests/data/h200_timelines.csv";
  std::map<std::string, Timeline> by;
  std::vector<std::string> order;
  std::string line;
  bool header = true;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) c.push_back(x);
    c.resize(8);
    const std::string key = c[0] + "/" + c[1] + "/" + c[2];
    if (!by.count(key)) order.push_back(key);
    Timeline& tl = by[key];
    tl.name = key;
    tl.rows.push_back({std::stod(c[3]), c[4] == "1", std::stoll(c[5]), c[6].empty() ? 0 : std::stod(c[6]),
                       c[7].empty() ? 0 : std::stod(c[7])});
  }
  std::vector<Timeline> out;
  for (const auto& k : order) out.push_back(by[k]);
  return out;
}

// The heavy phase, as scripts/gpu-validate/summarize.py finds it: over the seconds the job's
// process was listed, its steady level is the 80th percentile of SM activity, and the phase
// starts at the first of 3 samples in a row at half that level or more. None for a job that
// never reached it (the OOM jobs died in their first steps).
std::optional<double> heavy_phase(const Timeline& tl) {
  std::vector<const Row*> own;
  for (const Row& r : tl.rows)
    if (r.own) own.push_back(&r);
  if (own.size() < 3) return std::nullopt;
  std::vector<double> v;
  for (const Row* r : own) v.push_back(r->smact);
  std::sort(v.begin(), v.end());
  const double level = v[static_cast<std::size_t>(0.8 * static_cast<double>(v.size() - 1))];
  if (level <= 0) return std::nullopt;
  for (std::size_t i = 0; i + 3 <= own.size(); ++i)
    if (own[i]->smact >= level / 2 && own[i + 1]->smact >= level / 2 && own[i + 2]->smact >= level / 2)
      return own[i]->t;
  return std::nullopt;
}

// The H200's memory with no process: the least the recording shows.
MiB idle_mib(const std::vector<Timeline>& all) {
  MiB m = std::numeric_limits<MiB>::max();
  for (const auto& tl : all)
    for (const Row& r : tl.rows) m = std::min(m, r.gpu_used_mib);
  return m;
}

struct Replayed {
  std::optional<double> first_activity;  // seconds since launch
  std::string anchor;
};

// One recorded attempt, second by second, through a fresh aegisd on one emulated H200.
Replayed replay(const Timeline& tl, MiB idle, bool process_util, bool gpm) {
  test::EmulatedRig rig("1x143771", process_util, gpm);
  const auto pid = static_cast<std::uint32_t>(getpid());
  const JobId id = rig.submit(0, "job");
  const Seconds launch = 1000;
  rig.tick_at(launch);
  rig.env.owner[static_cast<pid_t>(pid)] = {id, 1};
  for (const Row& r : tl.rows) {
    if (r.own)  // GPM SM activity, utilisation (also its per-process sample), memory over the driver's
      rig.play(pid, 0, std::max<MiB>(1, r.gpu_used_mib - idle), {r.smact, r.smact / 2, r.smact / 2, r.util});
    else
      rig.state->release(pid);
    rig.tick_at(launch + std::max(0.01, r.t));
  }
  rig.state->release(pid);
  const auto shown = rig.show(id);
  EXPECT_EQ(shown["attempts"], 1) << shown.dump();
  const auto att = shown["attempt_log"][0];
  Replayed out;
  if (!att["first_activity"].is_null()) out.first_activity = att["first_activity"].get<double>() - launch;
  out.anchor = att.value("anchor", "");
  return out;
}

void check_every_job(bool process_util, bool gpm, const std::string& expected_anchor) {
  const auto all = load();
  ASSERT_EQ(all.size(), 11u) << "5 jobs of each run, one of them twice";
  const MiB idle = idle_mib(all);
  int with_heavy = 0;
  for (const auto& tl : all) {
    const auto heavy = heavy_phase(tl);
    const Replayed got = replay(tl, idle, process_util, gpm);
    if (!heavy) {
      EXPECT_FALSE(got.first_activity) << tl.name << ": never trained, yet anchored at " << *got.first_activity
                                       << " s (" << got.anchor << ")";
      continue;
    }
    ++with_heavy;
    ASSERT_TRUE(got.first_activity) << tl.name << ": no anchor; heavy phase from " << *heavy << " s";
    EXPECT_LE(std::abs(*got.first_activity - *heavy), 2.0)
        << tl.name << ": anchor (" << got.anchor << ") at " << *got.first_activity << " s, heavy phase from " << *heavy
        << " s";
    EXPECT_EQ(got.anchor, expected_anchor) << tl.name;
  }
  EXPECT_EQ(with_heavy, 8) << "every completed job trained";
}

TEST(AnchorReplay, H200TimelinesWithPerProcessSamplesAnchorAtTheHeavyPhase) {
  check_every_job(true, true, "process-util");
}

TEST(AnchorReplay, H200TimelinesWithoutPerProcessSamplesAnchorOnTheSmActivityRise) {
  check_every_job(false, true, "gpu-activity");
}

TEST(AnchorReplay, H200TimelinesWithOnlyCoarseUtilisationAnchorOnItsRise) {
  check_every_job(false, false, "gpu-activity");
}

}  // namespace
}  // namespace aegis
