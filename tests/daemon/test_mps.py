"""MPS on emulated GPUs: aegisd starts the (emulated) MPS control daemon, gives collocated
jobs their memory limit, and a job that outgrows its declared memory dies alone at its
limit while its neighbours finish; it then recovers through the ladder.
Usage: test_mps.py BUILD_DIR
"""
import glob
import os
import sys

from harness import Daemon, fail, wait_for


def holds(d, job_id, mib):
    """The job runs and its GPU's processes include it with at least `mib`."""
    j = d.show(job_id)
    if j["state"] != "running" or not j["attempt_log"]:
        return False
    return j["attempt_log"][-1]["peak_mib"] >= mib


def main(build):
    build = os.path.abspath(build)
    control = os.path.join(build, "apps/aegis-fakejob/mps-bin/nvidia-cuda-mps-control")
    if not os.path.exists(control):
        fail("emulated MPS control not built: " + control)
    d = Daemon(build, gpus="1x40960", settings={"sharing": "mps", "mps_control": "managed",
                                                 "mps_control_binary": control, "observation_window_s": 1.0,
                                                 "telemetry_sample_hz": 4.0, "telemetry_window_samples": 4})
    try:
        d.start()
        pipe = os.path.join(d.dir, "mps")  # beside the socket: every user reaches it
        # One control daemon per GPU, in a directory named by the GPU's UUID.
        if len(glob.glob(os.path.join(pipe, "GPU-*", "control"))) != 1:
            fail("aegisd did not start the MPS control daemon of its GPU in " + pipe)
        job = lambda name, declared, uses, secs: d.submit(
            "--name", name, "--mem", declared, "--", d.fakejob, "--mem", str(uses), "--smact", "0.2",
            "--seconds", str(secs), "--startup", "0.3", "--ramp", "1")
        # The neighbours run first, so that the culprit is placed next to them (collocated,
        # hence under an MPS memory limit). Each waits for the one before to hold its memory.
        a = job("neighbour-a", "9000", 8000, 12)
        wait_for("neighbour-a to hold its memory", lambda: holds(d, a, 8000))
        b = job("neighbour-b", "9000", 8000, 12)
        wait_for("neighbour-b to hold its memory", lambda: holds(d, b, 8000))
        c = job("culprit", "3000", 9000, 3)  # says 3000 MiB, uses 9000
        d.wait_all_final([a, b, c], timeout=120)
        A, B, C = (d.show(i) for i in (a, b, c))
        for n in (A, B):
            log = n["attempt_log"]
            if n["state"] != "completed" or len(log) != 1:
                fail(f"neighbour {n['name']} was hurt: {[(x['outcome'], x['detail']) for x in log]}")
        first = C["attempt_log"][0]
        if first["outcome"] != "oom":
            fail("the culprit did not die at its MPS limit: " + str(first))
        if C["state"] != "completed":
            fail("the culprit did not recover: " + C["state"])
        print(f"OK: culprit died alone ({first['detail'][:80]}...), neighbours finished, culprit recovered "
              f"in {len(C['attempt_log'])} attempts")
        d.stop()
        if glob.glob(os.path.join(pipe, "*", "control")):
            fail("the managed MPS control daemon was left running with no job")
    finally:
        d.cleanup()
    # A start that fails after MPS came up (no GPU '9') leaves no control daemon behind.
    d = Daemon(build, gpus="1x40960", settings={"sharing": "mps", "mps_control": "managed",
                                                 "mps_control_binary": control, "gpus": "9"})
    try:
        try:
            d.start()
            fail("aegisd started with gpus = 9 on a one-GPU server")
        except RuntimeError as e:
            if "gpus: no GPU '9'" not in str(e):
                fail("unexpected start failure: " + str(e)[-300:])
        if glob.glob(os.path.join(d.dir, "mps", "*", "control")):
            fail("a failed start left the MPS control daemon running")
    finally:
        d.cleanup()
    print("OK: a failed start stops the MPS control daemon it started")


if __name__ == "__main__":
    main(sys.argv[1])
