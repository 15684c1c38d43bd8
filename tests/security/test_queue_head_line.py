"""`aegis queue`'s "head of the queue waits" line speaks only of a job that still waits
(issue 33, item 6).

On one GPU under `exclusive`, a user's second job waits for the first; the listing says why.
Once the waiting job is cancelled, and then the running one, the line must go: before, the
last pass's reason stayed, and an empty queue was said to wait "for 1 idle GPU".
Usage: test_queue_head_line.py BUILD_DIR
"""
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for


def head_line(d, user):
    out = d.run_cli("queue", user=user).stdout
    return [line for line in out.splitlines() if line.startswith("head of the queue")], out


def main(build):
    u1 = users()[0].pw_name
    d = Daemon(build, gpus="1x40960", settings={"observation_window_s": 1.0, "policy": "exclusive"})
    try:
        d.start()
        work = shared_dir(d, "work")
        first = d.submit("--name", "first", "--", "sleep", "600", user=u1, cwd=work)
        wait_for(f"job {first} to run", lambda: d.show(first)["state"] == "running", timeout=60)
        second = d.submit("--name", "second", "--", "sleep", "600", user=u1, cwd=work)
        wait_for("the listing to say why the second job waits", lambda: head_line(d, u1)[0], timeout=30)
        d.run_cli("cancel", str(second), user=u1)
        lines, out = head_line(d, u1)
        if lines:
            fail(f"no job waits, yet the listing says {lines}:\n{out}")
        d.run_cli("cancel", str(first), user=u1)
        d.wait_all_final([first, second], timeout=120)
        lines, out = head_line(d, u1)
        if lines:
            fail(f"the queue is empty, yet the listing says {lines}:\n{out}")
        print("OK: the head-of-queue line is shown while a job waits, and gone once none does")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
