"""What `aegis queue` shows whom (docs/api.md, op `queue`).

Like Slurm's squeue, `queue` lists every user's queued and running jobs, so that users
see where they stand; `--all` adds finished jobs; `--mine` keeps only the caller's own,
the caller being who the socket says (SO_PEERCRED), never what the request claims.
Two users each run a long job, and the first one also a job that has finished:
- user 2's `queue` lists both long jobs and not the finished one;
- `queue --mine` lists only the caller's jobs, for each user;
- `queue --all` adds the finished job; `--all --mine` only the caller's finished ones;
- the human table honours --mine too.
Usage: test_queue_scope.py BUILD_DIR
"""
import json
import sys

from secharness import Daemon, fail, finished_job, shared_dir, users


def ids(d, user, *flags):
    r = d.run_cli("queue", "--json", *flags, user=user, check=False)
    if r.returncode != 0:
        fail(f"aegis queue --json {' '.join(flags)} as {user}: {r.stderr.strip()}")
    return {j["id"] for j in json.loads(r.stdout)}


def expect(what, got, want):
    if got != want:
        fail(f"{what}: got jobs {sorted(got)}, expected {sorted(want)}")


def main(build):
    u1, u2 = (u.pw_name for u in users())
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        d.start()
        work = shared_dir(d, "work")
        done = finished_job(d, u1, work)
        long1 = d.submit("--name", "long1", "--", "sleep", "600", user=u1, cwd=work)
        long2 = d.submit("--name", "long2", "--", "sleep", "600", user=u2, cwd=work)

        expect("queue as user 2", ids(d, u2), {long1, long2})
        expect("queue as user 1", ids(d, u1), {long1, long2})
        expect("queue --mine as user 2", ids(d, u2, "--mine"), {long2})
        expect("queue --mine as user 1", ids(d, u1, "--mine"), {long1})
        expect("queue --all as user 2", ids(d, u2, "--all"), {done, long1, long2})
        expect("queue --all --mine as user 2", ids(d, u2, "--all", "--mine"), {long2})
        expect("queue --all --mine as user 1", ids(d, u1, "--all", "--mine"), {done, long1})
        for j in json.loads(d.run_cli("queue", "--json", "--mine", "--all", user=u2).stdout):
            if j["user"] != u2:
                fail(f"queue --mine as {u2} lists a job of {j['user']}: {j}")

        table = d.run_cli("queue", "--mine", user=u2).stdout
        if "long2" not in table or "long1" in table:
            fail(f"queue --mine table as {u2} should list long2 only:\n{table}")

        for job, user in ((long1, u1), (long2, u2)):
            d.run_cli("cancel", str(job), user=user)
        states = d.wait_all_final([long1, long2], timeout=120)
        if any(states[j] != "cancelled" for j in (long1, long2)):
            fail(f"the long jobs were not cancelled: {states}")
        expect("queue as user 2 once all ended", ids(d, u2), set())
        print(f"OK: queue lists everyone's queued and running jobs, --mine only the caller's (as {u1} and {u2}), "
              f"--all the finished ones too")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
