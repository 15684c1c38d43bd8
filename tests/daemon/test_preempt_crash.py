"""Preemption through a SIGKILL of aegisd (issue 32 item 1): a victim is warned (its
--checkpoint-signal reached it, and it does not say it is ready), aegisd is killed before
its lead time is over, and restarted. The victim must still be stopped, requeued and
resumed, and the head must run: no job lost, none run twice, never two on the GPU.
Usage: test_preempt_crash.py BUILD_DIR
"""
import sys

from harness import fail, wait_for
from preempt_common import events, head_script, lines, marks_dir, preempt_daemon, victim_script


def main(build):
    d = preempt_daemon(build)
    try:
        d.start()
        marks = marks_dir(d)
        victim = d.submit("--name", "victim", "--checkpoint-signal", "USR1@6", "--",
                          "/bin/sh", "-c", victim_script(d, marks, say_ready=False))
        wait_for("the victim runs", lambda: lines(f"{marks}/{victim}.attempts"), timeout=60)
        head = d.submit("--name", "head", "--priority", "5", "--", "/bin/sh", "-c", head_script(d, marks))
        # After the signal, before the stop.
        wait_for("the victim is warned", lambda: lines(f"{marks}/{victim}.warned"), timeout=60, every=0.02)
        if len(lines(f"{marks}/{victim}.attempts")) != 1:
            fail("the victim was stopped before the kill: the test did not hit its moment")
        d.kill9()
        d.start()
        states = d.wait_all_final([victim, head], timeout=240)
        if states[victim] != "completed" or states[head] != "completed":
            fail(f"states: {states}")
        for j in (victim, head):
            if lines(f"{marks}/{j}").count("done") != 1:
                fail(f"job {j} did its work {lines(f'{marks}/{j}').count('done')} times")
        attempts = lines(f"{marks}/{victim}.attempts")
        if len(attempts) != 2 or not attempts[1].startswith("attempt=2 resume=1 "):
            fail("victim's attempts: " + str(attempts))
        ev = events(d, victim)
        if ("preempt-stop", "lead time over") not in ev:
            fail("victim's events: " + str(ev))
        vlog = d.show(victim)["attempt_log"]
        hlog = d.show(head)["attempt_log"]
        if len(hlog) != 1 or hlog[0]["launched_at"] < vlog[0]["ended_at"] or vlog[1]["launched_at"] < hlog[0]["ended_at"]:
            fail(f"attempts overlap: victim {vlog}, head {hlog}")
        print(f"OK: through a SIGKILL mid-preemption each job completed once "
              f"(warnings seen: {len(lines(f'{marks}/{victim}.warned'))})")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
