"""Backfill's predicted durations survive an aegisd restart (issue 32): a command with three
successful runs, then aegisd is killed (SIGKILL) and started again; the rebuilt prediction
(from the store's successful attempts) still lets a job of that command, without a limit,
backfill ahead of a head that waits for both GPUs. (Before, durations were kept in memory
only: after the restart the job had neither a limit nor a prediction and waited.)
Usage: test_backfill_restart.py BUILD_DIR
"""
import sys

from harness import Daemon, fail, run_history, wait_for


def main(build):
    d = Daemon(build, gpus="2x40960", settings={"backfill": True, "backfill_history_runs": 3})
    try:
        d.start()
        run_history(d)  # three successful runs of "sh -c sleep #"
        d.kill9()
        d.start()
        # A holds GPU 0 until its limit stops it (15 s); the head H wants both GPUs.
        a = d.submit("--exclusive", "--time", "15", "--", "sleep", "300")
        wait_for("A running", lambda: d.show(a)["state"] == "running")
        h = d.submit("--exclusive", "--gpus", "2", "--time", "30", "--", "sleep", "1")
        known = d.submit("--exclusive", "--", "sh", "-c", "sleep 0.5")  # no limit: predicted, from the store
        states = d.wait_all_final([a, h, known], timeout=120)
        if states[a] != "failed" or states[h] != "completed" or states[known] != "completed":
            fail(f"states {states}")
        started = {j: d.show(j)["started_at"] for j in (h, known)}
        if started[known] >= started[h]:
            fail(f"after the restart the job with history did not backfill: started "
                 f"{started[known] - started[h]:.1f} s after the head (its prediction was lost)")
        print(f"OK: after a SIGKILL and restart the predicted job backfilled "
              f"{started[h] - started[known]:.1f} s before the head")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
