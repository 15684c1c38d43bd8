// An LD_PRELOAD library for tests/security/test_root_env.py: every process that loads it
// (and has AEGIS_PROBE_DIR set, as the attacking job's environment does) leaves a file
// saying who it ran as. The safe outcome is that no such file ever says uid 0.
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

__attribute__((constructor)) static void aegis_probe() {
  const char* dir = std::getenv("AEGIS_PROBE_DIR");
  if (!dir) return;
  char exe[512] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = '\0';
  char path[1024];
  std::snprintf(path, sizeof path, "%s/%d", dir, static_cast<int>(getpid()));
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%u %u %s\n", static_cast<unsigned>(getuid()), static_cast<unsigned>(geteuid()), exe);
    std::fclose(f);
  }
}
