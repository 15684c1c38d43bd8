"""End-to-end: `aegis submit --array` on aegisd with emulated GPUs (issue 32 item 3).

Checks: an array's elements are jobs sharing its id; {i} and AEGIS_ARRAY_INDEX reach each
element; element 0 (the probe) runs alone first and the others start only after its memory
stopped growing for `array_probe_settle_s`, each with its measured peak plus the margin as
its floor; %2 keeps at most two elements running at once; bad --array syntax is one line
naming --array and queues nothing; an element no GPU can take yet with its learned floor is
passed over while a sibling runs (a later job starts meanwhile: array_floor_pass_over); an
element whose probe's peak plus the margin exceeds every GPU runs alone on an idle GPU, also
when aegisd was killed (SIGKILL) while it waited.
Usage: test_arrays.py BUILD_DIR
"""
import sys
import time

from harness import Daemon, fail, wait_for

SETTLE = 2.0
MARGIN = 2048


def elements(d, array_id):
    return sorted((j for j in d.jobs() if j.get("array_id") == array_id), key=lambda j: j["array_index"])


def main(build):
    d = Daemon(build, settings={"observation_window_s": 1.0, "telemetry_sample_hz": 4.0,
                                "telemetry_window_samples": 4, "array_probe_settle_s": SETTLE,
                                "memory_margin_mib": MARGIN})
    try:
        d.start()
        # Bad syntax: one line naming --array, nothing queued.
        for bad in ("5-2", "0-100000", "0-9%0", "1,,2"):
            r = d.run_cli("submit", "--array", bad, "--", "true", check=False)
            lines = r.stderr.strip().splitlines()
            if r.returncode == 0 or len(lines) != 1 or "--array" not in lines[0]:
                fail(f"--array {bad}: rc {r.returncode}, stderr {r.stderr!r}")
        if d.jobs():
            fail("a bad --array queued something: " + str(d.jobs()))

        # {i} and AEGIS_ARRAY_INDEX.
        small = d.submit("--array", "1,3", "--", "sh", "-c", "echo arg={i} env=$AEGIS_ARRAY_INDEX")
        got = elements(d, small)
        if [j["array_index"] for j in got] != [1, 3] or got[0]["id"] != small:
            fail("array 1,3: " + str([(j["id"], j.get("array_index")) for j in got]))
        d.wait_all_final([j["id"] for j in got], timeout=120)
        for j in got:
            out = d.run_cli("logs", str(j["id"])).stdout.strip()
            i = j["array_index"]
            if out != f"arg={i} env={i}":
                fail(f"element {i} printed {out!r}")

        # The probe: 6 elements of a job that grows to 7000 MiB, at most 2 at once.
        arr = d.submit("--array", "0-5%2", "--name", "sweep", "--", d.fakejob, "--mem", "7000", "--smact", "0.2",
                       "--seconds", "4", "--startup", "0.3", "--ramp", "0.5")
        ids = [j["id"] for j in elements(d, arr)]
        if len(ids) != 6 or ids[0] != arr:
            fail("array 0-5%2 made " + str(ids))
        states = d.wait_all_final(ids, timeout=240)
        if any(states[i] != "completed" for i in ids):
            fail("not all elements completed: " + str(states))
        shows = {i: d.show(i) for i in ids}
        probe = shows[arr]["attempt_log"][0]
        peak = probe["peak_mib"]
        if peak < 6000:
            fail(f"the probe's measured peak is {peak} MiB")
        others = [shows[i] for i in ids[1:]]
        first_other = min(s["attempt_log"][0]["launched_at"] for s in others)
        if probe["first_activity"] is None or first_other < probe["first_activity"] + SETTLE - 0.05:
            fail(f"an element started at {first_other:.2f}, before the probe's peak "
                 f"(first activity {probe['first_activity']}, + {SETTLE} s)")
        for s in others:
            # (the lifecycle took the peak when memory settled; the attempt's record may add a
            # few MiB of allocator noise after, within the 64 MiB tolerance)
            if not peak + MARGIN - 64 <= s["recovery"]["floor_mib"] <= peak + MARGIN:
                fail(f"job {s['id']}: floor {s['recovery']['floor_mib']}, want the probe's peak {peak} + {MARGIN}")
            if s["attempt_log"][0]["admitted_mib"] < peak:
                fail(f"job {s['id']} admitted with {s['attempt_log'][0]['admitted_mib']} MiB")
        # %2: never three elements at once.
        spans = [(a["launched_at"], a["ended_at"]) for s in shows.values() for a in s["attempt_log"]]
        for t, _ in spans:
            running = sum(1 for a, b in spans if a <= t + 1e-6 and t < b)
            if running > 2:
                fail(f"{running} elements ran at {t:.2f} under %2")
        print(f"OK: probe peak {peak} MiB; elements from {first_other - probe['launched_at']:.1f} s after "
              f"the probe's launch, floor {peak + MARGIN} MiB; at most 2 at once")
        passed_over(d)
        alone(d)
        alone_after_restart(d)
    finally:
        d.cleanup()


def four_elements_three_running(d, name, mem, seconds, need_passed_over):
    """Submits `--array 0-3` of an emulated job of `mem` MiB and waits until three elements run
    (and, if asked, the fourth waits passed over); returns the four job ids."""
    arr = d.submit("--array", "0-3", "--name", name, "--", d.fakejob, "--mem", str(mem), "--smact", "0.2",
                   "--seconds", str(seconds), "--startup", "0.3", "--ramp", "0.3")
    ids = [j["id"] for j in elements(d, arr)]

    def ready():
        states = {j["id"]: j for j in d.jobs()}
        fourth = states[ids[3]]
        return (sum(states[i]["state"] == "running" for i in ids) == 3 and
                (not need_passed_over or (fourth["state"] == "queued" and "passed over" in (fourth["reason"] or ""))))

    wait_for(f"three of four {mem} MiB elements running" + (", the fourth passed over" if need_passed_over else ""),
             ready, timeout=60, every=0.2)
    return ids


def passed_over(d):
    """4 elements of 22000 MiB on 3 x 40960: with the learned floor (24048 MiB) two never share
    a GPU, so element 3 waits for a sibling's end; a small job submitted then starts at once."""
    ids = four_elements_three_running(d, "wide", 22000, 20, need_passed_over=False)
    small = d.submit("--name", "small", "--", d.fakejob, "--mem", "2000", "--smact", "0.1", "--seconds", "2",
                     "--startup", "0.3")
    reason = ""
    deadline = time.time() + 60
    while time.time() < deadline:
        states = {j["id"]: j for j in d.jobs()}
        if states[ids[3]]["state"] == "queued":
            reason = states[ids[3]]["reason"] or reason
        if states[small]["state"] != "queued":
            break
        time.sleep(0.2)
    states = d.wait_all_final(ids + [small], timeout=240)
    if any(states[i] != "completed" for i in ids + [small]):
        fail("passed over: not all completed: " + str(states))
    shows = {i: d.show(i) for i in ids + [small]}
    small_start = shows[small]["attempt_log"][0]["launched_at"]
    first_end = min(shows[i]["attempt_log"][0]["ended_at"] for i in ids[:3])
    if small_start >= first_end:
        fail(f"the small job started at {small_start:.1f}, after a sibling ended at {first_end:.1f}: "
             f"element {ids[3]} blocked the queue")
    if "passed over while" not in reason:
        fail(f"element {ids[3]}'s reason while waiting: {reason!r}")
    if shows[ids[3]]["attempt_log"][0]["launched_at"] < first_end:
        fail("element 3 started before any sibling ended (two elements shared a GPU below their floor): " +
             str({i: [(a["launched_at"] - small_start, a["ended_at"] - small_start, a.get("gpus"), a.get("outcome"))
                      for a in shows[i]["attempt_log"]] for i in ids + [small]}))
    print(f"OK: element {ids[3]} passed over ({reason!r}); job {small} started "
          f"{first_end - small_start:.1f} s before a sibling ended")


def alone(d):
    """A probe of 39500 MiB on 40960 MiB GPUs: 39500 + the margin fits no GPU, so the element
    runs alone (exclusive) on an idle GPU instead of at the estimator-free floor."""
    arr = d.submit("--array", "0-1", "--name", "big", "--", d.fakejob, "--mem", "39500", "--smact", "0.2",
                   "--seconds", "3", "--startup", "0.3", "--ramp", "0.3")
    ids = [j["id"] for j in elements(d, arr)]
    states = d.wait_all_final(ids, timeout=120)
    if any(states[i] != "completed" for i in ids):
        fail("big array: " + str(states))
    s = d.show(ids[1])
    if not s["recovery"]["exclusive_only"] or s["recovery"]["floor_mib"] != 0:
        fail(f"element 1 of a 39500 MiB probe: recovery {s['recovery']}, want alone with no floor")
    if len(s["attempt_log"]) != 1:
        fail(f"element 1 ran {len(s['attempt_log'])} attempts (an OOM?)")
    print("OK: element of a 39500 MiB probe ran alone, once")


def alone_after_restart(d):
    """Four 39500 MiB elements on 3 GPUs: the fourth waits for an idle GPU, passed over; aegisd
    is killed and started again (the probe's peak is gone, its floor stored): the element
    still runs alone, once, rather than failing as a job no GPU can hold."""
    ids = four_elements_three_running(d, "big2", 39500, 15, need_passed_over=True)
    d.kill9()
    d.start()
    states = d.wait_all_final(ids, timeout=240)
    if any(states[i] != "completed" for i in ids):
        fail("after the restart: " + str({i: (states[i], d.show(i)["reason"]) for i in ids}))
    s = d.show(ids[3])
    if not s["recovery"]["exclusive_only"] or len(s["attempt_log"]) != 1:
        fail(f"element 3 after the restart: recovery {s['recovery']}, {len(s['attempt_log'])} attempts")
    print("OK: after a SIGKILL of aegisd the waiting element of a 39500 MiB probe ran alone, once")


if __name__ == "__main__":
    main(sys.argv[1])
