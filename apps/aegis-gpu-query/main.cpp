// aegis-gpu-query: one CSV line per GPU, through the same loaders (NVML, DCGM) as the daemon.
// What the published prototype paid per sample (a subprocess asking the driver) is what
// bench_gpu_sample measures with it; it is also handy to look at emulated GPUs.
//   aegis-gpu-query [--library PATH] [--gpm-interval MS] [--header] [--source auto|gpm|dcgm] [--dcgm-library PATH]
//   aegis-gpu-query --mig-table   (aegis's MIG profile tables, to compare with nvidia-smi mig -lgip)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/mig_models.h"
#include "runtime/gpu/gpu_source.h"
#include "runtime/gpu/telemetry_select.h"

namespace {

constexpr const char* kUsage =
    "usage: aegis-gpu-query [--library PATH] [--gpm-interval MS] [--header] [--source auto|gpm|dcgm]\n"
    "                       [--dcgm-library PATH] [--dcgm-hostengine ADDR] [--describe]\n"
    "  --library PATH      NVML library to load (default libnvidia-ml.so.1)\n"
    "  --gpm-interval MS   take a second sample MS later, so GPM metrics (smact) appear\n"
    "  --header            print the column names first\n"
    "  --source S          where SM activity comes from: auto (aegisd's choice: GPM, else DCGM), gpm (no DCGM),\n"
    "                      dcgm (DCGM on every GPU, replacing GPM: to compare the two); default gpm\n"
    "  --dcgm-library PATH DCGM library (default libdcgm.so.4, .so.3, .so); --dcgm-hostengine ADDR as aegisd's\n"
    "  --describe          print the sources' one-line description instead of the rows\n"
    "  --mig-table         print aegis's MIG profile tables (core/mig_models.h) instead, as CSV\n"
    "columns: index,uuid,memory.total MiB,memory.used MiB,memory.free MiB,utilization [0,1],smact [0,1],"
    "processes (pid:MiB ...),smocc [0,1],drama [0,1],telemetry source (gpm|dcgm|coarse|memory-only)\n";

void print_optional(const std::optional<double>& v) {
  if (v) std::printf("%.2f", *v);
}

// One row per model and profile; memory also in GiB as nvidia-smi mig -lgip prints it.
int print_mig_table() {
  std::printf("model,gpu_total_mib,gpu_sms,profile,slices,memory_slots,memory_mib,memory_gib,sms,starts,instances\n");
  for (const auto& m : aegis::mig::models()) {
    for (const auto& p : m.profiles) {
      std::string starts;
      for (int s : p.starts) starts += (starts.empty() ? "" : " ") + std::to_string(s);
      std::printf("%.*s,%lld,%d,%.*s,%d,%d,%lld,%.2f,%d,%s,%d\n", static_cast<int>(m.name.size()), m.name.data(),
                  static_cast<long long>(m.total_mib), m.sms, static_cast<int>(p.name.size()), p.name.data(), p.slices,
                  p.slots, static_cast<long long>(p.memory_mib), static_cast<double>(p.memory_mib) / 1024, p.sms,
                  starts.c_str(), p.instances);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string library = "libnvidia-ml.so.1";
  long gpm_ms = 0;
  bool header = false, describe = false;
  std::string source_choice = "gpm";
  aegis::DcgmOptions dcgm;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--library" && i + 1 < argc) {
      library = argv[++i];
    } else if (a == "--gpm-interval" && i + 1 < argc) {
      char* end = nullptr;
      gpm_ms = std::strtol(argv[++i], &end, 10);
      if (*end || gpm_ms < 0 || gpm_ms > 60000) {
        std::fprintf(stderr, "aegis-gpu-query: --gpm-interval: '%s' is not a number of milliseconds (0 to 60000)\n", argv[i]);
        return 2;
      }
    } else if (a == "--header") {
      header = true;
    } else if (a == "--describe") {
      describe = true;
    } else if (a == "--source" && i + 1 < argc) {
      source_choice = argv[++i];
      if (source_choice != "auto" && source_choice != "gpm" && source_choice != "dcgm") {
        std::fprintf(stderr, "aegis-gpu-query: --source: '%s' is not auto, gpm or dcgm\n", argv[i]);
        return 2;
      }
    } else if (a == "--dcgm-library" && i + 1 < argc) {
      dcgm.library = argv[++i];
    } else if (a == "--dcgm-hostengine" && i + 1 < argc) {
      dcgm.hostengine = argv[++i];
    } else if (a == "--mig-table") {
      return print_mig_table();
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "aegis-gpu-query: unknown argument '%s' (try --help)\n", a.c_str());
      return 2;
    }
  }
  std::string error;
  if (source_choice == "gpm") dcgm.mode = "off";
  if (gpm_ms > 0) dcgm.update_s = static_cast<double>(gpm_ms) / 1000;
  auto source = aegis::open_gpus(library, dcgm, &error, source_choice == "dcgm");
  if (!source) {
    std::fprintf(stderr, "aegis-gpu-query: %s\n", error.c_str());
    return 1;
  }
  try {
    // What it prints needs neither per-process utilisation nor energy (milliseconds each
    // per GPU on a real driver: gpu_source.h SampleRequest).
    auto gpus = source->sample(aegis::SampleRequest::cheap());
    if (gpm_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(gpm_ms));
      gpus = source->sample(aegis::SampleRequest::cheap());
    }
    if (describe) {
      std::printf("%s\n", source->describe().c_str());
      return 0;
    }
    if (header) std::puts("index,uuid,memory.total,memory.used,memory.free,utilization,smact,processes,smocc,drama,source");
    for (const auto& g : gpus) {
      std::printf("%d,%s,%lld,%lld,%lld,", g.index, g.uuid.c_str(), static_cast<long long>(g.total_mib),
                  static_cast<long long>(g.used_mib), static_cast<long long>(g.free_mib));
      print_optional(g.util);
      std::putchar(',');
      print_optional(g.smact);
      std::putchar(',');
      for (std::size_t i = 0; i < g.processes.size(); ++i) {
        const auto& p = g.processes[i];
        std::printf(i ? " %u:" : "%u:", p.pid);
        if (p.used_mib) std::printf("%lld", static_cast<long long>(*p.used_mib));
        else std::putchar('?');
      }
      std::putchar(',');
      print_optional(g.smocc);
      std::putchar(',');
      print_optional(g.drama);
      std::printf(",%s\n", g.telemetry_source());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aegis-gpu-query: %s\n", e.what());
    return 1;
  }
  return 0;
}
