"""Two users under MPS (docs/sharing.md): both users' jobs reach the MPS control daemon
(its pipe directory is not inside the 0700 state directory), every job gets its memory
limit, and a GPU holds only one user's jobs at a time (NVIDIA's control daemon serves one
user at a time; the engine's mps-one-user rule). With the rule declared off
(mps_one_user_per_gpu = false), the second user's job is placed beside the first and its
MPS client waits in the emulated control daemon until the first user's server is gone.
Usage: test_mps_two_users.py BUILD_DIR
"""
import glob
import os
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for


def run(build, u1, u2, one_user):
    control = os.path.join(os.path.abspath(build), "apps/aegis-fakejob/mps-bin/nvidia-cuda-mps-control")
    d = Daemon(build, gpus="1x40960", shared_gpus=True,
               settings={"sharing": "mps", "mps_control": "managed", "mps_control_binary": control,
                         "mps_one_user_per_gpu": one_user, "observation_window_s": 0.5,
                         "telemetry_sample_hz": 4.0, "telemetry_window_samples": 4})
    try:
        d.start()
        work = shared_dir(d, "work")
        pipe = os.path.join(d.dir, "mps")
        mode = os.stat(pipe).st_mode & 0o777
        if mode != 0o755:
            fail(f"MPS pipe directory {pipe} has mode {oct(mode)}, not 0755")

        def job(user, name, seconds):
            # Declares 3000 MiB, uses 2000: it runs under a limit of 3000 + margin.
            return d.submit("--name", name, "--mem", "3G", "--", d.fakejob, "--mem", "2000", "--smact", "0.2",
                            "--seconds", str(seconds), "--startup", "0.2", user=user.pw_name, cwd=work)
        a = job(u1, "first-user", 3)
        wait_for("the first user's job to run", lambda: d.show(a)["state"] == "running")
        b = job(u2, "second-user", 1)
        states = d.wait_all_final([a, b], timeout=120)
        A, B = d.show(a), d.show(b)
        for j, s in ((A, states[a]), (B, states[b])):
            if s != "completed":
                fail(f"{j['name']} {s}: {[(x['outcome'], x['detail']) for x in j['attempt_log']]}")
        a_end = A["attempt_log"][-1]["ended_at"]
        b_launch = B["attempt_log"][0]["launched_at"]
        log = "".join(open(p).read() for p in glob.glob(os.path.join(d.state, "mps", "log", "*", "control.log")))
        for u in (u1, u2):
            if f"from user {u.pw_uid}" not in log:
                fail(f"no MPS client of {u.pw_name} reached the control daemon:\n{log}")
        if one_user and b_launch < a_end:
            fail(f"the second user's job launched at {b_launch}, before the first user's ended at {a_end}")
        if not one_user:
            if b_launch >= a_end:
                fail("with mps_one_user_per_gpu = false the second user's job should be placed beside the first")
            if f"of user {u2.pw_uid} waits" not in log:
                fail(f"the second user's client did not wait for the first user's server:\n{log}")
        return b_launch - a_end
    finally:
        d.cleanup()


def main(build):
    u1, u2 = users()
    gap = run(build, u1, u2, True)
    run(build, u1, u2, False)
    print(f"OK: both users' jobs reached MPS and completed; one user per GPU (second launched {gap:.1f} s after "
          "the first ended); declared off, the second waited in the control daemon instead")


if __name__ == "__main__":
    main(sys.argv[1])
