// The MIG tables (core/mig_models.h): which layouts NVIDIA allows on each model, and the
// simulator's cluster cut into instances of real memory and SMs.
#include <gtest/gtest.h>

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
