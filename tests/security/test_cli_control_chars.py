"""Another user's control characters never reach a reader's terminal (issue 33, item 4).

User 1 submits a job from a working directory whose name carries terminal escape sequences
(clear screen, set the window title, a bell), with a command whose arguments carry a C1
control (CSI, U+009B) and a newline that would forge a line of the listing. User 2 then
reads it the ways the CLI offers: `aegis show`, `aegis queue`, `aegis queue --json`,
`aegis show --json`. None of their outputs may carry a control byte (C0 other than the
listings' own newlines, DEL, or a C1 control in UTF-8); the escaped forms must be there, so
that the reader still sees what the other user typed.
Usage: test_cli_control_chars.py BUILD_DIR
"""
import os
import sys

from secharness import Daemon, fail, shared_dir, users

ESC_DIR = "w\x1b[2J\x1b]0;owned\x07dir"
C1_ARG = "x\u009b31mred\nFAKE LINE"


def controls(out):
    """The control characters in `out` other than the line ends a listing prints."""
    bad = [c for c in out if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7F or 0x80 <= ord(c) <= 0x9F]
    return sorted({f"U+{ord(c):04X}" for c in bad})


def main(build):
    u1, u2 = (u.pw_name for u in users())
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        d.start()
        work = os.path.join(shared_dir(d, "work"), ESC_DIR)
        os.makedirs(work)
        os.chmod(work, 0o777)
        job = d.submit("--name", "ctl", "--", "sleep", "600", C1_ARG, user=u1, cwd=work)
        for args in (("show", str(job)), ("queue",), ("queue", "--json"), ("show", str(job), "--json")):
            r = d.run_cli(*args, user=u2, check=False)
            if r.returncode != 0:
                fail(f"aegis {' '.join(args)} as {u2}: {r.stderr.strip()}")
            bad = controls(r.stdout)
            if bad:
                fail(f"aegis {' '.join(args)} as {u2} prints {u1}'s control characters {bad}:\n{r.stdout!r}")
            if "FAKE LINE" in r.stdout and any(line.startswith("FAKE LINE") for line in r.stdout.splitlines()):
                fail(f"aegis {' '.join(args)} as {u2}: {u1}'s newline forged a line:\n{r.stdout}")
        shown = d.run_cli("show", str(job), user=u2).stdout
        if "\\x1b[2J" not in shown:
            fail(f"aegis show should print the escape as \\x1b so the reader sees it:\n{shown}")
        d.run_cli("cancel", str(job), user=u1)
        d.wait_all_final([job], timeout=120)
        print(f"OK: {u1}'s escape sequences (working directory, command) reach {u2}'s show and queue, "
              f"text and JSON, only as visible escapes")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
