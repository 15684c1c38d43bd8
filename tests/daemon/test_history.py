"""The history estimator: a job run twice gets, the second time, the peak GPU memory
recorded for its first run (the engine adds its margin), and shares a GPU it could not
share estimator-free. Usage: test_history.py BUILD_DIR
"""
import sys

from harness import Daemon, fail, wait_for


def main(build):
    d = Daemon(build, gpus="1x40960", settings={"observation_window_s": 1.0, "telemetry_sample_hz": 4.0,
                                                 "telemetry_window_samples": 4})
    try:
        d.start()

        def small(seed, name, extra=()):
            # Only the numbers differ between runs: they are normalised in the signature.
            return d.submit("--name", name, "--", d.fakejob, "--mem", "1500", "--smact", "0.2",
                            "--seconds", "2", "--startup", "0.2", "--util", f"0.2{seed}", *extra)

        first = small(1, "first")
        d.wait_all_final([first], timeout=120)
        peak = d.show(first)["attempt_log"][0]["peak_mib"]
        if abs(peak - 1500) > 1:
            fail(f"recorded peak {peak}, expected 1500")

        # A big job leaves 5460 MiB: 4948 after the guard, under the 5120 MiB estimator-free
        # floor but enough for 1500 + 2048 (the margin).
        # The big job runs until the test cancels it (it never ends on its own within the
        # test), so whether the others share its GPU does not depend on the clock.
        big = d.submit("--name", "big", "--mem", "35500", "--", d.fakejob, "--mem", "35500", "--smact", "0.2",
                       "--seconds", "3600", "--startup", "0.2")
        wait_for("the big job to hold its memory",
                 lambda: d.show(big)["attempt_log"] and d.show(big)["attempt_log"][0]["peak_mib"] >= 35500)
        again = small(2, "again")
        stranger = small(3, "stranger", extra=("--drama", "0.1"))  # another command line: no history
        # The second run shares the GPU with the big job and completes; the stranger waits.
        d.wait_all_final([again], timeout=120)
        if d.show(big)["state"] != "running":
            fail("the big job ended before the test cancelled it: " + str(d.show(big)))
        if d.show(stranger)["attempt_log"]:
            fail("a job with no history shared a GPU estimator-free rules refuse")
        d.run_cli("cancel", str(big))
        d.wait_all_final([big, stranger], timeout=120)
        A = d.show(big)["attempt_log"][-1]
        B = d.show(again)["attempt_log"][0]
        C = d.show(stranger)["attempt_log"][0]
        if B["admitted_mib"] != peak:
            fail(f"second run admitted with {B['admitted_mib']} MiB, expected the recorded {peak}")
        if B["outcome"] != "completed" or not B["launched_at"] < A["ended_at"]:
            fail("the second run did not share the GPU with the big job")
        if C["outcome"] != "completed" or C["launched_at"] < A["ended_at"] - 0.01:
            fail("a job with no history shared a GPU estimator-free rules refuse")
        print(f"OK: second run admitted with its recorded peak {peak} MiB and shared the GPU; "
              f"a new job waited {C['launched_at'] - B['launched_at']:.1f} s longer")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
