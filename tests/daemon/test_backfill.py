"""Backfill in aegisd on emulated GPUs (issue 32 item 5), with `backfill = true`: the head of
the queue waits for both GPUs while one runs a job stopped at its limit; a short job with
--time, and one without a limit whose command has three successful runs (its predicted
duration, from history), start ahead of it on the free GPU; a long one and one with neither
a limit nor history do not, and each launch event says whether it was a backfill. `aegis
queue --eta` gives the head its reserved start, and the head starts no later. (Before predicted durations a job without a limit never backfilled.)
Usage: test_backfill.py BUILD_DIR
"""
import sys

from harness import Daemon, fail, run_history, wait_for


def main(build):
    d = Daemon(build, gpus="2x40960", settings={"backfill": True, "backfill_history_runs": 3})
    try:
        d.start()
        run_history(d)  # three successful runs of "sh -c sleep #"
        # A holds GPU 0 until its limit stops it (20 s); the head H wants both GPUs.
        a = d.submit("--exclusive", "--time", "20", "--", "sleep", "300")
        wait_for("A running", lambda: d.show(a)["state"] == "running")
        h = d.submit("--exclusive", "--gpus", "2", "--time", "30", "--", "sleep", "1")
        long_ = d.submit("--exclusive", "--time", "600", "--", "sleep", "1")   # ends after H's start
        plain = d.submit("--exclusive", "--", "sleep", "1")                     # no limit, no history
        short = d.submit("--exclusive", "--time", "5", "--", "sleep", "1")      # ends by H's start
        known = d.submit("--exclusive", "--", "sh", "-c", "sleep 0.5")          # no limit, predicted
        rows = {j["id"]: j for j in d.call("queue", "--eta", "--json")}
        reserved = d.show(a)["started_at"] + 20
        eta = rows[h].get("eta") if h in rows else None
        if eta is None or abs(eta - reserved) > 2:
            fail(f"the head's eta {eta}, expected its reserved start {reserved}")
        table = d.run_cli("queue", "--eta").stdout.splitlines()
        if not table or not table[0].startswith("ETA"):
            fail("table:\n" + "\n".join(table))
        states = d.wait_all_final([a, h, long_, plain, short, known], timeout=180)
        if states[a] != "failed" or any(states[j] != "completed" for j in (h, long_, plain, short, known)):
            fail(f"states {states}")
        started = {j: d.show(j)["started_at"] for j in (h, long_, plain, short, known)}
        for j, name in ((short, "the short job with --time"), (known, "the job with a predicted duration")):
            if started[j] >= started[h]:
                fail(f"{name} did not backfill: started {started[j] - started[h]:.1f} s after the head")
        for j, name in ((long_, "the long job"), (plain, "the job without a limit or history")):
            if started[j] < started[h]:
                fail(f"{name} went ahead of the head: {started}")
        # Each job's history says which launches were backfills (the lifecycle's launch detail).
        for j, want in ((short, True), (known, True), (h, False), (long_, False), (plain, False)):
            launches = [e["detail"] for e in d.show(j)["events"] if e["kind"] == "launch"]
            if len(launches) != 1 or ("backfilled" in launches[0]) != want or not launches[0].startswith("attempt 1 on "):
                fail(f"job {j}'s launch events {launches}, backfilled expected {want}")
        if started[h] > reserved + 5:  # a few event-loop ticks
            fail(f"the head started {started[h] - reserved:.1f} s after its reserved start")
        print(f"OK: short and predicted jobs backfilled; head started {started[h] - reserved:+.1f} s from its "
              f"reserved start; long and unlimited jobs waited")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
