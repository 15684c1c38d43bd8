"""Crash safety: aegisd killed with SIGKILL three times at different moments of a burst
run, restarted each time. Every job must complete exactly once: each job's command
appends to a marker file when its work is done, and no two attempts of a job overlap.
Usage: test_crash.py BUILD_DIR
"""
import os
import sys

from harness import Daemon, fail, wait_for


def main(build):
    d = Daemon(build, settings={"observation_window_s": 3.0, "telemetry_sample_hz": 4.0,
                                "telemetry_window_samples": 8})
    try:
        d.start()
        marks = os.path.join(d.dir, "marks")
        os.makedirs(marks)
        os.chmod(marks, 0o777)
        ids = []
        for i in range(12):
            mem = 5000 + 1500 * (i % 3)
            big = i == 7
            args = ["--name", f"job{i}"] + ([] if big else ["--mem", str(mem + 1024)])
            work = (f"'{d.fakejob}' --mem {36000 if big else mem} --smact 0.25 --seconds {3 + i % 4} --startup 0.3"
                    f" && echo done >> {marks}/$AEGIS_JOB_ID")
            ids.append(d.submit(*args, "--", "/bin/sh", "-c", work))
        # Kill at three different moments, each reached by what the jobs show rather than by
        # the clock: right after the burst, once some job is running (jobs starting), and once
        # some job completed while others still wait or run (mid-run).
        def shown():
            return [j["state"] for j in d.jobs() if j["id"] in ids]

        def mid_run():
            now = shown()
            return "completed" in now and any(s in ("queued", "running") for s in now)
        moments = [("right after the burst", lambda: True),
                   ("a job running", lambda: "running" in shown()),
                   ("a job completed, others not", mid_run)]
        for what, moment in moments:
            wait_for(what, moment, timeout=120, every=0.05)
            d.kill9()
            d.start()
        states = d.wait_all_final(ids, timeout=300)
        bad = {i: s for i, s in states.items() if i in ids and s != "completed"}
        if bad:
            fail("not completed: " + str(bad))
        for i in ids:
            path = os.path.join(marks, str(i))
            n = open(path).read().count("done") if os.path.exists(path) else 0
            if n != 1:
                fail(f"job {i} finished its work {n} times")
            log = d.show(i)["attempt_log"]
            for a, b in zip(log, log[1:]):
                if a["ended_at"] is None or b["launched_at"] < a["ended_at"]:
                    fail(f"job {i}: attempt {b['number']} started before attempt {a['number']} ended")
            if sum(a["outcome"] == "completed" for a in log) != 1:
                fail(f"job {i}: {[a['outcome'] for a in log]}")
        print(f"OK: {len(ids)} jobs completed exactly once across 3 daemon kills")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
