"""The telemetry source aegisd chooses per GPU, end to end on an emulated GPU, and the
pressure rule it then runs (docs/daemon.md, "Which telemetry and which rules run"):
- Ampere-like (no GPM) with libdcgm: DCGM's profiling fields feed the published rule, so
  a GPU busy by SM activity (0.9, occupancy 0.5) but at 50 % utilisation turns a newcomer
  away. Under the old coarse fallback (utilisation < 70 %) it would have been admitted,
  which the second daemon, without libdcgm, shows.
- Hopper-like (GPM): GPM, and DCGM not needed.
`aegis gpus` (text and JSON) and the Prometheus metrics say which source each GPU uses.
Usage: test_telemetry.py BUILD_DIR
"""
import os
import re
import sys
import urllib.request

from harness import Daemon, fail, wait_for

FAST = {"observation_window_s": 1.0, "telemetry_sample_hz": 10.0, "telemetry_window_samples": 10}


def gpu(d):
    return d.call("gpus", "--json")[0]


def busy_then_newcomer(d):
    """Starts a job busy by SM activity but not by utilisation, waits until the GPU shows
    it, then submits a light newcomer. Returns (busy, newcomer) job ids."""
    busy = d.submit("--name", "busy", "--", d.fakejob, "--mem", "4000", "--smact", "0.9", "--smocc", "0.5",
                    "--drama", "0.4", "--util", "0.5", "--seconds", "300")
    wait_for("the busy job running", lambda: d.show(busy)["state"] == "running")
    wait_for("the GPU showing the busy job's utilisation", lambda: (gpu(d)["utilization"] or 0) > 0.45)
    newcomer = d.submit("--name", "newcomer", "--", d.fakejob, "--mem", "2000", "--smact", "0.1", "--seconds", "300")
    return busy, newcomer


def main(build):
    port = 19800 + os.getpid() % 90
    # Ampere-like GPU, emulated libdcgm found next to aegisd: DCGM.
    d = Daemon(build, gpus="1x40960", settings={**FAST, "emulated_gpm": False, "metrics_port": port})
    try:
        d.start()
        text = d.run_cli("gpus").stdout
        if "GPM: no, DCGM: " not in text or "embedded host engine, 1 GPU" not in text:
            fail("aegis gpus does not say DCGM is read: " + text)
        g = wait_for("DCGM as the GPU's telemetry source", lambda: (lambda g: g["telemetry_source"] == "dcgm" and g)(gpu(d)))
        if g["telemetry"] != "full":
            fail(f"DCGM's fields give full telemetry, got {g}")
        if not re.search(r"^\s*0\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+dcgm\s", d.run_cli("gpus").stdout, re.M):
            fail("aegis gpus table lacks the TELEMETRY column: " + d.run_cli("gpus").stdout)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        if not re.search(r'^aegis_gpu_telemetry_source\{gpu="GPU-[^"]+",source="dcgm"\} 1$', body, re.M):
            fail("metrics lack the telemetry source: " + body[:1500])

        busy, newcomer = busy_then_newcomer(d)
        g = wait_for("DCGM's SM activity of the busy job", lambda: (lambda g: (g["smact"] or 0) > 0.85 and g)(gpu(d)))
        if g["telemetry_source"] != "dcgm" or abs(g["smocc"] - 0.5) > 0.01 or abs(g["drama"] - 0.4) > 0.01:
            fail(f"DCGM's fields: {g}")
        # The published rule turns the newcomer away by SMACT (and SMOCC); the coarse rule would not.
        wait_for("the newcomer waiting on the pressure rule",
                 lambda: "gpu0: pressure" in d.run_cli("queue").stdout)
        if d.show(newcomer)["state"] != "queued":
            fail("the newcomer was placed on a GPU busy by SM activity: " + str(d.show(newcomer)["state"]))
        d.run_cli("cancel", str(busy), str(newcomer))
        wait_for("both cancelled", lambda: all(d.show(j)["state"] == "cancelled" for j in (busy, newcomer)))
    finally:
        d.cleanup()

    # The same GPU without libdcgm: coarse, and the coarse rule admits the newcomer.
    d = Daemon(build, gpus="1x40960",
               settings={**FAST, "emulated_gpm": False, "dcgm_library": "/nonexistent/libdcgm.so.4"})
    try:
        d.start()
        if "DCGM: not used: cannot load DCGM from '/nonexistent/libdcgm.so.4'" not in d.run_cli("gpus").stdout:
            fail("aegis gpus does not say why DCGM is not used: " + d.run_cli("gpus").stdout)
        busy, newcomer = busy_then_newcomer(d)
        wait_for("the newcomer collocated under the coarse rule", lambda: d.show(newcomer)["state"] == "running")
        g = gpu(d)
        if g["telemetry_source"] != "coarse" or g["smact"] is not None:
            fail(f"without DCGM the GPU reads coarse: {g}")
        d.run_cli("cancel", str(busy), str(newcomer))
        wait_for("both cancelled", lambda: all(d.show(j)["state"] == "cancelled" for j in (busy, newcomer)))
    finally:
        d.cleanup()

    # Hopper-like: GPM; DCGM is not needed.
    d = Daemon(build, gpus="1x40960", settings=FAST)
    try:
        d.start()
        if "GPM: yes, DCGM: not needed" not in d.run_cli("gpus").stdout:
            fail("aegis gpus on a GPM GPU: " + d.run_cli("gpus").stdout)
        wait_for("GPM as the GPU's telemetry source", lambda: gpu(d)["telemetry_source"] == "gpm")
    finally:
        d.cleanup()
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
