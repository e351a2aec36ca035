"""The one benchmark harness: every script in scripts/bench-* (and fsync-interference.py) starts
its servers, pins CPUs, waits for a quiet machine and records provenance through this module.

* the binary: `release_bin(script)` is TESSERA_BIN, or the release build (with the peer stores'
  clients), built then;
* pinning: `pin(cpu)` is the `taskset -c CPU` prefix (none when taskset is missing or cpu is
  empty); `cpus(server, client)` reads the SERVER_CPU/CLIENT_CPU knobs with a script's defaults;
* servers: a fresh `tessera dev` (`Tessera`, with any `dev` flags, e.g. a cluster in one process),
  PostgreSQL, Redis, etcd and Cassandra of their own, all pinned to SERVER_CPU and stopped by
  `stop()`;
* quiet: `wait_quiet(own)` waits until processes other than `own` (a pid or a list) use fewer
  than QUIET_CORES cores, at most QUIET_MAX_WAIT seconds;
* recording: `stamp(row, quiet)` adds one "provenance" object (other_cores_before, git, commit,
  bin, server_cpu, client_cpu, date) to a result row;
* free ports, CPU accounting from /proc, the disk's own fdatasync latency, medians and ratios.

A script calls `configure(...)` once, then uses the rest. Shell scripts without Python use the
command line: `benchkit.py bin SCRIPT` (the binary's path), `pin CPU`, `quiet [--cores C] [--max-wait S] [PID...]` (prints the
other cores), `watch OUT PID...` (their timeline while the last PID runs), `port`, and
`stamp --bin B --server-cpu S --client-cpu C [--quiet X]` (a JSON row on stdin, stamped on
stdout). Only 127.0.0.1 is ever used.
"""
import atexit, functools, glob, json, os, pwd, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

NAME = "bench"
OUT = BIN = None
SERVER_CPU = "0"
CLIENT_CPU = "1"
QUIET_CORES = 0.3
QUIET_MAX_WAIT = 300.0
CLK = os.sysconf("SC_CLK_TCK")


def configure(name, out, bin_, server_cpu, quiet_cores=0.3, quiet_max_wait=300.0, client_cpu="1"):
    """The script's name (for messages), its working directory, the tessera binary, the CPU
    lists servers and clients are pinned to, and what counts as a quiet machine."""
    global NAME, OUT, BIN, SERVER_CPU, CLIENT_CPU, QUIET_CORES, QUIET_MAX_WAIT
    NAME, OUT, BIN, SERVER_CPU, CLIENT_CPU = name, out, bin_, server_cpu, client_cpu
    QUIET_CORES, QUIET_MAX_WAIT = quiet_cores, quiet_max_wait


def cpus(server="0", client="1"):
    """The SERVER_CPU and CLIENT_CPU knobs, with the script's defaults ("" means unpinned)."""
    return os.environ.get("SERVER_CPU", server), os.environ.get("CLIENT_CPU", client)

def pin(cpu):
    """`taskset -c CPU` to put before a command; nothing when cpu is empty or taskset is
    missing, so a script still runs (unpinned) where taskset is not installed."""
    return ["taskset", "-c", cpu] if cpu and shutil.which("taskset") else []

def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()

@functools.lru_cache(maxsize=None)
def _source():
    # Once per script: the checkout does not change under a run (or the run says so by "-dirty").
    return git("describe", "--always", "--dirty"), git("rev-parse", "HEAD")

def provenance(quiet=None, bin_=None, server_cpu=None, client_cpu=None):
    """What every result row records about where it came from. Pins are None when unpinned."""
    server_cpu = SERVER_CPU if server_cpu is None else server_cpu
    client_cpu = CLIENT_CPU if client_cpu is None else client_cpu
    described, commit = _source()
    return {"other_cores_before": None if quiet is None else round(quiet, 3),
            "git": described, "commit": commit, "bin": bin_ or BIN,
            "server_cpu": server_cpu if pin(server_cpu) else None,
            "client_cpu": client_cpu if pin(client_cpu) else None,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

def stamp(row, quiet=None, **kw):
    """Adds the provenance to a result row (a dict) and returns the row."""
    row["provenance"] = provenance(quiet, **kw)
    return row


def log(*a):
    print(f"{NAME}:", *a, file=sys.stderr, flush=True)

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

def machine_busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]) - v[3] - v[4]

def children(pid):
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(stat.split("/")[2]))
        except (OSError, ValueError, IndexError):
            pass
    return out

def cpu_s(pid):
    """user+system CPU seconds of a process and its children (PostgreSQL's backends), those
    still running and those that ended and were waited for (the process's cutime and
    cstime), so the total never goes down when a backend exits."""
    total = 0.0
    for p in [pid] + children(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK
            if p == pid:
                total += (int(fields[13]) + int(fields[14])) / CLK
        except (OSError, ValueError, IndexError):
            pass
    return total

def other_cores(own=(), seconds=2.0):
    """Cores used over `seconds` by every process but `own` (pids, with their children)."""
    b0 = machine_busy_jiffies(); s0 = sum(map(cpu_s, own)); t0 = time.time()
    time.sleep(seconds)
    b1 = machine_busy_jiffies(); s1 = sum(map(cpu_s, own))
    return max(0.0, (b1 - b0) / CLK - (s1 - s0)) / (time.time() - t0)

def wait_quiet(own=(), sample_s=2.0, pause_s=5.0):
    """Waits until processes other than `own` (a pid or a list: our idle servers) use fewer than
    QUIET_CORES cores, at most QUIET_MAX_WAIT seconds; returns the last sample (other cores)."""
    own = [own] if isinstance(own, int) else list(own)
    start = time.time()
    while True:
        other = other_cores(own, sample_s)
        if other < QUIET_CORES or time.time() - start > QUIET_MAX_WAIT:
            if other >= QUIET_CORES:
                log(f"machine still busy ({other:.2f} other cores); running anyway")
            return other
        log(f"machine busy ({other:.2f} other cores, load {os.getloadavg()[0]:.2f}); waiting")
        time.sleep(pause_s)

# --- PostgreSQL: its own cluster in a temporary directory ---------------------------------------
def pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    sys.exit(f"{NAME}: {name} not found (Debian: apt-get install postgresql)")

class Postgres:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="tessera-pg.")
        self.data = os.path.join(self.root, "data")
        self.log = os.path.join(self.root, "postgres.log")
        self.prefix = []
        if os.geteuid() == 0:
            # initdb and postgres refuse to run as root.
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        os.chmod(self.root, 0o700)
        self.port = None
        self.pid = None

    def run(self, args, **kw):
        return subprocess.run(self.prefix + args, check=True, capture_output=True, text=True, **kw)

    def start(self):
        self.run([pg_bin("initdb"), "-D", self.data, "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-locale"])
        for attempt in range(5):
            self.port = free_port()
            opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                    f"-c unix_socket_directories={self.root}")
            try:
                # taskset on pg_ctl: the postmaster and every backend inherit the CPU list.
                self.run([*pin(SERVER_CPU), pg_bin("pg_ctl"), "-D", self.data,
                          "-l", self.log, "-w", "-t", "60", "-o", opts, "start"])
                with open(os.path.join(self.data, "postmaster.pid")) as f:
                    self.pid = int(f.readline())
                return
            except subprocess.CalledProcessError as e:
                log(f"pg_ctl start failed on port {self.port} (attempt {attempt + 1}): {e.stderr.strip()}")
        sys.exit(f"{NAME}: cannot start PostgreSQL")

    @property
    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def version(self):
        return subprocess.run([pg_bin("postgres"), "--version"], capture_output=True, text=True).stdout.strip()

    def checkpoint(self):
        psql = shutil.which("psql")
        if psql:
            subprocess.run([psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                            "-d", "postgres", "-q", "-c", "CHECKPOINT"], capture_output=True)

    def stop(self):
        if self.pid is not None:
            try:
                self.run([pg_bin("pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"])
            except subprocess.CalledProcessError as e:
                log(f"pg_ctl stop: {e.stderr.strip()}")
            self.pid = None
        shutil.rmtree(self.root, ignore_errors=True)

def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total

# --- Tessera: a fresh `tessera dev` per run and system ------------------------------------------
class Tessera:
    """A fresh `tessera dev` (any `dev` flags in `args`: `--servers 4 --replicas 2` is a cluster
    in one process) on a free port, pinned to SERVER_CPU, its data under OUT/name. Every one
    started is in LIVE until stopped, and its pid in OUT/pids (a shell trap may stop leftovers)."""
    def __init__(self, name, args=(), bin_=None, env=None):
        self.name = name
        for attempt in range(5):
            self.dir = os.path.join(OUT, name)
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            port = free_port()
            self.logf = open(os.path.join(OUT, name + ".log"), "w")
            self.proc = subprocess.Popen(
                [*pin(SERVER_CPU), bin_ or BIN, "dev", "--data-dir", os.path.join(self.dir, "data"),
                 "--listen", f"127.0.0.1:{port}", *args],
                stdout=subprocess.PIPE, stderr=self.logf, text=True, env=env)
            self.pid = self.proc.pid
            with open(os.path.join(OUT, "pids"), "a") as f:
                f.write(f"{self.pid}\n")
            LIVE.append(self)
            line = self.proc.stdout.readline()  # "tessera dev: ready on ADDR ...", or EOF
            if f"ready on 127.0.0.1:{port}" in line and self.proc.poll() is None:
                self.addr = f"127.0.0.1:{port}"
                self.url = f"tessera://{self.addr}"
                return
            self.stop()
            log(f"tessera dev did not start on port {port} (attempt {attempt + 1}): see {self.logf.name}")
        sys.exit(f"{NAME}: cannot start tessera dev")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self in LIVE:
            LIVE.remove(self)
        self.logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)

LIVE = []

@atexit.register
def stop_all():
    """Whatever a script started and did not stop (an exception, a signal turned into exit)."""
    for t in list(LIVE):
        t.stop()


# --- Redis: a server of its own, every write fsynced -------------------------------------------
class Redis:
    """redis-server with its append-only file fsynced on every write (`appendfsync always`),
    so it acknowledges a write once it is on disk, as the other systems here do. With
    `appendfsync="everysec"` it fsyncs once a second instead (a write acknowledged before it is
    durable): the issue's baseline for YCSB E."""
    def __init__(self, name, appendfsync="always"):
        self.name = name
        self.root = tempfile.mkdtemp(prefix="tessera-redis.")
        self.proc = self.pid = self.port = None
        for attempt in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [*pin(SERVER_CPU), "redis-server", "--port", str(self.port),
                 "--bind", "127.0.0.1", "--dir", self.root, "--save", "", "--appendonly", "yes",
                 "--appendfsync", appendfsync, "--daemonize", "no",
                 "--logfile", os.path.join(OUT, name + ".log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 10
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                        s.sendall(b"PING\r\n")
                        if s.recv(16).startswith(b"+PONG"):
                            self.pid = self.proc.pid
                            return
                except OSError:
                    time.sleep(0.05)
            self.proc.kill()
            self.proc.wait()
            log(f"redis-server did not start on port {self.port} (attempt {attempt + 1})")
        sys.exit(f"{NAME}: cannot start redis-server (Debian: apt-get install redis-server)")

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def version(self):
        return subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

# --- etcd: one member of its own in a temporary directory ---------------------------------------
class Etcd:
    """One etcd member (Debian's etcd-server) with its data in a temporary directory. Its
    defaults make a write durable (the WAL is fsynced before a write is acknowledged); the
    backend quota is raised to 8 GiB so a long load never meets `database space exceeded`.
    No auto-compaction: the runs are short and keep every revision, as etcd's default does."""
    def __init__(self, name):
        if not shutil.which("etcd"):
            sys.exit(f"{NAME}: etcd not found (Debian: apt-get install etcd-server)")
        self.root = tempfile.mkdtemp(prefix="tessera-etcd.")
        self.proc = self.pid = self.port = None
        for attempt in range(5):
            self.port, peer = free_port(), free_port()
            client_url, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
            shutil.rmtree(os.path.join(self.root, "data"), ignore_errors=True)
            self.logf = open(os.path.join(OUT, name + ".log"), "w")
            self.proc = subprocess.Popen(
                [*pin(SERVER_CPU), "etcd", "--name", "bench",
                 "--data-dir", os.path.join(self.root, "data"),
                 "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                 "--initial-cluster", f"bench={peer_url}",
                 "--quota-backend-bytes", str(8 << 30)],
                stdout=subprocess.DEVNULL, stderr=self.logf)
            deadline = time.time() + 30
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"{client_url}/health", timeout=2) as r:
                        if b'"health":"true"' in r.read():
                            self.pid = self.proc.pid
                            return
                except OSError:
                    pass
                time.sleep(0.1)
            self.proc.kill()
            self.proc.wait()
            log(f"etcd did not start on port {self.port} (attempt {attempt + 1})")
        sys.exit(f"{NAME}: cannot start etcd")

    @property
    def url(self):
        return f"etcd://127.0.0.1:{self.port}"

    def version(self):
        out = subprocess.run(["etcd", "--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0].strip() if out else "etcd"

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

# --- Cassandra: one node of its own, through scripts/cassandra.sh -------------------------------
CASSANDRA_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cassandra.sh")

class Cassandra:
    """One Cassandra 5.0 node (jars from Maven Central, cached by `cassandra.sh fetch`, which
    downloads them the first time only) with its data in a temporary directory, pinned to
    SERVER_CPU, the commit log fsynced before a write is acknowledged (`commitlog_sync: batch`)."""
    def __init__(self, name):
        self.root = tempfile.mkdtemp(prefix="tessera-cassandra.")
        self.pid = self.addr = None
        subprocess.run(["bash", CASSANDRA_SH, "fetch"], check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ, CASSANDRA_CPU=SERVER_CPU)
        res = subprocess.run(["bash", CASSANDRA_SH, "start", self.root], env=env,
                             capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"{NAME}: cannot start Cassandra: {res.stderr.strip()}")
        self.addr = res.stdout.strip()
        with open(os.path.join(self.root, "pid")) as f:
            self.pid = int(f.read())
        shutil.copy(os.path.join(self.root, "conf", "cassandra.yaml"), os.path.join(OUT, name + ".yaml"))

    @property
    def url(self):
        return f"cql://{self.addr}"

    def version(self):
        cache = subprocess.run(["bash", CASSANDRA_SH, "dir"], capture_output=True, text=True).stdout.strip()
        return "Apache Cassandra " + os.path.basename(cache).removeprefix("cassandra-")

    def stop(self):
        if self.pid is not None:
            subprocess.run(["bash", CASSANDRA_SH, "stop", self.root])
            log_src = os.path.join(self.root, "logs", "system.log")
            if os.path.exists(log_src):
                shutil.copy(log_src, os.path.join(OUT, f"cassandra-{self.pid}.log"))
            self.pid = None
        shutil.rmtree(self.root, ignore_errors=True)


def med(xs):
    return round(statistics.median(xs), 1)

def fdatasync_latencies(path, probes, seconds=0.0):
    """The disk's own durable write, the physical limit a write path is measured against:
    4 KiB overwritten in place in a preallocated (written, synced) 4 MiB file at `path`, then
    fdatasync; `probes` of them and for `seconds` at least. Latencies in µs; the file is removed."""
    block = os.urandom(4096)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, bytes(4 << 20))
        os.fsync(fd)
        lat = []
        until = time.time() + seconds
        while len(lat) < probes or time.time() < until:
            os.pwrite(fd, block, (len(lat) % 1024) * 4096)
            t0 = time.perf_counter_ns()
            os.fdatasync(fd)
            lat.append((time.perf_counter_ns() - t0) / 1000)
        return lat
    finally:
        os.close(fd)
        os.unlink(path)

def latency_percentiles(lat):
    """p50, p99, p999 and max of latencies in µs, rounded."""
    lat = sorted(lat)
    q = lambda f: round(lat[min(len(lat) - 1, int(f * len(lat)))])
    return {"p50_us": q(0.5), "p99_us": q(0.99), "p999_us": q(0.999), "max_us": round(lat[-1])}

def ratio(a, b):
    """a/b to 3 significant digits (ratios here span 0.001 to 10), None without b."""
    return float(f"{a / b:.3g}") if b else None


def watch(out, pids):
    """The other cores' timeline while pids[-1] runs; a sample during which one of `pids` ended
    is dropped (its CPU would count as someone else's)."""
    samples = []
    while os.path.exists(f"/proc/{pids[-1]}"):
        o = other_cores(pids)
        if all(os.path.exists(f"/proc/{p}") for p in pids):
            samples.append([round(time.time(), 1), round(o, 3)])
    with open(out, "w") as f:
        json.dump(samples, f)

def release_bin(script):
    """The tessera binary a benchmark runs: TESSERA_BIN if given, else the release build with
    the peer stores' clients (as `make bench-build`), built now by $CARGO (cargo), its output
    on stderr."""
    given = os.environ.get("TESSERA_BIN")
    if given:
        return given
    cmd = [os.environ.get("CARGO", "cargo"), "build", "--release", "--locked", "-p", "tessera",
           "--features", "peers"]
    print(f"{script}:", *cmd, file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(os.getcwd(), "target")
    return os.path.join(target, "release", "tessera")


def main(argv):
    """The command line, for scripts in plain shell (see the module's docstring)."""
    import argparse
    ap = argparse.ArgumentParser(prog="benchkit.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pin", help="print the taskset prefix for a CPU list (nothing without taskset)")
    p.add_argument("cpu")
    q = sub.add_parser("quiet", help="wait for a quiet machine; print the other cores' last sample")
    q.add_argument("--cores", type=float, default=QUIET_CORES)
    q.add_argument("--max-wait", type=float, default=QUIET_MAX_WAIT)
    q.add_argument("pids", nargs="*", type=int)
    sub.add_parser("port", help="print a free loopback port")
    b = sub.add_parser("bin", help="print the tessera binary to run: TESSERA_BIN, or the release "
                                   "build, built now")
    b.add_argument("script", help="the calling script's name, for the build's log line")
    w = sub.add_parser("watch", help="sample the other cores every 2 s while the last pid lives; "
                                     "write [[unix time, cores], ...] to OUT")
    w.add_argument("out")
    w.add_argument("pids", nargs="+", type=int)
    r = sub.add_parser("stamp", help="add the provenance to the JSON object on stdin")
    r.add_argument("--bin", required=True)
    r.add_argument("--server-cpu", default="")
    r.add_argument("--client-cpu", default="")
    r.add_argument("--quiet", type=float)
    a = ap.parse_args(argv)
    if a.cmd == "pin":
        print(" ".join(pin(a.cpu)))
    elif a.cmd == "port":
        print(free_port())
    elif a.cmd == "bin":
        print(release_bin(a.script))
    elif a.cmd == "watch":
        watch(a.out, a.pids)
    elif a.cmd == "quiet":
        configure("benchkit.py", None, None, "", a.cores, a.max_wait)
        print(round(wait_quiet(a.pids), 3))
    else:
        row = stamp(json.load(sys.stdin), a.quiet, bin_=a.bin, server_cpu=a.server_cpu,
                    client_cpu=a.client_cpu)
        print(json.dumps(row))

if __name__ == "__main__":
    main(sys.argv[1:])
