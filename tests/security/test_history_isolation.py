"""Attack: changing another user's estimates (docs/security.md, threat model).

The history estimator admits a job with the peak memory recorded for earlier runs of the
same command line. User 2 runs user 1's command, in user 1's directory, with a far larger
peak. Safe outcome: user 1's next run is still admitted with user 1's own recorded peak.
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

        def run(user, mem):
            # Only the numbers differ: one signature for all three runs.
            job = d.submit("--name", "sweep", "--", d.fakejob, "--mem", str(mem), "--smact", "0.2", "--seconds", "2",
                           "--startup", "0.2", user=user.pw_name, cwd=work)
            if d.wait_all_final([job], timeout=60)[job] != "completed":
                fail(f"job {job} of {user.pw_name} did not complete")
            return d.show(job)["attempt_log"][0]
        first = run(u1, 1500)
        if abs(first["peak_mib"] - 1500) > 1:
            fail(f"user 1's recorded peak {first['peak_mib']}, expected 1500")
        other = run(u2, 9000)
        if abs(other["peak_mib"] - 9000) > 1:
            fail(f"user 2's recorded peak {other['peak_mib']}, expected 9000")
        again = run(u1, 1500)
        if again["admitted_mib"] != first["peak_mib"]:
            fail(f"user 1's next run was admitted with {again['admitted_mib']} MiB, not its own recorded "
                 f"{first['peak_mib']}: another user changed its estimate")
        print(f"OK: user 2's run of the same command (peak {other['peak_mib']} MiB) left user 1's history "
              f"estimate at {again['admitted_mib']} MiB")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
