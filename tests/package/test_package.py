"""The Debian package end to end: builds it with cpack from the build tree, installs it
on this machine, checks its files, its dependencies and its config, `systemd-analyze
verify`s the unit, starts the installed aegisd with the installed config on emulated
GPUs (directly: CI containers have no systemd as PID 1), runs a job through the installed
CLI, reloads a setting with SIGHUP, then removes the package (only the conffile and
/var/lib/aegis stay) and purges it (nothing stays).
Needs root and dpkg; skipped (exit 77) without them, or when aegis is already installed
here, so that an admin's installation is never touched.
Usage: test_package.py BUILD_DIR
"""
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
from harness import fail, wait_for  # noqa: E402

PROGRAMS = ["/usr/bin/aegis", "/usr/sbin/aegisd", "/usr/libexec/aegis/aegis-shim", "/usr/bin/aegis-fakejob",
            "/usr/bin/aegis-gpu-query", "/usr/libexec/aegis/emulated-mps/nvidia-cuda-mps-control",
            "/usr/share/aegis/scripts/model_spec.py", "/usr/share/aegis/scripts/faketensor_estimate.py"]
FILES = ["/usr/lib/aegis/libaegis-nvml-emulated.so", "/usr/lib/aegis/libaegis-dcgm-emulated.so",
         "/etc/aegis/aegisd.toml", "/lib/systemd/system/aegisd.service",
         "/usr/share/aegis/slurmd.service.d/aegis.conf", "/usr/share/aegis/grafana/aegis-dashboard.json", "/usr/share/bash-completion/completions/aegis",
         "/usr/share/bash-completion/completions/aegisd", "/usr/share/man/man1/aegis.1.gz",
         "/usr/share/man/man8/aegisd.8.gz", "/usr/share/man/man1/aegis-fakejob.1.gz",
         "/usr/share/man/man1/aegis-gpu-query.1.gz"]
KEPT = ["/var/lib/aegis", "/etc/aegis"]  # what the admin keeps after remove (docs/packaging.md)


def run(*cmd, check=True, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        fail(f"{' '.join(cmd)}: rc={r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def installed(pkg):
    r = run("dpkg-query", "-W", "-f=${Status}", pkg, check=False)
    return r.returncode == 0 and "installed" in r.stdout.split()


def build_package(build):
    out = tempfile.mkdtemp(prefix="aegis-deb-")
    run("cpack", "--config", os.path.join(build, "CPackConfig.cmake"), "-G", "DEB", "-B", out)
    debs = [f for f in os.listdir(out) if f.endswith(".deb")]
    if len(debs) != 1:
        fail(f"cpack made {debs}")
    return out, os.path.join(out, debs[0])


def check_control(deb):
    fields = run("dpkg-deb", "-f", deb).stdout
    depends = re.search(r"^Depends: (.*)$", fields, re.M)
    if not depends:
        fail("no Depends: " + fields)
    # Debian's library packages of what aegis links (dpkg-shlibdeps), not the -dev ones.
    for lib in ("libc6", "libstdc++6", "libfmt9", "libsqlite3-0", "libyaml-cpp0.7", "libjemalloc2", "libcpp-httplib0.11"):
        if not re.search(rf"(^|, ){re.escape(lib)}( |,|$)", depends.group(1)):
            fail(f"Depends lacks {lib}: {depends.group(1)}")
    if "-dev" in depends.group(1):
        fail("Depends names a -dev package: " + depends.group(1))
    conffiles = run("dpkg-deb", "-I", deb, "conffiles").stdout.split()
    if conffiles != ["/etc/aegis/aegisd.toml"]:
        fail(f"conffiles: {conffiles}")


def check_files():
    for p in PROGRAMS:
        if not os.access(p, os.X_OK):
            fail(f"{p} is not installed as a program")
    for p in FILES:
        if not os.path.isfile(p):
            fail(f"{p} is not installed")
    # help2man's pages: the title line, and the options of --help in the text.
    for page, title, option in (("/usr/share/man/man8/aegisd.8.gz", "AEGISD", "--print-default-config"),
                                ("/usr/share/man/man1/aegis.1.gz", "AEGIS", "--socket")):
        text = gzip.open(page, "rt").read()
        if not re.search(rf'^\.TH "?{title}"? "?[18]"?', text, re.M) or option not in text.replace("\\-", "-"):
            fail(f"{page} is not the man page of {title.lower()}: {text[:300]}")
    unit = open("/lib/systemd/system/aegisd.service").read()
    if "ExecStart=/usr/sbin/aegisd --config /etc/aegis/aegisd.toml" not in unit:
        fail("the unit does not start the installed aegisd with the installed config:\n" + unit)
    if "StateDirectoryMode=0700" not in unit or "KillMode=process" not in unit:
        fail("the unit must keep /var/lib/aegis private and leave jobs running when aegisd stops:\n" + unit)
    r = run("systemd-analyze", "verify", "/lib/systemd/system/aegisd.service", check=False)
    if r.returncode != 0 or "aegisd.service:" in r.stderr:
        fail(f"systemd-analyze verify: rc={r.returncode}\n{r.stdout}{r.stderr}")


def check_config():
    # The installed file holds every setting with its default: uncommented, it means
    # exactly what no file means.
    text = open("/etc/aegis/aegisd.toml").read()
    defaults = run("/usr/sbin/aegisd", "--print-config").stdout
    keys = [line.split(" = ")[0] for line in defaults.splitlines() if " = " in line and not line.startswith("#")]
    if len(keys) < 50:
        fail(f"--print-config lists only {len(keys)} settings")
    for k in keys:
        if not re.search(rf"^#{re.escape(k)} = ", text, re.M):
            fail(f"/etc/aegis/aegisd.toml lacks {k}")
    if run("/usr/sbin/aegisd", "--config", "/etc/aegis/aegisd.toml", "--print-config").stdout != defaults:
        fail("the installed config, as installed, changes a setting")
    uncommented = re.sub(r"^#([a-z_]+ = )", r"\1", text, flags=re.M)
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
        f.write(uncommented)
        f.flush()
        if run("/usr/sbin/aegisd", "--config", f.name, "--print-config").stdout != defaults:
            fail("a default in /etc/aegis/aegisd.toml differs from aegisd's own")


def check_completion():
    def complete(line):
        words = line.split(" ")
        script = ("source /usr/share/bash-completion/completions/aegis; "
                  f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; _aegis; echo \"${{COMPREPLY[@]}}\"")
        return run("bash", "-c", script).stdout.split()
    if "submit" not in complete("aegis su") or "--mem" not in complete("aegis submit --me"):
        fail(f"bash completion: {complete('aegis su')} / {complete('aegis submit --me')}")
    if "--print-default-config" not in complete("aegisd --print"):
        fail(f"bash completion of aegisd: {complete('aegisd --print')}")


def live_daemon():
    """The installed aegisd, installed config, default state and socket places; emulated
    GPUs and a short observation window on the command line."""
    log = tempfile.NamedTemporaryFile("w+", prefix="aegisd-", suffix=".log", delete=False)
    proc = subprocess.Popen(["/usr/sbin/aegisd", "--config", "/etc/aegis/aegisd.toml", "--set", "gpu_backend=emulated",
                             "--set", "emulated_gpus=2x40960", "--set", "durability=normal",
                             "--set", "observation_window_s=1"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def answers():
        if proc.poll() is not None:
            fail("installed aegisd exited: " + open(log.name).read())
        return run("/usr/bin/aegis", "queue", "--json", check=False).returncode == 0
    wait_for("the installed aegisd to answer on /run/aegis/aegisd.sock", answers)
    return proc, log.name


def run_job_and_reload(proc, log):
    gpus = json.loads(run("/usr/bin/aegis", "gpus", "--json").stdout)
    if len(gpus) != 2:
        fail(f"aegis gpus --json: {gpus}")
    job = run("/usr/bin/aegis", "submit", "--name", "packaged", "--", "/usr/bin/aegis-fakejob", "--mem", "2000",
              "--smact", "0.3", "--seconds", "1").stdout.strip()

    def final():
        j = json.loads(run("/usr/bin/aegis", "show", job, "--json").stdout)
        return j if j["state"] in ("completed", "failed", "cancelled") else None
    j = wait_for(f"job {job} to end", final)
    if j["state"] != "completed" or not os.path.isdir(f"/var/lib/aegis/jobs/{job}"):
        fail(f"job through the installed CLI: {j}")
    if os.stat("/var/lib/aegis").st_mode & 0o777 != 0o700:
        fail(f"/var/lib/aegis has mode {oct(os.stat('/var/lib/aegis').st_mode & 0o777)}, not 0700")

    # SIGHUP: a live setting applies, an engine parameter waits for a restart (one line).
    with open("/etc/aegis/aegisd.toml", "a") as f:
        f.write("\nmax_jobs_per_user = 1\nsmact_threshold = 0.5\n")
    os.kill(proc.pid, signal.SIGHUP)
    line = ("aegisd: reload: applied max_jobs_per_user; changed but kept until a restart "
            "(systemctl restart aegisd): smact_threshold")
    wait_for("the reload line in aegisd's log", lambda: line in open(log).read())
    long_job = run("/usr/bin/aegis", "submit", "--", "/bin/sleep", "60").stdout.strip()
    r = run("/usr/bin/aegis", "submit", "--", "/bin/true", check=False)
    if r.returncode == 0 or "max_jobs_per_user" not in r.stderr:
        fail(f"max_jobs_per_user = 1 not applied by SIGHUP: rc={r.returncode} {r.stderr}")
    run("/usr/bin/aegis", "cancel", long_job)
    wait_for("the sleep job to be cancelled",
             lambda: json.loads(run("/usr/bin/aegis", "show", long_job, "--json").stdout)["state"] == "cancelled")


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=60)


def main(build):
    if os.geteuid() != 0 or not shutil.which("dpkg") or not shutil.which("cpack"):
        print("skipped: needs root, dpkg and cpack")
        return 77
    if installed("aegis") or any(os.path.exists(p) for p in KEPT + ["/run/aegis"]):
        print("skipped: aegis is installed here (or its directories exist); not touching it")
        return 77
    out, deb = build_package(os.path.abspath(build))
    proc = None
    try:
        check_control(deb)
        run("dpkg", "-i", deb)
        listed = [p for p in run("dpkg-query", "-L", "aegis").stdout.split("\n") if os.path.isfile(p)]
        check_files()
        check_config()
        check_completion()
        proc, log = live_daemon()
        run_job_and_reload(proc, log)
        stop(proc)
        run("dpkg", "-r", "aegis")
        left = [p for p in listed if os.path.lexists(p)]
        if left != ["/etc/aegis/aegisd.toml"] or not os.path.isfile("/var/lib/aegis/aegis.db"):
            fail(f"after dpkg -r: left {left}; /var/lib/aegis kept: {os.path.isdir('/var/lib/aegis')}")
        run("dpkg", "--purge", "aegis")
        left = [p for p in listed + KEPT + ["/run/aegis"] if os.path.lexists(p)]
        if left or installed("aegis"):
            fail(f"after dpkg --purge: left {left}")
    finally:
        if proc:
            stop(proc)
        if installed("aegis") or run("dpkg-query", "-W", "aegis", check=False).returncode == 0:
            run("dpkg", "--purge", "aegis", check=False)
        shutil.rmtree(out, ignore_errors=True)
    print("package: built, installed, checked, ran a job, reloaded, removed and purged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
