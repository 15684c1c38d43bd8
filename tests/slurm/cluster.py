"""A real Slurm cluster of two nodes on this machine, with aegisd on emulated GPUs behind
each node, for the multi-server tests. Standard library only.

Debian's Slurm 22.05 is built with multiple-slurmd support, so two slurmd instances (n1,
n2) run side by side on their own ports. Around them: a private munged (its own key and
socket), MariaDB and slurmdbd (so that sacct works and accounts GPU memory as the TRES
gres/aegis_mem), slurmctld. Every daemon is started here and stopped by its PID. Each
node's aegisd listens on <dir>/sock/aegisd-<node>.sock; jobs reach theirs through
AEGIS_SOCKET=<dir>/sock/aegisd-%n.sock (`%n` is the Slurm node's name).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
from harness import Daemon  # noqa: E402

NODES = ("n1", "n2")


class Skip(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def which(*names):
    for n in names:
        for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"):
            p = os.path.join(d, n)
            if os.access(p, os.X_OK):
                return p
    return None


def wait_for(what, check, timeout, interval=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = check()
        if v:
            return v
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


class Cluster:
    def __init__(self, build, gpus_per_node="2x40960", aegisd_settings=None):
        if os.geteuid() != 0:
            raise Skip("needs root: slurmd and aegisd start jobs as their users")
        self.bins = {n: which(n) for n in ("munged", "slurmctld", "slurmd", "slurmdbd", "sbatch", "sacct",
                                           "sacctmgr", "scontrol")}
        self.bins["mariadbd"] = which("mariadbd", "mysqld")
        self.bins["install_db"] = which("mariadb-install-db", "mysql_install_db")
        self.bins["mariadb"] = which("mariadb", "mysql")
        missing = [k for k, v in self.bins.items() if not v]
        if missing:
            raise Skip("not installed: " + ", ".join(missing) +
                       " (apt-get install slurm-wlm slurmdbd munge mariadb-server; scripts/deps.sh does)")
        self.build = os.path.abspath(build)
        self.aegis = os.path.join(self.build, "apps/aegis/aegis")
        self.fakejob = os.path.join(self.build, "apps/aegis-fakejob/aegis-fakejob")
        self.gpus_per_node = gpus_per_node
        self.aegisd_settings = aegisd_settings or {}
        self.dir = tempfile.mkdtemp(prefix="aegis-slurm-")
        os.chmod(self.dir, 0o755)
        for sub in ("log", "ctld", "spool", "sock", "munge", "db"):
            os.makedirs(os.path.join(self.dir, sub))
        self.work = os.path.join(self.dir, "work")
        os.makedirs(self.work)
        os.chmod(self.work, 0o1777)
        os.chmod(os.path.join(self.dir, "sock"), 0o755)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.host = socket.gethostname().split(".")[0]
        self.env = dict(os.environ, SLURM_CONF=self.conf,
                        AEGIS_SOCKET=os.path.join(self.dir, "sock", "aegisd-%n.sock"))
        for k in [k for k in self.env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del self.env[k]
        self.daemons = {}
        self.pidfiles = []
        self.db = None

    # --- starting ------------------------------------------------------------------

    def start(self):
        self._start_aegisd()
        self._start_munge()
        self._start_database()
        self._write_slurm_conf()
        self._start_slurmdbd()
        self._start_slurm()

    def _start_aegisd(self):
        for n in NODES:
            path = os.path.join(self.dir, "sock", f"aegisd-{n}.sock")
            # Other users' jobs must reach the emulated GPUs, as they reach /dev/nvidia*.
            state = os.path.join(self.dir, "sock", f"gpus-{n}.state")
            d = Daemon(self.build, gpus=self.gpus_per_node,
                       settings=dict(self.aegisd_settings, socket=path, emulated_state=state))
            d.socket = path
            d.start()
            self.daemons[n] = d
        # What Slurm is told of a node comes from its aegisd (aegis gpus --slurm-conf).
        out = self.daemons["n1"].run_cli("gpus", "--slurm-conf").stdout
        self.gres_line = next(line for line in out.splitlines() if line.startswith("Gres="))
        self.gres_count = self.gres_line.split(":", 1)[1]

    def _start_munge(self):
        m = os.path.join(self.dir, "munge")
        os.chmod(m, 0o755)
        key = os.path.join(m, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(m, "munge.socket")
        pid = os.path.join(m, "munged.pid")
        self._run([self.bins["munged"], "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
                   f"--pid-file={pid}", f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"])
        self.pidfiles.append(pid)
        wait_for("munged", lambda: os.path.exists(self.munge_socket), 60)

    def _start_database(self):
        d = os.path.join(self.dir, "db")
        self.db_port = free_port()
        self.db_socket = os.path.join(d, "mysqld.sock")
        self._run([self.bins["install_db"], f"--datadir={d}/data", "--user=root",
                   "--auth-root-authentication-method=normal", "--skip-test-db"])
        pid = os.path.join(d, "mysqld.pid")
        self.db = subprocess.Popen(
            [self.bins["mariadbd"], "--no-defaults", f"--datadir={d}/data", "--user=root",
             f"--socket={self.db_socket}", f"--port={self.db_port}", "--bind-address=127.0.0.1",
             f"--pid-file={pid}", f"--log-error={d}/error.log", "--innodb-buffer-pool-size=32M"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.pidfiles.append(pid)
        client = [self.bins["mariadb"], "--no-defaults", "-S", self.db_socket, "-u", "root"]
        wait_for("MariaDB", lambda: subprocess.run(client + ["-e", "select 1"], capture_output=True).returncode == 0,
                 120)
        self._run(client + ["-e", "create user 'slurm'@'127.0.0.1' identified by 'aegis-test'; "
                                  "grant all on slurm_acct_db.* to 'slurm'@'127.0.0.1';"])

    def _write_slurm_conf(self):
        d = self.dir
        self.ports = {"ctld": free_port(), "dbd": free_port(), "n1": free_port(), "n2": free_port()}
        lines = [
            "ClusterName=aegistest",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={self.ports['ctld']}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "DefMemPerCPU=100",
            "SlurmdParameters=config_overrides",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "KillWait=10",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={d}/ctld",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd-%n.log",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={d}/log/jobcomp.txt",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=localhost",
            f"AccountingStoragePort={self.ports['dbd']}",
            f"AccountingStoragePass={self.munge_socket}",
            # GPU memory: a count-only GRES counted in bytes, accounted by sacct (docs/slurm.md).
            "GresTypes=aegis_mem",
            "AccountingStorageTRES=gres/aegis_mem",
        ]
        for i, n in enumerate(NODES):
            # Weights make Slurm fill n1 first, so that tests know where a job lands.
            lines.append(f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={self.ports[n]} "
                         f"CPUs=8 RealMemory=8000 {self.gres_line} Weight={i + 1} State=UNKNOWN")
        lines.append(f"PartitionName=gpu Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(d, "gres.conf"), "w") as f:
            f.write(f"AutoDetect=off\nNodeName={','.join(NODES)} Name=aegis_mem Count={self.gres_count}\n")
        dbd = os.path.join(d, "slurmdbd.conf")
        with open(dbd, "w") as f:
            f.write("\n".join([
                "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}",
                "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={self.ports['dbd']}", "SlurmUser=root",
                "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={self.db_port}",
                "StorageUser=slurm", "StoragePass=aegis-test", "StorageLoc=slurm_acct_db",
                f"LogFile={d}/log/slurmdbd.log", f"PidFile={d}/slurmdbd.pid"]) + "\n")
        os.chmod(dbd, 0o600)

    def _start_slurmdbd(self):
        self._run([self.bins["slurmdbd"]])
        self.pidfiles.append(os.path.join(self.dir, "slurmdbd.pid"))
        wait_for("slurmdbd", lambda: self.cmd("sacctmgr", "-n", "list", "cluster", check=False).returncode == 0, 120)
        self.cmd("sacctmgr", "-i", "add", "cluster", "aegistest")

    def _start_slurm(self):
        self._run([self.bins["slurmctld"], "-f", self.conf])
        self.pidfiles.append(os.path.join(self.dir, "slurmctld.pid"))
        for n in NODES:
            os.makedirs(os.path.join(self.dir, "spool", n), exist_ok=True)
            self._run([self.bins["slurmd"], "-f", self.conf, "-N", n])
            self.pidfiles.append(os.path.join(self.dir, f"slurmd-{n}.pid"))

        def idle():
            r = self.cmd("sinfo", "-h", "-N", "-o", "%N %t", check=False)
            states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
            return all(states.get(n) == "idle" for n in NODES)
        wait_for("both Slurm nodes idle", idle, 120, 0.5)

    def _run(self, argv):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, cwd=self.dir)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip() or r.stdout.strip()}\n{self.logs()}")
        return r

    # --- using it ------------------------------------------------------------------

    def cmd(self, *argv, user=None, check=True, cwd=None):
        argv = list(argv)
        if user:
            argv = ["runuser", "-u", user, "--"] + argv
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, cwd=cwd or self.work)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip() or r.stdout.strip()}")
        return r

    def sbatch(self, *args, user=None, wrap=None, script=None):
        argv = ["sbatch", "--parsable", "-o", os.path.join(self.work, "slurm-%j.out"), "--open-mode=append", *args]
        if wrap:
            argv += ["--wrap", wrap]
        if script:
            argv.append(script)
        return self.cmd(*argv, user=user).stdout.strip().split(";")[0]

    def job(self, job_id):
        """`scontrol show job` as a dict (Comment kept whole)."""
        out = self.cmd("scontrol", "show", "job", "-o", job_id).stdout.strip()
        fields, last = {}, None
        for word in out.split(" "):
            key, eq, value = word.partition("=")
            if eq and key and key[0].isalpha() and all(c.isalnum() or c in "_:/" for c in key):
                fields[key] = value
                last = key
            elif last:
                fields[last] += " " + word
        return fields

    def sacct(self, job_id, duplicates=False):
        """Rows of sacct for the job (allocation lines only): State, ExitCode, NodeList, AllocTRES."""
        argv = ["sacct", "-n", "-X", "-P", "-j", job_id, "--format=JobID,State,ExitCode,NodeList,AllocTRES"]
        if duplicates:
            argv.insert(1, "-D")
        rows = []
        for line in self.cmd(*argv).stdout.splitlines():
            jid, state, code, nodes, tres = line.split("|")
            rows.append({"id": jid, "state": state.split()[0], "exit": code, "nodes": nodes, "tres": tres})
        return rows

    def wait_final(self, job_id, timeout, states=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY")):
        """Waits until sacct records the job as ended; returns its last row."""
        def done():
            rows = self.sacct(job_id)
            return rows[-1] if rows and rows[-1]["state"] in states else None
        return wait_for(f"Slurm job {job_id} to end ({self.job_or_none(job_id)})", done, timeout, 0.5)

    def job_or_none(self, job_id):
        try:
            j = self.job(job_id)
            return f"{j.get('JobState')} {j.get('Reason')} on {j.get('NodeList')}"
        except RuntimeError as e:
            return str(e)

    def aegis_jobs(self, node):
        return self.daemons[node].call("queue", "--all", "--json")

    def aegis_job_of(self, node, slurm_id):
        for j in self.aegis_jobs(node):
            if j["name"] == f"slurm-{slurm_id}" or j["request"].get("env", {}).get("SLURM_JOB_ID") == slurm_id:
                return j
        return None

    def output(self, job_id):
        try:
            return open(os.path.join(self.work, f"slurm-{job_id}.out")).read()
        except OSError:
            return ""

    def logs(self):
        out = []
        for name in sorted(os.listdir(os.path.join(self.dir, "log"))):
            with open(os.path.join(self.dir, "log", name), errors="replace") as f:
                out.append(f"--- {name}\n" + "".join(f.readlines()[-15:]))
        return "\n".join(out)

    # --- stopping ------------------------------------------------------------------

    def stop(self):
        try:
            ids = self.cmd("squeue", "-h", "-o", "%i", check=False).stdout.split()
            if ids:
                self.cmd("scancel", *ids, check=False)
                time.sleep(1)
        except OSError:
            pass
        for pidfile in reversed(self.pidfiles):
            try:
                pid = int(open(pidfile).read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            self._stop_pid(pid)
        if self.db and self.db.poll() is None:
            self.db.kill()
        # Whatever our Slurm started (slurmstepd, batch scripts) carries our SLURM_CONF.
        mine = ("SLURM_CONF=" + self.conf).encode()
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == os.getpid():
                continue
            try:
                with open(f"/proc/{p}/environ", "rb") as f:
                    if mine in f.read().split(b"\0"):
                        os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        for d in self.daemons.values():
            d.cleanup()
        if not os.environ.get("AEGIS_KEEP_SLURM"):
            shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _stop_pid(pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            return
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
