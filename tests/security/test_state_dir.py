"""Attack: places the root daemon writes, prepared by a user beforehand (item 3).

A user who creates the state directory (or its parent, or the socket's directory) before
aegisd starts could make root write through their symbolic links, read every job's
environment from the database, or put their own socket where others submit. Safe
outcome: aegisd refuses to start, with one line naming the path and the problem, and
writes nothing there; a directory of root's own is used (and made private).
Usage: test_state_dir.py BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from secharness import fail, users


def start(build, state, sock, wait=False):
    """Runs aegisd with these paths: until it exits (returns the run), or (`wait`) until
    its socket appears, then stops it."""
    cfg = os.path.join(tempfile.mkdtemp(prefix="aegis-cfg-"), "aegisd.toml")
    with open(cfg, "w") as f:
        for k, v in {"state_dir": state, "socket": sock, "gpu_backend": "emulated", "emulated_gpus": "1x40960",
                     "durability": "normal"}.items():
            f.write(f"{k} = {json.dumps(v)}\n")
    aegisd = os.path.join(os.path.abspath(build), "apps/aegisd/aegisd")
    if not wait:
        r = subprocess.run([aegisd, "--config", cfg], capture_output=True, text=True, timeout=60)
        return r
    p = subprocess.Popen([aegisd, "--config", cfg], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and not os.path.exists(sock):
        if p.poll() is not None:
            fail("aegisd did not start: " + p.stderr.read())
        time.sleep(0.05)
    p.terminate()
    p.wait(timeout=30)
    return p


def expect_refusal(r, *needles):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    if r.returncode == 0 or not lines or not all(n in lines[-1] for n in needles):
        fail(f"expected a refusal naming {needles}, got rc={r.returncode} stderr={r.stderr!r}")
    if sum("error" in l for l in lines) != 1:
        fail(f"the refusal is not one line: {r.stderr!r}")


def main(build):
    u1, _ = users()
    base = tempfile.mkdtemp(prefix="aegis-statedir-")
    os.chmod(base, 0o755)
    try:
        target = os.path.join(base, "precious")
        open(target, "w").write("root's file\n")

        # (a) The state directory made by a user first, with a link where the database goes.
        evil = os.path.join(base, "evil-state")
        os.mkdir(evil)
        os.chown(evil, u1.pw_uid, u1.pw_gid)
        os.chmod(evil, 0o777)
        os.symlink(target, os.path.join(evil, "aegis.db"))
        r = start(build, evil, os.path.join(base, "a.sock"))
        expect_refusal(r, "state_dir", evil, f"owned by uid {u1.pw_uid}")
        if open(target).read() != "root's file\n":
            fail("aegisd wrote through the user's link")

        # (b) A directory of root's inside one the user owns (they could rename it away).
        parent = os.path.join(base, "users-parent")
        os.mkdir(parent)
        os.chown(parent, u1.pw_uid, u1.pw_gid)
        os.mkdir(os.path.join(parent, "state"), 0o700)
        expect_refusal(start(build, os.path.join(parent, "state"), os.path.join(base, "b.sock")), parent,
                       f"owned by uid {u1.pw_uid}")

        # (c) root's, but anyone may write in it.
        open_dir = os.path.join(base, "open-state")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        expect_refusal(start(build, open_dir, os.path.join(base, "c.sock")), open_dir, "writable by group or others")

        # (d) The socket in a directory anyone may write (another socket could take its place),
        # and in a user's directory.
        pub = os.path.join(base, "public")
        os.mkdir(pub)
        os.chmod(pub, 0o1777)
        expect_refusal(start(build, os.path.join(base, "d-state"), os.path.join(pub, "aegisd.sock")), "socket", pub)
        sockdir = os.path.join(base, "users-sockets")
        os.mkdir(sockdir)
        os.chown(sockdir, u1.pw_uid, u1.pw_gid)
        expect_refusal(start(build, os.path.join(base, "e-state"), os.path.join(sockdir, "aegisd.sock")), "socket",
                       f"owned by uid {u1.pw_uid}")

        # (e) A link planted where the database goes, in a directory that is root's now.
        linked = os.path.join(base, "linked-state")
        os.mkdir(linked, 0o700)
        os.symlink(target, os.path.join(linked, "aegis.db"))
        r = start(build, linked, os.path.join(base, "f.sock"))
        if r.returncode == 0 or "aegis.db" not in r.stderr:
            fail(f"a database that is a symbolic link was used: rc={r.returncode} {r.stderr!r}")
        if open(target).read() != "root's file\n":
            fail("aegisd wrote through a link in its own state directory")

        # Safe places work: a new directory is made 0700; a readable one of root's is closed.
        fresh = os.path.join(base, "run", "aegis-state")
        start(build, fresh, os.path.join(base, "run", "aegisd.sock"), wait=True)
        if os.stat(fresh).st_mode & 0o777 != 0o700:
            fail(f"new state directory has mode {oct(os.stat(fresh).st_mode & 0o777)}")
        readable = os.path.join(base, "readable-state")
        os.mkdir(readable, 0o755)
        start(build, readable, os.path.join(base, "g.sock"), wait=True)
        if os.stat(readable).st_mode & 0o777 != 0o700:
            fail("a state directory others could read was not made private")
        print("OK: aegisd refuses state and socket directories a user made, owns or can write, and databases "
              "that are links; it makes its state directory private")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
