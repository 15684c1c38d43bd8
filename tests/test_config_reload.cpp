// aegisd's config on SIGHUP (config_reload.h) and the installed config file
// (config_template.cpp): what a reload applies, what it leaves for a restart, and a file
// whose commented defaults are exactly aegisd's.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>

#include "runtime/daemon/config.h"
#include "runtime/daemon/config_reload.h"

namespace aegis {
namespace {

TEST(ConfigReload, LiveSettingsApplyAndTheOthersWaitForARestart) {
  const DaemonConfig running = load_daemon_config("", {});
  const DaemonConfig wanted = load_daemon_config(
      "", {"admin_group=gpuadmins", "state_dir=/srv/aegis", "max_jobs_per_user=5", "smact_threshold=0.5"});
  const ReloadOutcome r = reload_config(running, wanted);
  EXPECT_EQ(r.config.daemon.admin_group, "gpuadmins");
  EXPECT_EQ(r.config.daemon.max_jobs_per_user, 5);
  EXPECT_EQ(r.config.daemon.state_dir, "/var/lib/aegis");
  EXPECT_EQ(r.config.engine.smact_threshold, running.engine.smact_threshold);
  EXPECT_EQ(r.applied, (std::vector<std::string>{"admin_group", "max_jobs_per_user"}));
  EXPECT_EQ(r.need_restart, (std::vector<std::string>{"state_dir", "smact_threshold"}));
  EXPECT_EQ(reload_summary(r),
            "aegisd: reload: applied admin_group, max_jobs_per_user; changed but kept until a restart "
            "(systemctl restart aegisd): state_dir, smact_threshold");
}

TEST(ConfigReload, NothingChangedSaysSo) {
  const DaemonConfig c = load_daemon_config("", {"socket=/run/x.sock"});
  const ReloadOutcome r = reload_config(c, c);
  EXPECT_TRUE(r.applied.empty());
  EXPECT_TRUE(r.need_restart.empty());
  EXPECT_EQ(reload_summary(r), "aegisd: reload: no setting changed");
  EXPECT_EQ(reload_summary(reload_config(c, load_daemon_config("", {"socket=/run/y.sock"}))),
            "aegisd: reload: changed but kept until a restart (systemctl restart aegisd): socket");
}

TEST(ConfigReload, CopiesOnlyTheLiveSettingsIntoTheRunningOnes) {
  DaemonSettings running;
  running.mps_pipe_dir = "/var/lib/aegis/mps/pipe";  // resolved at start (setup_mps)
  DaemonSettings wanted;
  wanted.admin_group = "gpuadmins";
  wanted.state_dir = "/srv/aegis";
  wanted.log_max_bytes = 4096;
  copy_live_settings(wanted, running);
  EXPECT_EQ(running.admin_group, "gpuadmins");
  EXPECT_EQ(running.log_max_bytes, 4096);
  EXPECT_EQ(running.state_dir, "/var/lib/aegis");
  EXPECT_EQ(running.mps_pipe_dir, "/var/lib/aegis/mps/pipe");
}

TEST(ConfigTemplate, ListsEverySettingCommentedOutWithItsDefault) {
  const std::string text = config_file_template();
  const DaemonConfig defaults = load_daemon_config("", {});
  std::size_t settings = 0;
  for (const auto& p : describe_params<DaemonSettings>(daemon_param_table(), defaults.daemon)) {
    EXPECT_NE(text.find("\n#" + std::string(p.name) + " = "), std::string::npos) << p.name;
    ++settings;
  }
  EXPECT_NE(text.find("[reload]\n#admin_group = \"\""), std::string::npos);
  EXPECT_EQ(text.find("[reload]\n#state_dir"), std::string::npos);
  EXPECT_GT(settings, 30u);

  // As installed it sets nothing; uncommented, it sets every value to what it already is.
  const std::string path = ::testing::TempDir() + "aegisd-template.toml";
  std::ofstream(path) << text;
  EXPECT_EQ(to_toml(load_daemon_config(path, {})), to_toml(defaults));
  std::ofstream(path) << std::regex_replace(text, std::regex("^#([a-z_]+ = )", std::regex::multiline), "$1");
  EXPECT_EQ(to_toml(load_daemon_config(path, {})), to_toml(defaults));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace aegis
