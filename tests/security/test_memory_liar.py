"""A neighbour that lies about its memory (issue 33 item 2; docs/security.md, "A neighbour
that lies about its memory"). One user's job declares 2G, stays small through its
observation window (its model "loading"), then takes 30000 MiB; another user's job beside
it, declared 20G and within it, runs out of memory. The victim must be requeued without
penalty (no OOM counted, no floor), the grower charged (a "blamed" event, stopped, its end
its own OOM on its ladder), and the victim's reason must give the GPU's free memory at the
failure (at most 40960 - 30000 while the grower held its 30000), not what it was placed with.
Usage: test_memory_liar.py BUILD_DIR
"""
import re
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for

GPU_MIB = 40960
GROWN_MIB = 30000


def events(d, job):
    return [(e["kind"], e["detail"]) for e in d.show(job)["events"]]


def main(build):
    attacker, victim_user = users()
    d = Daemon(build, gpus=f"1x{GPU_MIB}", shared_gpus=True,
               settings={"observation_window_s": 5.0, "telemetry_sample_hz": 2.0, "telemetry_window_samples": 4})
    try:
        d.start()
        work = shared_dir(d, "work")
        # The liar: 2G declared; a context and 20 s of "loading" at 1000 MiB with warm-up
        # kernels (its first activity, so its window opens and closes while it is small),
        # then training at 30000 MiB.
        grower = d.submit("--name", "liar", "--mem", "2G", "--", d.fakejob, "--context", "500", "--load", "20",
                          "--loaded", "1000", "--load-smact", "0.3", "--mem", str(GROWN_MIB), "--smact", "0.3",
                          "--seconds", "600", "--startup", "0.5", user=attacker.pw_name, cwd=work)
        wait_for("the liar to run", lambda: d.show(grower)["state"] == "running", timeout=60)
        # The victim: 20G declared, growing to 20000 MiB over 40 s (4000 MiB every 10 s):
        # placed beside the liar once its window closed, it dies when the liar has grown.
        victim = d.submit("--name", "victim", "--mem", "20G", "--", d.fakejob, "--mem", "20000", "--ramp", "40",
                          "--smact", "0.3", "--seconds", "600", "--startup", "0.5",
                          user=victim_user.pw_name, cwd=work)
        wait_for("the victim's OOM", lambda: any(k == "oom" for k, _ in events(d, victim)), timeout=150)
        wait_for("the victim's requeue", lambda: any(k == "requeue" for k, _ in events(d, victim)), timeout=60)
        v = d.show(victim)
        requeue = [det for k, det in events(d, victim) if k == "requeue"][0]
        if v["attempt_log"][0]["launched_at"] < d.show(grower)["attempt_log"][0]["launched_at"]:
            fail("the victim started before the liar: the attack did not play")
        if "without penalty" not in requeue:
            fail(f"the victim was charged for its neighbour's growth: {requeue!r}; events {events(d, victim)}")
        if v["recovery"]["oom_count"] != 0 or v["recovery"]["floor_mib"] != 0:
            fail(f"the victim's recovery state climbed its ladder: {v['recovery']}")
        # The GPU's free memory at the failure: the emulated GPU's own figure in the OOM
        # message (nothing changed between the last sample and the failed allocation), and at
        # most what the grower's 30000 MiB left.
        oom = [det for k, det in events(d, victim) if k == "oom"][0]
        at_failure = re.search(r"(\d+) MiB free\)", oom)
        m = re.search(r"with (\d+) MiB free", requeue)
        if not at_failure or int(at_failure.group(1)) > GPU_MIB - GROWN_MIB:
            fail(f"the OOM did not happen beside the grown liar: {oom!r}")
        if not m or m.group(1) != at_failure.group(1):
            fail(f"the reason's free memory is not the GPU's at the failure ({at_failure.group(1)} MiB): {requeue!r}")
        if f"job {grower} grew to" not in requeue:
            fail(f"the reason does not name the grower (job {grower}): {requeue!r}")
        # The liar: charged in its history, stopped, its end counted as its own OOM.
        g_events = events(d, grower)
        if not any(k == "blamed" for k, _ in g_events):
            fail(f"the liar was not charged: {g_events}")
        wait_for("the liar's first attempt to end as an OOM",
                 lambda: d.show(grower)["attempt_log"][0]["outcome"] == "oom", timeout=60)
        g = d.show(grower)
        if g["recovery"]["oom_count"] < 1:
            fail(f"the liar's ladder did not climb: {g['recovery']}")
        print(f"OK: victim {victim} requeued without penalty ({requeue!r}); liar {grower} blamed, stopped and "
              f"charged (recovery {g['recovery']})")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
