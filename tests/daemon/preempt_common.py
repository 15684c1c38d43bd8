"""Shared by the preemption tests (issue 32 item 1): a one-GPU aegisd with the exclusive
policy (one job per GPU) and preemption on, and the job script of a victim that records
each attempt's AEGIS_* variables and each warning it gets."""
import getpass
import os

from harness import Daemon


def preempt_daemon(build, levels=None, keep=False):
    me = getpass.getuser()
    return Daemon(build, gpus="1x40960", keep=keep, settings={
        "policy": "exclusive", "preemption": True, "preempt_exempt_s": 0,  # its victims run seconds
        "priority_levels": levels or f"*:0, {me}:0..5"})


def marks_dir(d):
    marks = os.path.join(d.dir, "marks")
    os.makedirs(marks, exist_ok=True)
    os.chmod(marks, 0o777)
    return marks


def victim_script(d, marks, say_ready):
    """Holds its GPU until preempted (a long run), or, resumed, finishes in 2 s. On the
    warning it records it and, with say_ready, says its checkpoint is saved."""
    ready = 'touch "$AEGIS_CHECKPOINT_DIR/checkpointed"; ' if say_ready else ""
    return (f"trap 'echo warned >> {marks}/$AEGIS_JOB_ID.warned; {ready}' USR1; "
            f"echo \"attempt=$AEGIS_ATTEMPT resume=${{AEGIS_RESUME:-0}} dir=$AEGIS_CHECKPOINT_DIR\" "
            f">> {marks}/$AEGIS_JOB_ID.attempts; "
            f"if [ \"${{AEGIS_RESUME:-0}}\" = 1 ]; then s=2; else s=600; fi; "
            f"'{d.fakejob}' --mem 30000 --smact 0.5 --seconds $s --startup 0.2 & pid=$!; "
            # `wait` returns when a trapped signal arrives: wait again until the job is done.
            f"while kill -0 $pid 2>/dev/null; do wait $pid; done; "
            f"echo done >> {marks}/$AEGIS_JOB_ID")


def head_script(d, marks):
    return f"'{d.fakejob}' --mem 30000 --smact 0.5 --seconds 2 --startup 0.2 && echo done >> {marks}/$AEGIS_JOB_ID"


def lines(path):
    return open(path).read().splitlines() if os.path.exists(path) else []


def events(d, job_id):
    return [(e["kind"], e["detail"]) for e in d.show(job_id)["events"]]
