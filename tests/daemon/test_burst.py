"""End-to-end: aegisd with 3 emulated 40960 MiB GPUs, 12 emulated jobs in a burst.

Checks: all complete; collocation happened; the job without a memory declaration that
does not fit next to others dies of OOM, climbs the ladder and finishes; the observation
window held (no placement on a GPU within the window after its last placement's first
activity).  Usage: test_burst.py BUILD_DIR
"""
import sys

from harness import Daemon, fail

WINDOW = 4.0  # observation window for the test (the rule is the published one; 30 s in production)


def overlaps(a, b):
    return a["launched_at"] < (b["ended_at"] or 1e18) and b["launched_at"] < (a["ended_at"] or 1e18)


def main(build):
    d = Daemon(build, settings={"observation_window_s": WINDOW, "telemetry_sample_hz": 4.0,
                                "telemetry_window_samples": 8})
    try:
        d.start()
        ids = []
        # Light jobs that share (low activity), each declaring its memory.
        for i in range(10):
            mem = 6000 + 1000 * (i % 4)
            ids.append(d.submit("--mem", f"{mem + 1024}", "--name", f"light{i}", "--", d.fakejob,
                                "--mem", str(mem), "--smact", "0.25", "--seconds", "6", "--startup", "0.5"))
        # A large job that declares nothing: admitted against the floor, it runs out of memory
        # next to the others and must climb the ladder.
        big = d.submit("--name", "big", "--", d.fakejob, "--mem", "36000", "--smact", "0.3",
                       "--seconds", "4", "--startup", "0.5", "--ramp", "1")
        ids.append(big)
        # A two-GPU job.
        ids.append(d.submit("--gpus", "2", "--mem", "9000", "--name", "pair", "--", d.fakejob,
                            "--mem", "8000", "--smact", "0.25", "--seconds", "5", "--startup", "0.5"))
        states = d.wait_all_final(ids, timeout=240)
        if any(states[i] != "completed" for i in ids):
            fail("not all completed: " + str(states))
        shows = {i: d.show(i) for i in ids}

        # Collocation: two attempts on one GPU at the same time.
        attempts = [(i, a) for i, s in shows.items() for a in s["attempt_log"]]
        shared = any(x is not y and set(a["gpus"]) & set(b["gpus"]) and overlaps(a, b)
                     for (x, a) in attempts for (y, b) in attempts)
        if not shared:
            fail("no collocation happened")

        # The OOM job: an OOM attempt first, a larger floor or exclusivity after, completion last.
        log = shows[big]["attempt_log"]
        if len(log) < 2 or log[0]["outcome"] != "oom" or log[-1]["outcome"] != "completed":
            fail("the big job did not climb the ladder: " + str([(a["outcome"], a["detail"]) for a in log]))
        if "out of memory" not in log[0]["detail"].lower():
            fail("OOM detail not from the log: " + log[0]["detail"])
        if shows[big]["recovery"]["oom_count"] < 1:
            fail("recovery state not recorded")

        # Observation window: a placement on a GPU waits until WINDOW s after the previous
        # placement's first activity there (or until that attempt ended).
        by_gpu = {}
        for _, a in attempts:
            for g in a["gpus"]:
                by_gpu.setdefault(g, []).append(a)
        for g, lst in by_gpu.items():
            lst.sort(key=lambda a: a["launched_at"])
            for prev, nxt in zip(lst, lst[1:]):
                opened = min(x for x in [prev["ended_at"] or 1e18,
                                         (prev["first_activity"] or 1e18) + WINDOW] )
                if prev["first_activity"] is None and prev["ended_at"] is None:
                    fail(f"attempt on {g} never showed activity nor ended")
                if nxt["launched_at"] + 0.05 < opened:
                    fail(f"placement on {g} at {nxt['launched_at']:.2f} inside the window until {opened:.2f}")
        print(f"OK: {len(ids)} jobs completed; OOM attempts of the big job: "
              f"{sum(a['outcome'] == 'oom' for a in log)}; GPUs used: {len(by_gpu)}")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
