"""`aegis submit --container IMAGE` (issue 15, item 4): the image is checked on the client
(one line naming --container, nothing submitted), and, where rootless podman runs, the
container's payload runs in the job's own cgroup, so aegisd attributes, measures and
cancels it like any job process.

The live part needs /usr/bin/podman that can run a container here as a test user; it is
skipped (exit 77, with podman's own reason) elsewhere. It is not in scripts/deps.sh: on the
development machine (hybrid cgroups, a container itself) rootless podman stops with "cgroups
in hybrid mode not supported", and root podman may not raise RLIMIT_NOFILE.
Usage: test_container.py BUILD_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

from harness import Daemon, ensure_user, fail, wait_for

PODMAN = "/usr/bin/podman"
IMAGE = "localhost/aegis-container-test:1"
# The payload: waits for its gate file (argv[1]), statically linked so that the image is
# one file.
HELLO_C = r'''#include <unistd.h>
int main(int argc, char** argv) {
  while (argc > 1 && access(argv[1], F_OK) != 0) usleep(100000);
  return 0;
}
'''


def payload_in_cgroup(d, job):
    """Whether a process of the container's payload (/bin/hello) is in the job's cgroup, as
    the host sees it (inside, the container has a cgroup namespace of its own)."""
    import glob
    import json
    for child in glob.glob(os.path.join(d.state, "jobs", str(job), "*", "child.json")):
        try:
            c = json.load(open(child))
            procs = open(c["cgroup_mount"] + c["cgroup"] + "/cgroup.procs").read().split()
        except (OSError, ValueError, KeyError):
            continue
        for pid in procs:
            try:
                if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0] == b"/bin/hello":
                    return c["cgroup"]
            except OSError:
                pass
    return None


def check_refusals(d):
    for bad in ("--privileged", "Debian", "debian:12 --privileged", "a//b", "x" * 300):
        r = d.run_cli("submit", "--container", bad, "--", "/bin/true", check=False)
        lines = r.stderr.strip().splitlines()
        if r.returncode == 0 or len(lines) != 1 or "--container" not in lines[0]:
            fail(f"--container {bad[:40]!r}: rc {r.returncode}, stderr {r.stderr!r}")
    if d.jobs():
        fail(f"a refused --container submitted a job: {d.jobs()}")
    print("OK: bad images are refused by the client with one line naming --container; nothing was submitted")


def podman_env(home):
    return dict(os.environ, HOME=home, XDG_RUNTIME_DIR=home, XDG_DATA_HOME=os.path.join(home, "data"),
                XDG_CONFIG_HOME=os.path.join(home, "config"))


def build_image(user, home, work):
    """The test image, as `user` (rootless storage in `home`); None, or why it cannot run here."""
    src = os.path.join(work, "hello.c")
    root = os.path.join(work, "rootfs")
    os.makedirs(os.path.join(root, "bin"))
    with open(src, "w") as f:
        f.write(HELLO_C)
    r = subprocess.run(["gcc", "-static", "-O1", "-o", os.path.join(root, "bin", "hello"), src],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot build a static payload: " + r.stderr.strip()[-200:]
    tar = os.path.join(work, "rootfs.tar")
    subprocess.run(["tar", "-C", root, "-cf", tar, "."], check=True)
    os.chmod(tar, 0o644)
    run = lambda *a: subprocess.run(["runuser", "-u", user, "--", PODMAN, *a], capture_output=True, text=True,
                                    env=podman_env(home), timeout=300)
    r = run("import", tar, IMAGE)
    if r.returncode != 0:
        return "podman import: " + r.stderr.strip()[-300:]
    r = run("run", "--rm", "--cgroups=disabled", "--userns=keep-id", IMAGE, "/bin/hello")  # no gate: ends
    if r.returncode != 0:
        return "podman run: " + r.stderr.strip()[-300:]
    return None


def main(build):
    d = Daemon(build, shared_gpus=True, settings={"observation_window_s": 1.0})
    try:
        d.start()
        check_refusals(d)
        if os.geteuid() != 0:
            print("SKIP live part: needs root (to run the container as a test user)")
            sys.exit(77)
        if not os.path.exists(PODMAN):
            print("SKIP live part: podman is not installed (Debian package podman)")
            sys.exit(77)
        pw = ensure_user("aegistest1")
        user = pw.pw_name
        home = tempfile.mkdtemp(prefix="aegis-podman-")  # podman's storage and runtime directory: the user's
        os.chown(home, pw.pw_uid, pw.pw_gid)
        os.chmod(home, 0o700)
        work = tempfile.mkdtemp(prefix="aegis-container-")
        os.chmod(work, 0o777)
        try:
            why = build_image(user, home, work)
            if why:
                print(f"SKIP live part: rootless podman cannot run a container here ({why})")
                sys.exit(77)
            # The job's environment is the submitting shell's: podman finds its storage there.
            cmd = ["runuser", "-u", user, "--", d.aegis, "--socket", d.socket, "submit", "--name", "boxed",
                   "--container", IMAGE, "--", "/bin/hello", os.path.join(work, "go")]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=podman_env(home))
            if r.returncode != 0:
                fail("submit --container: " + r.stderr.strip())
            job = int(r.stdout.strip())
            cgroup = wait_for("the container's payload in its job's cgroup", lambda: payload_in_cgroup(d, job),
                              timeout=180)
            open(os.path.join(work, "go"), "w").close()
            states = d.wait_all_final([job], timeout=120)
            if states[job] != "completed":
                fail(f"job {job}: {states[job]}: {d.show(job)['attempt_log']}")
            print(f"OK: the container's payload ran as {user} in its job's cgroup ({cgroup}) and completed")
        finally:
            subprocess.run(["runuser", "-u", user, "--", PODMAN, "rmi", "-f", IMAGE], capture_output=True,
                           env=podman_env(home))
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
