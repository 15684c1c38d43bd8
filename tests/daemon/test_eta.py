"""`aegis queue --eta` on emulated GPUs (issue 32 item 5): each waiting job's expected start,
the queue served forward from the live state with running jobs ending at their limits.
Usage: test_eta.py BUILD_DIR
"""
import sys

from harness import Daemon, fail, wait_for


def main(build):
    d = Daemon(build, gpus="1x40960")
    try:
        d.start()
        a = d.submit("--exclusive", "--time", "300", "--", "sleep", "300")
        wait_for("the first job running", lambda: d.show(a)["state"] == "running")
        b = d.submit("--exclusive", "--time", "50", "--", "sleep", "1")
        c = d.submit("--exclusive", "--", "sleep", "1")   # no limit: nothing after it can be told
        e = d.submit("--exclusive", "--time", "10", "--", "sleep", "1")
        rows = {j["id"]: j for j in d.call("queue", "--eta", "--json")}
        started = d.show(a)["started_at"]
        if "eta" in rows[a]:
            fail("a running job has an eta: " + str(rows[a]))
        want = {b: started + 300, c: started + 350, e: None}
        for job, at in want.items():
            got = rows[job].get("eta", "missing")
            if at is None and got is not None or at is not None and (got is None or got == "missing" or abs(got - at) > 1):
                fail(f"job {job}: eta {got}, expected {at}")
        # Without --eta there is no such field; with it the table has the column.
        if any("eta" in j for j in d.call("queue", "--json")):
            fail("eta without --eta")
        table = d.run_cli("queue", "--eta").stdout.splitlines()
        if not table[0].startswith("ETA") or not any(l.startswith("unknown") for l in table):
            fail("table:\n" + "\n".join(table))
        print("OK: etas", {k: rows[k].get("eta") for k in want})
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
