"""Priorities and checkpoint-aware preemption end to end (issue 32 item 1), on one emulated
GPU with the exclusive policy: --priority above the caller's allowance is refused in one
line and nothing is queued; a higher-level job preempts a running one, which gets its
--checkpoint-signal, says it saved (touching $AEGIS_CHECKPOINT_DIR/checkpointed), is
stopped, requeued and resumed (AEGIS_ATTEMPT=2, AEGIS_RESUME=1); each job completes once.
Usage: test_preempt.py BUILD_DIR
"""
import os
import stat
import sys

from harness import fail, wait_for
from preempt_common import events, head_script, lines, marks_dir, preempt_daemon, victim_script


def main(build):
    d = preempt_daemon(build, keep=bool(os.environ.get("AEGIS_KEEP")))
    try:
        d.start()
        marks = marks_dir(d)
        # Above the allowance (0..5 for this user): one line naming --priority, nothing queued.
        r = d.run_cli("submit", "--priority", "6", "--", "true", check=False)
        if r.returncode == 0 or "--priority 6" not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
            fail(f"--priority above the allowance: rc {r.returncode}, {r.stderr!r}")
        r = d.run_cli("submit", "--checkpoint-signal", "KILL@5", "--", "true", check=False)
        if r.returncode == 0 or "--checkpoint-signal" not in r.stderr:
            fail(f"--checkpoint-signal KILL@5: rc {r.returncode}, {r.stderr!r}")
        if d.jobs():
            fail("a refused submit queued a job: " + str(d.jobs()))

        victim = d.submit("--name", "victim", "--checkpoint-signal", "USR1@300", "--",
                          "/bin/sh", "-c", victim_script(d, marks, say_ready=True))
        wait_for("the victim runs", lambda: lines(f"{marks}/{victim}.attempts"), timeout=60)
        first = lines(f"{marks}/{victim}.attempts")[0]
        ckpt = first.split("dir=")[1]
        if not first.startswith("attempt=1 resume=0 ") or not ckpt.endswith(f"/{victim}"):
            fail("first attempt's variables: " + first)
        st = os.stat(ckpt)
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) != 0o700:
            fail(f"checkpoint dir {ckpt}: uid {st.st_uid}, mode {oct(st.st_mode)}")

        head = d.submit("--name", "head", "--priority", "5", "--", "/bin/sh", "-c", head_script(d, marks))
        states = d.wait_all_final([victim, head], timeout=240)
        if states[victim] != "completed" or states[head] != "completed":
            fail(f"states: {states}")
        for j in (victim, head):
            if lines(f"{marks}/{j}").count("done") != 1:
                fail(f"job {j} did its work {len(lines(f'{marks}/{j}'))} times")
        if lines(f"{marks}/{victim}.warned") != ["warned"]:
            fail("warnings: " + str(lines(f"{marks}/{victim}.warned")))
        attempts = lines(f"{marks}/{victim}.attempts")
        if len(attempts) != 2 or not attempts[1].startswith("attempt=2 resume=1 "):
            fail("victim's attempts: " + str(attempts))
        ev = events(d, victim)
        if not any(k == "preempt" and f"for job {head}" in t for k, t in ev) or \
                ("preempt-stop", "checkpoint saved") not in ev:
            fail("victim's events: " + str(ev))
        # The head ran only once the victim's first attempt had ended: one job on the GPU.
        vlog = d.show(victim)["attempt_log"]
        hlog = d.show(head)["attempt_log"]
        if len(hlog) != 1 or hlog[0]["launched_at"] < vlog[0]["ended_at"] or vlog[1]["launched_at"] < hlog[0]["ended_at"]:
            fail(f"attempts overlap: victim {vlog}, head {hlog}")
        if d.show(victim)["request"].get("checkpoint_signal") != "USR1@300" or d.show(head)["request"].get("priority") != 5:
            fail("the request as stored: " + str(d.show(victim)["request"]) + str(d.show(head)["request"]))
        print("OK: --priority refused above the allowance; preempted after its checkpoint, requeued, resumed")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
