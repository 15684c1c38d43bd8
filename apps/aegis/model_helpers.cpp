#include "apps/aegis/model_helpers.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "apps/aegis/client.h"

extern char** environ;

namespace aegis::cli {
namespace {

// Debian's PyTorch is python3-torch, for /usr/bin/python3 (a pyenv or venv python on
// PATH usually lacks it); AEGIS_PYTHON chooses another.
std::string python() {
  const char* p = std::getenv("AEGIS_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

// The helpers: AEGIS_SCRIPTS_DIR, else scripts/ of the source tree this aegis was built in
// (build/apps/aegis/aegis -> scripts/), else ../share/aegis/scripts beside the binary.
std::filesystem::path scripts_dir() {
  if (const char* d = std::getenv("AEGIS_SCRIPTS_DIR"); d && *d) return d;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& c : {exe.parent_path() / "../../../scripts", exe.parent_path() / "../share/aegis/scripts"})
      if (std::filesystem::exists(c / "model_spec.py")) return std::filesystem::weakly_canonical(c);
  }
  throw ClientError("--model: cannot find scripts/model_spec.py; set AEGIS_SCRIPTS_DIR to the directory holding it");
}

// Runs argv without a shell; returns its standard output. Its standard error goes to ours,
// where the helpers print their one-line errors.
std::string run(const std::vector<std::string>& argv, const std::string& name) {
  int out[2];
  if (pipe(out) != 0) throw ClientError("--model: cannot create a pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    throw ClientError("--model: cannot run " + argv[0] + " (" + std::string(strerror(rc)) + ")");
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw ClientError("--model: " + name + " failed (exit status " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "; its error is above)");
  return text;
}

nlohmann::json parse(const std::string& text, const std::string& name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw ClientError("--model: " + name + " printed no JSON");
  }
}

}  // namespace

HelperResults run_model_helpers(const ModelHelperArgs& a) {
  const auto dir = scripts_dir();
  const std::vector<std::string> common = {"--model", a.model, "--batch-size", std::to_string(a.batch_size),
                                           "--input-shape", a.input_shape, "--input-dtype", a.input_dtype};
  std::vector<std::string> spec_cmd = {python(), (dir / "model_spec.py").string()};
  spec_cmd.insert(spec_cmd.end(), common.begin(), common.end());
  auto features = features_from_json(parse(run(spec_cmd, "model_spec.py"), "model_spec.py"));
  if (auto* e = std::get_if<std::string>(&features)) throw ClientError("--model: model_spec.py: " + *e);
  // --forward-only: the same figures without the backward pass (docs/estimators.md).
  std::vector<std::string> fake_cmd = {python(), (dir / "faketensor_estimate.py").string(), "--forward-only"};
  fake_cmd.insert(fake_cmd.end(), common.begin(), common.end());
  const auto fake = parse(run(fake_cmd, "faketensor_estimate.py"), "faketensor_estimate.py");
  if (!fake.contains("peak_mib") || !fake["peak_mib"].is_number() || !(fake["peak_mib"].get<double>() > 0))
    throw ClientError("--model: faketensor_estimate.py: no positive peak_mib");
  return {std::get<ModelFeatures>(features), fake["peak_mib"].get<double>()};
}

}  // namespace aegis::cli
