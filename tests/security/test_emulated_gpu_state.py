"""Attack: the emulated GPUs' shared state file (issue 33 item 5; docs/security.md,
defence 15; tests/test_emulated_state.cpp plays the same on the State alone).

Every user's jobs write their memory use into that file, so it is open to every user (mode
0666, as /dev/nvidia* are). Three attacks by one user, played against a root aegisd:
1. a state file made by the user before aegisd starts, where aegisd's will be: aegisd
   must refuse it (one line naming the owner), never adopt it;
2. holding every lock the file has (flock, a POSIX record lock on the whole file, and the
   process-shared mutex that layouts before 5 kept inside it) and never letting go: aegisd must
   keep answering another user's requests (`aegis gpus` included, which reads the GPU
   layer) and report the GPUs' sample as failed, naming the lock, then recover once the
   lock is let go;
3. `truncate -s 0` on the file (older builds died of SIGBUS at their next sample): aegisd
   must survive, keep answering, report the sample as failed (in `aegis gpus` or its log),
   and restore the file it owns, reading the GPUs well again.
Only generous bounds (30 s for a reply) that a frozen daemon misses; no timing asserts.
Usage: test_emulated_gpu_state.py BUILD_DIR [foreign] [lock] [truncate]  (default: all three)
"""
import ctypes
import fcntl
import json
import mmap
import os
import shutil
import subprocess
import sys
import tempfile

from secharness import AsUser, Daemon, fail, users, wait_for

REPLY_S = 30  # a reply within this is "answering"; a frozen daemon never replies
MUTEX_OFFSET = 16  # where layouts before version 5 kept their robust mutex (after magic, version, bytes)
OLD_LAYOUTS = 5    # the layout version (bytes 8-11) from which the file holds no mutex


def cli(d, user, *args):
    """`aegis ARGS` as `user`: its output, or a failure naming a frozen daemon."""
    try:
        r = subprocess.run(["runuser", "-u", user, "--", d.aegis, "--socket", d.socket, *args],
                           capture_output=True, text=True, timeout=REPLY_S)
    except subprocess.TimeoutExpired:
        fail(f"aegis {' '.join(args)} as {user}: no reply within {REPLY_S} s (aegisd froze)")
    if r.returncode != 0:
        fail(f"aegis {' '.join(args)} as {user} failed (aegisd alive: {d.proc.poll() is None}): {r.stderr.strip()}")
    return r.stdout


def gpu_error(d, user):
    """The telemetry error `aegis gpus` shows (its text form; --json lists the GPUs alone)."""
    lines = [l for l in cli(d, user, "gpus").splitlines() if l.startswith("telemetry error: ")]
    return lines[0][len("telemetry error: "):] if lines else ""


def alive(d, what):
    if d.proc.poll() is not None:
        fail(f"aegisd died ({what}): exit {d.proc.returncode}; log: {open(d.log).read()[-1500:]}")


def foreign_file_refused(d, attacker, path):
    """Attack 1: the attacker's own (empty, 0666) file where aegisd's state file goes."""
    r = subprocess.run(["runuser", "-u", attacker.pw_name, "--", "sh", "-c", f"umask 0; : > '{path}'"])
    if r.returncode != 0 or os.stat(path).st_uid != attacker.pw_uid:
        fail("setup: the attacker could not make the file")
    try:
        d.start()
    except RuntimeError as e:
        if "owned by" not in str(e) or str(attacker.pw_uid) not in str(e):
            fail(f"aegisd refused the foreign file without saying whose it is: {str(e)[-600:]}")
        if os.stat(path).st_size != 0:
            fail("aegisd refused the foreign file but wrote into it")
        print(f"OK: a state file made by {attacker.pw_name} is refused: "
              f"{[l for l in str(e).splitlines() if 'owned by' in l][0].strip()}")
        return
    fail(f"aegisd adopted a state file made by {attacker.pw_name} (uid {attacker.pw_uid})")


def hold_every_lock(path):
    """The attacker's body: takes every lock the file has, reports, then holds them."""
    def body(report):
        fd = os.open(path, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a POSIX record lock on the whole file
        m = mmap.mmap(fd, 0)
        buf = (ctypes.c_char * len(m)).from_buffer(m)
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        # The older layouts' robust mutex inside the file (newer ones hold none there).
        version = int.from_bytes(bytes(m[8:12]), "little")
        rc = "none"
        if version < OLD_LAYOUTS:
            rc = libc.pthread_mutex_trylock(ctypes.c_void_p(ctypes.addressof(buf) + MUTEX_OFFSET))
        report(f"holding (layout {version}, mutex trylock {rc})\n".encode())
        import time
        time.sleep(3600)
    return body


def held_lock(d, attacker, victim, path):
    """Attack 2: every lock held, then let go."""
    holder = AsUser(attacker, hold_every_lock(path))
    try:
        holder.read_until(b"holding")
        bad = wait_for("a sample that failed on the held lock", lambda: gpu_error(d, victim.pw_name),
                       timeout=120)
        alive(d, "lock held")
        if "lock" not in bad:
            fail(f"the failed sample does not say that the file's lock is held: {bad!r}")
        cli(d, victim.pw_name, "queue", "--json")
        print(f"OK: with every lock held by {attacker.pw_name}, aegisd answers {victim.pw_name} and reports {bad!r}")
    finally:
        holder.kill()
    wait_for("the GPUs to read well once the lock is let go",
             lambda: not gpu_error(d, victim.pw_name), timeout=120)
    print("OK: the samples recover once the lock is let go")


def truncated(d, attacker, victim, path):
    """Attack 3: the file truncated under aegisd. aegisd owns the file, so it restores it at
    its next sample (the failed sample says why, and its log keeps the line: a failed sample
    shows in `aegis gpus` only until the next good one)."""
    size = os.stat(path).st_size
    r = subprocess.run(["runuser", "-u", attacker.pw_name, "--", "truncate", "-s", "0", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("setup: the attacker could not truncate the file: " + r.stderr)

    def seen():
        if d.proc.poll() is not None:
            return "aegisd died"
        shown = gpu_error(d, victim.pw_name)
        if "truncated" in shown:
            return shown
        logged = [l for l in open(d.log, errors="replace").read().splitlines() if "truncated" in l]
        return logged[-1] if logged else ""

    bad = wait_for("the truncation reported (or aegisd's death)", seen, timeout=120)
    alive(d, "state file truncated")
    if "truncated to 0 bytes" not in bad:
        fail(f"the truncation is not reported as such: {bad!r}")
    cli(d, victim.pw_name, "queue", "--json")
    wait_for("the GPUs to read well again", lambda: not gpu_error(d, victim.pw_name), timeout=120)
    st = os.stat(path)
    if st.st_size != size or st.st_uid != 0 or st.st_mode & 0o777 != 0o666:
        fail(f"the state file was not restored: {st.st_size} bytes (was {size}), uid {st.st_uid}, "
             f"mode {oct(st.st_mode & 0o777)}")
    gpus = json.loads(cli(d, victim.pw_name, "gpus", "--json"))
    alive(d, "state file truncated")
    print(f"OK: after truncate -s 0, aegisd lives, answers {victim.pw_name}, reports {bad!r}, "
          f"and reads its {len(gpus) if isinstance(gpus, list) else '?'} GPU(s) again from the restored file")


def main(build, parts):
    attacker, victim = users()
    gpu_dir = tempfile.mkdtemp(prefix="aegis-emu-")
    os.chmod(gpu_dir, 0o1777)  # a place every user can write to, as /tmp
    path = os.path.join(gpu_dir, "gpus.state")
    d = Daemon(build, gpus="1x40960", settings={"emulated_state": path, "telemetry_sample_hz": 2.0})
    try:
        if "foreign" in parts:
            foreign_file_refused(d, attacker, path)
            os.remove(path)
        d.start()
        st = os.stat(path)
        if st.st_uid != 0 or st.st_mode & 0o777 != 0o666:
            fail(f"aegisd's own state file: uid {st.st_uid}, mode {oct(st.st_mode & 0o777)} (want root's, 0666)")
        if gpu_error(d, victim.pw_name):
            fail("setup: the GPUs read badly before any attack")
        if "lock" in parts:
            held_lock(d, attacker, victim, path)
        if "truncate" in parts:
            truncated(d, attacker, victim, path)
    finally:
        d.cleanup()
        shutil.rmtree(gpu_dir, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["foreign", "lock", "truncate"])
