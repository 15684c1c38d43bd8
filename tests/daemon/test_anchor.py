"""The observation window starts at a job's first GPU activity, not at its CUDA context
(issue 15, item 2). An emulated job shows its context (300 MiB), loads its model for 3 s
(memory grows, no kernel runs), then trains; aegisd must anchor at the kernels, told:
  process-util    from the job's own per-process utilisation samples (NVML has them);
  gpu-activity    without them, from the GPU's activity rising while the job is the only
                  new one there;
  memory-plateau  without either (here the GPU is saturated by a foreign process, so no
                  rise can show), from its memory settling after it grew past the context.
The old anchor (the first process seen) is 3 s early and fails every scenario. The foreign
process is also shown by `aegis gpus` and its memory is never handed out. Under MPS (issue
30) the driver reports the job's work against its MPS server's pid (here the emulated control
daemon's), and the only client's job is anchored from the server's samples.
Usage: test_anchor.py BUILD_DIR
"""
import os
import re
import subprocess
import sys

from harness import Daemon, fail, wait_for

LOAD_S = 3.0
HZ = 4.0  # telemetry samples per second
# A sample of aegisd's lags the kernel by up to one period; the old anchor is LOAD_S early.
SLOP_S = 0.5


def run_job(d, name):
    job = d.submit("--name", name, "--", d.fakejob, "--mem", "6000", "--context", "300", "--load", str(LOAD_S),
                   "--loaded", "4000", "--smact", "0.5", "--seconds", "6", "--startup", "0.1")
    states = d.wait_all_final([job], timeout=120)
    if states[job] != "completed":
        fail(f"{name}: job {job} {states[job]}: {d.show(job)}")
    out = d.run_cli("logs", str(job)).stdout
    m = re.search(r"first kernel at ([0-9.]+)", out)
    if not m:
        fail(f"{name}: the job printed no first kernel time: {out!r}")
    return d.show(job)["attempt_log"][0], float(m.group(1))


def check(name, attempt, kernel, anchor):
    first, context = attempt["first_activity"], attempt["context_at"]
    if context is None or first is None:
        fail(f"{name}: context {context}, first activity {first}")
    if first < kernel - SLOP_S:
        fail(f"{name}: the window started at {first:.3f}, {kernel - first:.2f} s before the job's first kernel "
             f"({kernel:.3f}); its context appeared at {context:.3f}")
    if attempt["anchor"] != anchor:
        fail(f"{name}: anchored by {attempt['anchor']!r}, expected {anchor!r}: {attempt}")
    if context > kernel:
        fail(f"{name}: the context ({context:.3f}) is recorded after the first kernel ({kernel:.3f})")
    print(f"OK {name}: context at +0, first kernel at +{kernel - context:.2f} s, window from "
          f"+{first - context:.2f} s ({anchor})")


def scenario(build, name, settings, anchor, foreign=False):
    base = {"observation_window_s": 1.0, "telemetry_sample_hz": HZ, "anchor_plateau_s": 2.0}
    d = Daemon(build, gpus="1x20480", shared_gpus=True, settings={**base, **settings})
    squatter = None
    try:
        d.start()
        if foreign:
            # Not an aegis job: 12000 MiB and the whole GPU busy.
            env = dict(os.environ, AEGIS_EMULATED_STATE=os.path.join(d.dir, "emulated-gpus.state"),
                       CUDA_VISIBLE_DEVICES="0")
            squatter = subprocess.Popen([d.fakejob, "--mem", "12000", "--smact", "1", "--util", "1", "--seconds", "600",
                                         "--startup", "0"], env=env, stdout=subprocess.DEVNULL,
                                        start_new_session=True)

            def shown():
                g = d.call("gpus", "--json")[0]
                return g if any(p["pid"] == squatter.pid for p in g["foreign"]) else None
            g = wait_for("aegis gpus to show the foreign process", shown, timeout=30)
            f = [p for p in g["foreign"] if p["pid"] == squatter.pid][0]
            if f["used_mib"] != 12000:
                fail(f"foreign process shown with {f['used_mib']} MiB, expected 12000")
            text = d.run_cli("gpus").stdout
            if f"foreign process {squatter.pid} (12000 MiB)" not in text:
                fail(f"aegis gpus does not show the foreign process: {text}")
            # Its memory is never handed out, even where the memory filter counts booked
            # memory only: 20480 - 512 (guard) - 12000 leaves no room for 10000 + 2048.
            big = d.submit("--name", "big", "--mem", "10000", "--", "/bin/true")
            def waiting():
                if d.show(big)["state"] != "queued":
                    fail(f"the job needing the foreign process's memory was placed: {d.show(big)['attempt_log']}")
                m = re.search(r"head of the queue waits: (.*)", d.run_cli("queue").stdout)
                return m and m.group(1)
            why = wait_for("the big job to wait", waiting, timeout=30)
            d.run_cli("cancel", str(big))
            print(f"OK foreign: shown by aegis gpus with its 12000 MiB; a job needing 12048 MiB waits ({why})")
        attempt, kernel = run_job(d, name)
        check(name, attempt, kernel, anchor)
    finally:
        if squatter:
            squatter.kill()
            squatter.wait()
        d.cleanup()


def main(build):
    scenario(build, "process-samples", {}, "process-util")
    scenario(build, "gpu-rise", {"emulated_process_util": False}, "gpu-activity")
    scenario(build, "plateau", {"emulated_process_util": False, "memory_accounting": "booked"}, "memory-plateau",
             foreign=True)
    control = os.path.join(os.path.abspath(build), "apps/aegis-fakejob/mps-bin/nvidia-cuda-mps-control")
    scenario(build, "mps-client", {"sharing": "mps", "mps_control": "managed", "mps_control_binary": control},
             "process-util")


if __name__ == "__main__":
    main(sys.argv[1])
