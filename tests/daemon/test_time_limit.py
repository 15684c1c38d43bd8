"""`aegis submit --time` on emulated GPUs (issue 32 item 5): a job past its limit is stopped
and fails with the reason; a job without --time gets the server's default; a limit over the
server's maximum, or one that is not a time, gets one line naming --time and nothing is queued.
Usage: test_time_limit.py BUILD_DIR
"""
import sys

from harness import Daemon, fail, wait_for


def main(build):
    d = Daemon(build, gpus="2x40960", settings={"default_time_limit_s": 600.0, "max_time_limit_s": 3600.0})
    try:
        d.start()
        # Over the maximum, and not a time at all: one line naming --time, nothing queued.
        for bad, words in (("2h", "over this server's maximum"), ("soon", "is not a time limit")):
            r = d.run_cli("submit", "--time", bad, "--", "sleep", "1", check=False)
            err = r.stderr.strip()
            if r.returncode == 0 or "--time" not in err or words not in err or len(err.splitlines()) != 1:
                fail(f"--time {bad}: rc {r.returncode}, stderr {err!r}")
        if d.jobs():
            fail("a refused submit queued a job: " + str(d.jobs()))
        # Past its limit: stopped, failed, the limit named.
        slow = d.submit("--time", "2", "--", "sleep", "300")
        # Within it: completes. Without --time: the default, shown in its request.
        quick = d.submit("--time", "1m", "--", "true")
        plain = d.submit("--", "true")
        states = d.wait_all_final([slow, quick, plain], timeout=120)
        if states[slow] != "failed" or states[quick] != "completed" or states[plain] != "completed":
            fail(f"states {states}")
        s = d.show(slow)
        if s["reason"] != "timeout: ran past its time limit of 2s":
            fail("reason: " + repr(s["reason"]))
        if not any(e["kind"] == "timeout" for e in s["events"]):
            fail("no timeout event: " + str(s["events"]))
        if len(s["attempt_log"]) != 1:
            fail("a timed-out job ran again: " + str(s["attempt_log"]))
        ran = s["attempt_log"][0]["ended_at"] - s["attempt_log"][0]["launched_at"]
        if ran > 60:
            fail(f"stopped only after {ran:.1f} s")
        if d.show(quick)["request"].get("time") != 60 or d.show(plain)["request"].get("time") != 600:
            fail("limits: " + str(d.show(quick)["request"]) + " " + str(d.show(plain)["request"]))
        print(f"OK: over the maximum and bad --time refused; a 2 s job stopped after {ran:.1f} s and failed (timeout)")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
