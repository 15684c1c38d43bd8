"""Two users under MPS on two GPUs (docs/sharing.md, "One control daemon per GPU"): aegisd
runs one MPS control daemon per GPU, started with CUDA_VISIBLE_DEVICES = that GPU and its
own pipe and log directories, and points each job at its GPU's daemon. So the second
user's job on the other GPU starts and ends while the first user's job still runs; with
one control daemon for every GPU (issue 30) its MPS client waited in the daemon until the
first user's MPS server had exited.
Usage: test_mps_two_gpus.py BUILD_DIR
"""
import glob
import os
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for


def main(build):
    u1, u2 = users()
    control = os.path.join(os.path.abspath(build), "apps/aegis-fakejob/mps-bin/nvidia-cuda-mps-control")
    d = Daemon(build, gpus="2x40960", shared_gpus=True,
               settings={"sharing": "mps", "mps_control": "managed", "mps_control_binary": control,
                         "observation_window_s": 0.5, "telemetry_sample_hz": 4.0, "telemetry_window_samples": 4})
    try:
        d.start()
        work = shared_dir(d, "work")

        def job(user, name, seconds):
            return d.submit("--name", name, "--mem", "3G", "--", d.fakejob, "--mem", "2000", "--smact", "0.2",
                            "--seconds", str(seconds), "--startup", "0.2", user=user.pw_name, cwd=work)

        # The first user's job runs until cancelled: only the other's own work ends it.
        a = job(u1, "first-user", 3600)
        wait_for("the first user's job to run", lambda: d.show(a)["state"] == "running")
        b = job(u2, "second-user", 1)
        # Each GPU's daemon logs in its own directory (one log for all GPUs before).
        logs = lambda: {p: open(p).read() for p in glob.glob(os.path.join(d.state, "mps", "log", "*", "control.log")) +
                        glob.glob(os.path.join(d.state, "mps", "log", "control.log"))}

        def b_done():
            for text in logs().values():
                if f"of user {u2.pw_uid} waits" in text:
                    fail("the second user's MPS client waits for the first user's server on another GPU:\n" + text)
            return d.show(b)["state"] in ("completed", "failed", "cancelled")
        wait_for("the second user's job to end", b_done, timeout=120)
        A, B = d.show(a), d.show(b)
        if B["state"] != "completed":
            fail(f"second-user {B['state']}: {[(x['outcome'], x['detail']) for x in B['attempt_log']]}")
        if A["state"] != "running":
            fail(f"the first user's job is {A['state']}, not running beside the second's")
        ga, gb = A["attempt_log"][-1]["gpus"], B["attempt_log"][0]["gpus"]
        if len(ga) != 1 or len(gb) != 1 or ga == gb:
            fail(f"the two users' jobs should hold one GPU each: {ga} and {gb}")
        # Each GPU's control daemon sees its GPU alone and served its user's client.
        by_gpu = {}
        for path, text in logs().items():
            uuid = os.path.basename(os.path.dirname(path))
            if f"Devices visible: {uuid}" not in text:
                fail(f"the control daemon logging to {path} does not see {uuid} alone:\n{text}")
            by_gpu[uuid] = text
        for gpu, u in ((ga[0], u1), (gb[0], u2)):
            if f"from user {u.pw_uid}" not in by_gpu.get(gpu, ""):
                fail(f"{u.pw_name}'s MPS client did not reach the control daemon of {gpu}: {sorted(by_gpu)}")
        pipe = os.path.join(d.dir, "mps", ga[0])
        if not os.path.exists(os.path.join(pipe, "control")) or os.stat(pipe).st_mode & 0o777 != 0o755:
            fail(f"no control daemon listens in {pipe} (mode 0755, every user's jobs reach it)")
        d.run_cli("cancel", str(a))
        d.wait_all_final([a], timeout=60)
        d.stop()
        left = glob.glob(os.path.join(d.dir, "mps", "*", "control"))
        if left:
            fail(f"the managed control daemons were left running with no job: {left}")
    finally:
        d.cleanup()
    print("OK: two users' jobs on two GPUs ran side by side, each the client of its GPU's own control daemon")


if __name__ == "__main__":
    main(sys.argv[1])
