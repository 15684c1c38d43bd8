"""MIG on emulated GPUs: a GPU in MIG mode is scheduled as its instances; jobs land on
instances (MIG UUIDs in CUDA_VISIBLE_DEVICES), never with more than one instance's memory,
and a job too big for an instance ends up on a device that holds it.
Usage: test_mig.py BUILD_DIR
"""
import sys

from harness import Daemon, fail


def main(build):
    d = Daemon(build, gpus="2x40960", settings={"emulated_mig": "0:3g.20gb,2g.10gb,1g.5gb,1g.5gb",
                                                 "observation_window_s": 1.0, "telemetry_sample_hz": 4.0,
                                                 "telemetry_window_samples": 4})
    try:
        d.start()
        gpus = d.call("gpus", "--json")
        mig = [g for g in gpus if g["uuid"].startswith("MIG-")]
        if len(gpus) != 5 or len(mig) != 4:
            fail("expected 4 MIG instances and 1 whole GPU: " + str([g["uuid"] for g in gpus]))
        size = {g["uuid"]: g["memory_total_mib"] for g in gpus}
        if sorted(size[g["uuid"]] for g in mig) != [4864, 4864, 9984, 20096]:  # an A100-40GB's (mig_models.h)
            fail("instance memory: " + str(sorted(size.values())))
        ids = [d.submit("--name", f"small{i}", "--mem", "4G", "--", d.fakejob, "--mem", "3500", "--smact", "0.3",
                        "--seconds", "4", "--startup", "0.3") for i in range(4)]
        ids.append(d.submit("--name", "mid", "--mem", "15G", "--", d.fakejob, "--mem", "14000", "--smact", "0.3",
                            "--seconds", "4", "--startup", "0.3"))
        # Declares nothing but needs 12000 MiB: on a small instance it runs out of memory.
        big = d.submit("--name", "undeclared", "--", d.fakejob, "--mem", "12000", "--smact", "0.3", "--seconds", "3",
                       "--startup", "0.3")
        ids.append(big)
        d.wait_all_final(ids, timeout=180)
        on_mig = 0
        for i in ids:
            s = d.show(i)
            if s["state"] != "completed":
                fail(f"{s['name']} {s['state']}: {[(a['outcome'], a['detail']) for a in s['attempt_log']]}")
            final = s["attempt_log"][-1]
            dev = final["gpus"][0]
            on_mig += dev.startswith("MIG-")
            need = {"mid": 14000, "undeclared": 12000}.get(s["name"], 3500)
            if size[dev] < need:
                fail(f"{s['name']} completed on {dev} with {size[dev]} MiB < {need}")
            if final["peak_mib"] > size[dev]:
                fail(f"{s['name']} held {final['peak_mib']} MiB on a {size[dev]} MiB device")
        if on_mig == 0:
            fail("no job ran on a MIG instance")
        # A process sees one MIG instance only: two GPUs need two whole GPUs, and here is one.
        r = d.run_cli("submit", "--gpus", "2", "--", d.fakejob, "--seconds", "1", check=False)
        if r.returncode == 0 or "MIG instance" not in r.stderr:
            fail(f"2-GPU job on one whole GPU + instances: rc {r.returncode}, {r.stderr.strip()}")
    finally:
        d.cleanup()
    # `gpus = "0"` names the whole GPU 0, which is all of its instances.
    d = Daemon(build, gpus="2x40960", settings={"emulated_mig": "0:3g.20gb,2g.10gb", "gpus": "0"})
    try:
        d.start()
        got = sorted(g["uuid"][:4] for g in d.call("gpus", "--json"))
        if got != ["MIG-", "MIG-"]:
            fail(f"gpus = 0 should schedule both instances of GPU 0: {got}")
    finally:
        d.cleanup()
    print(f"OK: {len(ids)} jobs completed, {on_mig} on MIG instances, none above its device's memory; "
          "2-GPU job refused; gpus = 0 schedules all its instances")


if __name__ == "__main__":
    main(sys.argv[1])
