// The MIG tables (core/mig_models.h): which layouts NVIDIA allows on each model, the H200
// table against a real driver's listing, and the simulator's cluster cut into instances of
// real memory and SMs.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/mig_models.h"
#include "sim/csv.h"  // InputError
#include "sim/simulator.h"

namespace aegis {
namespace {

std::string check(const char* model, std::vector<std::string> names) {
  const mig::Model* m = mig::model_named(model);
  return m ? mig::check_layout(*m, names) : std::string("no model ") + model;
}

TEST(MigModels, EveryModelIsFoundByItsMemoryAndIsConsistent) {
  ASSERT_EQ(mig::models().size(), 4u);
  for (const auto& m : mig::models()) {
    SCOPED_TRACE(std::string(m.name));
    EXPECT_EQ(mig::model_for_memory(m.total_mib), &m);
    for (const auto& p : m.profiles) {
      SCOPED_TRACE(std::string(p.name));
      // The name is <slices>g.<nominal GB>gb; the real memory is below the whole GPU's.
      EXPECT_EQ(p.name.substr(0, p.name.find('g')), std::to_string(p.slices));
      EXPECT_LT(p.memory_mib, m.total_mib);
      EXPECT_LE(p.sms, m.sms);
      EXPECT_GT(p.sms, 0);
      EXPECT_GE(p.instances, 1);
      EXPECT_LE(p.instances, static_cast<int>(p.starts.size()));
      if (p.name.ends_with("+me")) {  // its 1-slice profile with the media engines
        const mig::Profile* base = mig::find_profile(m, p.name.substr(0, p.name.size() - 3));
        ASSERT_NE(base, nullptr);
        EXPECT_EQ(p.memory_mib, base->memory_mib);
        EXPECT_EQ(p.sms, base->sms);
        EXPECT_EQ(p.instances, 1);
      }
      // A profile alone always fits.
      EXPECT_EQ(mig::check_layout(m, std::vector<std::string>{std::string(p.name)}), "");
    }
  }
  EXPECT_EQ(mig::model_for_memory(12345), nullptr);
}

TEST(MigModels, LayoutsNvidiaAllowsAreAccepted) {
  // From `nvidia-smi mig -lgipp` placements: every one of these can be created.
  const std::vector<std::vector<std::string>> ok = {
      {"7g.40gb"},
      {"4g.20gb", "2g.10gb", "1g.5gb"},
      {"4g.20gb", "1g.5gb", "1g.5gb", "1g.5gb"},
      {"3g.20gb", "3g.20gb"},
      {"3g.20gb", "2g.10gb", "2g.10gb"},  // the 3g on slots 4-7, the 2g's on 0-1 and 2-3
      {"2g.10gb", "2g.10gb", "2g.10gb", "1g.5gb"},
      {"2g.10gb", "2g.10gb", "2g.10gb", "1g.10gb"},  // the 1g.10gb on slots 6-7
      {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"},
      {"1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"},
  };
  for (const auto& l : ok) EXPECT_EQ(check("A100-40GB", l), "") << l.front() << " + " << l.size() - 1;
  EXPECT_EQ(check("H100-80GB", {"3g.40gb", "2g.20gb", "1g.20gb"}), "");
  EXPECT_EQ(check("H200-141GB", {"4g.71gb", "3g.71gb"}), "");
}

TEST(MigModels, LayoutsNvidiaRefusesAreRejectedWithOneLine) {
  EXPECT_EQ(check("A100-40GB", {"4g.20gb", "4g.20gb"}), "its instances use 8 compute slices; an A100-40GB has 7");
  // 7 compute slices, but 4 + 4 + 1 memory slots: no placement (compute alone would pass).
  EXPECT_EQ(check("A100-40GB", {"3g.20gb", "3g.20gb", "1g.5gb"}),
            "no placement of its instances fits the 8 memory slices of an A100-40GB (nvidia-smi mig -lgipp)");
  // Five 2-slot instances: 5 compute slices, 10 memory slots.
  EXPECT_NE(check("A100-40GB", {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}), "");
  EXPECT_NE(check("A100-40GB", {"1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"}), "");
  EXPECT_EQ(check("A100-40GB", {"3g.40gb"}).rfind("'3g.40gb' is not a MIG profile of the A100-40GB (1g.5gb, ", 0), 0u);
  EXPECT_NE(check("H100-80GB", {"7g.80gb", "1g.10gb"}), "");
}

// One row of `nvidia-smi mig -lgip` joined with its `-lgipp` placements.
struct DriverRow {
  int id = -1, instances = 0, sms = 0, slots = 0;
  double gib = 0;
  std::vector<int> starts;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The listing in tests/data/mig/<dir>/ (README.md there says where it comes from), by name.
std::map<std::string, DriverRow> driver_listing(const std::string& dir) {
  const std::string base = std::string(AEGIS_SOURCE_DIR) + "/tests/data/mig/" + dir + "/";
  std::map<std::string, DriverRow> rows;
  std::map<int, std::string> by_id;
  // "|   0  MIG 3g.71gb          9     2/2        69.75      No     60     3     0   |"
  const std::regex lgip(R"(\|\s+0\s+MIG\s+(\S+)\s+(\d+)\s+\d+/(\d+)\s+([\d.]+)\s+\S+\s+(\d+)\s)");
  std::istringstream a(read_text(base + "mig-lgip.txt"));
  for (std::string line; std::getline(a, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, lgip)) continue;
    DriverRow& r = rows[m[1].str()];
    r.id = std::stoi(m[2]);
    r.instances = std::stoi(m[3]);
    r.gib = std::stod(m[4]);
    r.sms = std::stoi(m[5]);
    by_id[r.id] = m[1].str();
  }
  // "GPU  0 Profile ID 15 Placements: {0,2,4,6}:2"
  const std::regex lgipp(R"(Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,]+)\}:(\d+))");
  std::istringstream b(read_text(base + "mig-lgipp.txt"));
  for (std::string line; std::getline(b, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, lgipp) || !by_id.contains(std::stoi(m[1]))) continue;
    DriverRow& r = rows[by_id[std::stoi(m[1])]];
    r.slots = std::stoi(m[3]);
    std::istringstream starts(m[2].str());
    for (std::string s; std::getline(starts, s, ',');) r.starts.push_back(std::stoi(s));
  }
  return rows;
}

// aegis's table of `model` against the driver's listing in tests/data/mig/<dir>/: every
// profile, its memory, SMs, most instances and placements. The driver prints memory in GiB
// to two decimals (19.625 GiB as 19.62), so memory agrees to half a hundredth of a GiB.
void expect_table_is_the_drivers_listing(const std::string& model, const std::string& dir) {
  const auto driver = driver_listing(dir);
  ASSERT_EQ(driver.size(), 7u) << "the recorded listing did not parse";
  const mig::Model* m = mig::model_named(model);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->profiles.size(), driver.size());  // no profile the driver does not list
  for (const auto& [name, row] : driver) {
    SCOPED_TRACE(name);
    const mig::Profile* p = mig::find_profile(*m, name);
    if (!p) {
      ADD_FAILURE() << "the driver lists " << name << "; aegis's " << model << " table lacks it";
      continue;
    }
    EXPECT_NEAR(static_cast<double>(p->memory_mib), row.gib * 1024, 0.005 * 1024 + 1e-9) << "driver: " << row.gib << " GiB";
    EXPECT_EQ(p->sms, row.sms);
    EXPECT_EQ(p->instances, row.instances);
    EXPECT_EQ(p->slots, row.slots);
    EXPECT_EQ(std::vector<int>(p->starts.begin(), p->starts.end()), row.starts);
  }
}

TEST(MigModels, H200TableIsTheDriversListing) {
  expect_table_is_the_drivers_listing("H200-141GB", "h200-580.159.04");
}

// The H100's table came from a public capture; the validation run of 2026-12-06 on an H100
// recorded the driver's own listing, which it matches row for row.
TEST(MigModels, H100TableIsTheDriversListing) {
  expect_table_is_the_drivers_listing("H100-80GB", "h100-580.159.04");
}

TEST(MigModels, OneMediaExtensionsInstancePerGpu) {
  // The +me profile is its 1-slice profile with the GPU's media engines: one per GPU, next
  // to plain 1-slice instances.
  EXPECT_EQ(check("H200-141GB", {"1g.18gb+me", "1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb"}), "");
  EXPECT_EQ(check("H200-141GB", {"1g.18gb+me", "1g.18gb+me"}),
            "'1g.18gb+me' may have at most 1 instance on an H200-141GB (nvidia-smi mig -lgip)");
  EXPECT_EQ(check("A100-40GB", {"1g.5gb+me", "3g.20gb", "2g.10gb"}), "");
  EXPECT_EQ(check("A100-80GB", {"1g.10gb+me", "1g.10gb+me"}).rfind("'1g.10gb+me' may have at most 1", 0), 0u);
  EXPECT_EQ(check("H100-80GB", {"1g.10gb+me", "4g.40gb"}), "");
  const auto c = ClusterSpec::uniform(1, 1, 143771).with_mig("3g.71gb,1g.18gb+me");
  const auto& d = c.servers.front().devices;
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].memory_mib, 71424);  // 69.75 GiB, as driver 580.159.04 lists it
  EXPECT_EQ(d[1].memory_mib, 16384);
  EXPECT_DOUBLE_EQ(d[1].sm_fraction, 16.0 / 132);
}

TEST(MigModels, SimulatorInstancesHaveTheTablesMemoryAndSms) {
  const auto c = ClusterSpec::uniform(1, 2, 40960).with_mig("3g.20gb,2g.10gb,1g.5gb,1g.5gb;7g.40gb");
  const auto& d = c.servers.front().devices;
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0].memory_mib, 20096);
  EXPECT_DOUBLE_EQ(d[0].sm_fraction, 42.0 / 108);
  EXPECT_EQ(d[2].memory_mib, 4864);
  EXPECT_EQ(d[4].memory_mib, 40320);
  EXPECT_DOUBLE_EQ(d[4].sm_fraction, 98.0 / 108);  // in MIG mode even 7g has fewer SMs
  const auto h = ClusterSpec::uniform(1, 1, 81559).with_mig("3g.40gb,3g.40gb");
  EXPECT_DOUBLE_EQ(h.servers.front().devices[0].sm_fraction, 60.0 / 132);
  EXPECT_THROW(ClusterSpec::uniform(1, 1, 40960).with_mig("3g.20gb,3g.20gb,1g.5gb"), InputError);
  EXPECT_THROW(ClusterSpec::uniform(1, 1, 40000).with_mig("1g.5gb"), InputError);
}

}  // namespace
}  // namespace aegis
