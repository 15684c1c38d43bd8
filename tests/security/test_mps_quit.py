"""Anyone can stop the managed MPS control daemon (issue 33, item 3; docs/security.md).

MPS requires its control pipe to be writable by every user, so any user can send it
`quit`. Before, aegisd did not notice: every later job failed with "MPS client failed to
connect", counted as the job's own failure. Now aegisd supervises the control daemons it
manages (docs/daemon.md, "MPS supervision"):

1. a test user quits the daemon of the one GPU (`echo quit | nvidia-cuda-mps-control`, the
   emulated tool, as NVIDIA documents it); another user's job submitted at once runs into
   the outage (mps_check_interval_s is long here, so only that job's failure tells aegisd):
   its attempt is "lost" (interrupted by the host), it is requeued without penalty (no OOM or failure on its
   record, no recovery step, not exclusive), the daemon is restarted and logged, and the
   job completes on its second attempt;
2. a later job of anyone runs on the restarted daemon;
3. quit again with no job running: the periodic check finds it and restarts it;
4. with the control tool broken (the daemon cannot start), a quit makes aegisd give up
   after mps_restart_limit tries: the GPU takes no job, a job waits (not failed), and the
   queue says why.
Usage: test_mps_quit.py BUILD_DIR   (AEGIS_KEEP=1 keeps the scratch folder and aegisd.log)
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

from secharness import Daemon, fail, shared_dir, users, wait_for

CHECK_INTERVAL_S = 15  # long enough that the periodic check does not beat step 1's job


def quit_mps(user, control, pipe):
    """The attack: `echo quit | nvidia-cuda-mps-control` as `user`, at aegisd's pipe."""
    env = {"PATH": "/usr/bin:/bin", "CUDA_MPS_PIPE_DIRECTORY": pipe}
    r = subprocess.run(["runuser", "-u", user.pw_name, "--", "env", *[f"{k}={v}" for k, v in env.items()],
                        control], input="quit\n", capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"the quit as {user.pw_name} was refused ({r.returncode}): {r.stderr.strip()}")
    if os.path.exists(os.path.join(pipe, "control")):
        fail("the control daemon's FIFO is still there after quit: the attack did not happen")


def main(build):
    u1, u2 = users()
    control = os.path.join(os.path.abspath(build), "apps/aegis-fakejob/mps-bin/nvidia-cuda-mps-control")
    # aegisd's own copy of the tool, which step 4 breaks (the attacker keeps the real one).
    tools = tempfile.mkdtemp(prefix="aegis-mps-tool-")
    managed = os.path.join(tools, "nvidia-cuda-mps-control")
    shutil.copy(control, managed)
    d = Daemon(build, gpus="1x40960", shared_gpus=True,
               settings={"sharing": "mps", "mps_control": "managed", "mps_control_binary": managed,
                         "mps_check_interval_s": CHECK_INTERVAL_S, "mps_restart_limit": 2,
                         "mps_restart_backoff_s": 0.2, "observation_window_s": 0.5,
                         "telemetry_sample_hz": 4.0, "telemetry_window_samples": 4})
    try:
        d.start()
        work = shared_dir(d, "work")
        pipes = [p for p in glob.glob(os.path.join(d.dir, "mps", "*")) if os.path.isdir(p)]
        if len(pipes) != 1 or not os.path.exists(os.path.join(pipes[0], "control")):
            fail(f"expected one running control daemon under {d.dir}/mps, found {pipes}")
        pipe = pipes[0]

        def job(user, name):
            return d.submit("--name", name, "--mem", "3G", "--", d.fakejob, "--mem", "2000", "--smact", "0.2",
                            "--seconds", "1", "--startup", "0.2", user=user.pw_name, cwd=work)

        def restarts():
            return open(d.log).read().count("restarted (")

        # 1. The attack, and a job caught in the outage.
        quit_mps(u1, control, pipe)
        caught = job(u2, "caught-in-outage")
        states = d.wait_all_final([caught], timeout=120)
        j = d.show(caught)
        log = [(a["outcome"], a["detail"]) for a in j["attempt_log"]]
        if states[caught] != "completed":
            fail(f"the job caught in the outage {states[caught]} ({j['reason']}): {log}")
        first = j["attempt_log"][0]
        if first["outcome"] != "lost" or not first["detail"].startswith("interrupted by the host:") \
                or "MPS" not in first["detail"]:
            fail(f"its first attempt should be lost, interrupted by the host's MPS outage: {log}")
        if j["attempt_log"][-1]["outcome"] != "completed":
            fail(f"its last attempt should have completed: {log}")
        kinds = [e["kind"] for e in j["events"]]
        if "oom" in kinds or "exit" in kinds:
            fail(f"the outage was counted as the job's own failure: events {kinds}")
        rec = j["recovery"]
        if rec["oom_count"] != 0 or rec["floor_mib"] != 0 or rec["exclusive_only"]:
            fail(f"the outage moved the job's recovery ladder: {rec}")
        if any(a["exclusive"] for a in j["attempt_log"]):
            fail(f"the requeued job was run alone, as a failed one is: {log}")
        requeue = [e["detail"] for e in j["events"] if e["kind"] == "requeue"]
        if not requeue or "not counted against it" not in requeue[0]:
            fail(f"the requeue should say it is not counted against the job: {requeue}")
        if restarts() < 1 or "MPS control daemon of GPU" not in open(d.log).read():
            fail("aegisd's log does not say it restarted the control daemon:\n" + open(d.log).read()[-3000:])
        if not os.path.exists(os.path.join(pipe, "control")):
            fail("no control daemon listens after the restart")

        # 2. Later jobs run on the restarted daemon (the attacker's too).
        later = job(u1, "after-restart")
        if d.wait_all_final([later], timeout=120)[later] != "completed":
            fail(f"a job after the restart did not complete: {d.show(later)['attempt_log']}")

        # 3. Quit with nothing running: the periodic check finds it.
        before = restarts()
        quit_mps(u1, control, pipe)
        wait_for("the periodic check to restart the control daemon", lambda: restarts() > before,
                 timeout=CHECK_INTERVAL_S * 4)
        last = job(u2, "after-second-quit")
        if d.wait_all_final([last], timeout=120)[last] != "completed":
            fail(f"a job after the second restart did not complete: {d.show(last)['attempt_log']}")

        # 4. A daemon that cannot be restarted: given up after the limit, and said so.
        os.remove(managed)
        with open(managed, "w") as f:
            f.write("#!/bin/sh\necho broken >&2\nexit 1\n")
        os.chmod(managed, 0o755)
        quit_mps(u1, control, pipe)
        waiting = job(u2, "after-give-up")
        wait_for("aegisd to give up on the control daemon",
                 lambda: "could not be restarted (2 tries" in open(d.log).read(), timeout=CHECK_INTERVAL_S * 4)
        head = ""
        for _ in range(20):  # a scheduling pass after the give-up writes the head line
            head = d.run_cli("queue", user=u2.pw_name).stdout
            if "takes no job" in head:
                break
            time.sleep(0.5)
        if "takes no job" not in head or "could not be restarted" not in head:
            fail(f"the queue does not say why the GPU takes no job:\n{head}")
        if d.show(waiting)["state"] != "queued":
            fail(f"the job submitted after the give-up should wait: {d.show(waiting)['state']}")
    finally:
        shutil.rmtree(tools, ignore_errors=True)
        if os.environ.get("AEGIS_KEEP"):
            print("kept", d.dir)
            d.stop()
        else:
            d.cleanup()
    print("OK: a user's quit of the MPS control daemon was noticed and the daemon restarted (logged); the job "
          "caught in the outage was requeued without penalty and completed; later jobs ran")


if __name__ == "__main__":
    main(sys.argv[1])
