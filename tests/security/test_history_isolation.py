"""Attack: changing another user's estimates (docs/security.md, threat model).

The history estimator admits a job with the peak memory recorded for earlier runs of the
same command line, and gives it the utilisation recorded for them. User 2 runs user 1's
command, in user 1's directory, with a far larger peak and utilisation. Safe outcome: user
1's next run is still admitted with user 1's own recorded peak and utilisation.
Usage: test_history_isolation.py BUILD_DIR
"""
import sys

from secharness import Daemon, fail, shared_dir, users


def main(build):
    u1, u2 = users()
    d = Daemon(build, gpus="1x40960", shared_gpus=True,
               settings={"observation_window_s": 1.0, "telemetry_sample_hz": 4.0, "telemetry_window_samples": 4})
    try:
        d.start()
        work = shared_dir(d, "work")

        def run(user, mem, util):
            # Only the numbers differ: one signature for all three runs.
            job = d.submit("--name", "sweep", "--", d.fakejob, "--mem", str(mem), "--smact", str(util), "--util", str(util),
                           "--seconds", "2", "--startup", "0.2", user=user.pw_name, cwd=work)
            # What it is scheduled with: the history before its own run is recorded.
            utilisation = d.show(job)["utilisation"]
            if d.wait_all_final([job], timeout=60)[job] != "completed":
                fail(f"job {job} of {user.pw_name} did not complete")
            return d.show(job)["attempt_log"][0], utilisation
        first, _ = run(u1, 1500, 0.2)
        if abs(first["peak_mib"] - 1500) > 1:
            fail(f"user 1's recorded peak {first['peak_mib']}, expected 1500")
        other, _ = run(u2, 9000, 0.9)
        run(u2, 9000, 0.9)  # twice: were the histories mixed, 0.9 would be the median of the three
        if abs(other["peak_mib"] - 9000) > 1:
            fail(f"user 2's recorded peak {other['peak_mib']}, expected 9000")
        again, util = run(u1, 1500, 0.2)
        if again["admitted_mib"] != first["peak_mib"]:
            fail(f"user 1's next run was admitted with {again['admitted_mib']} MiB, not its own recorded "
                 f"{first['peak_mib']}: another user changed its estimate")
        # Its utilisation is user 1's own recorded 0.2, not user 2's 0.9.
        if util["gpu_util_source"] != "history" or abs(util["gpu_util"] - 0.2) > 0.1:
            fail(f"user 1's next run got utilisation {util}, not its own recorded 0.2: another user changed it")
        print(f"OK: user 2's run of the same command (peak {other['peak_mib']} MiB, utilisation 0.9) left user 1's "
              f"history estimates at {again['admitted_mib']} MiB and utilisation {util['gpu_util']:.2f}")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
