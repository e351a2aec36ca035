"""What the benchmark scripts share (scripts/bench-documents.sh, scripts/bench-peers.sh,
scripts/bench-memory.sh, scripts/bench-cluster.sh's disk probe, scripts/fsync-interference.py):
free ports, the disk's own fdatasync latency, CPU accounting from /proc, waiting for a quiet machine, a
PostgreSQL cluster of its own in a temporary directory, a fresh `tessera dev`, a Redis server,
an etcd member and a Cassandra node of their own, medians and ratios.

A script calls `configure(...)` once, then uses the rest. Only 127.0.0.1 is ever used.
"""
import glob, os, pwd, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

NAME = "bench"
OUT = BIN = None
SERVER_CPU = "0"
QUIET_CORES = 0.3
QUIET_MAX_WAIT = 300.0
CLK = os.sysconf("SC_CLK_TCK")


def configure(name, out, bin_, server_cpu, quiet_cores=0.3, quiet_max_wait=300.0):
    """The script's name (for messages), its working directory, the tessera binary, the CPU
    list servers are pinned to, and what counts as a quiet machine."""
    global NAME, OUT, BIN, SERVER_CPU, QUIET_CORES, QUIET_MAX_WAIT
    NAME, OUT, BIN, SERVER_CPU = name, out, bin_, server_cpu
    QUIET_CORES, QUIET_MAX_WAIT = quiet_cores, quiet_max_wait


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

def wait_quiet(server_pid):
    start = time.time()
    while True:
        b0 = machine_busy_jiffies(); s0 = cpu_s(server_pid); t0 = time.time()
        time.sleep(2)
        b1 = machine_busy_jiffies(); s1 = cpu_s(server_pid); dt = time.time() - t0
        other = max(0.0, (b1 - b0) / CLK - (s1 - s0)) / dt
        if other < QUIET_CORES or time.time() - start > QUIET_MAX_WAIT:
            if other >= QUIET_CORES:
                log(f"machine still busy ({other:.2f} other cores); running anyway")
            return other
        log(f"machine busy ({other:.2f} other cores); waiting")
        time.sleep(5)

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
                self.run(["taskset", "-c", SERVER_CPU, pg_bin("pg_ctl"), "-D", self.data,
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
    def __init__(self, name, args=()):
        self.name = name
        for attempt in range(5):
            self.dir = os.path.join(OUT, name)
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            port = free_port()
            self.logf = open(os.path.join(OUT, name + ".log"), "w")
            self.proc = subprocess.Popen(
                ["taskset", "-c", SERVER_CPU, BIN, "dev", "--data-dir", os.path.join(self.dir, "data"),
                 "--listen", f"127.0.0.1:{port}", *args],
                stdout=subprocess.PIPE, stderr=self.logf, text=True)
            line = self.proc.stdout.readline()
            if f"ready on 127.0.0.1:{port}" in line and self.proc.poll() is None:
                self.url = f"tessera://127.0.0.1:{port}"
                self.pid = self.proc.pid
                return
            self.proc.wait()
            log(f"tessera dev did not start on port {port} (attempt {attempt + 1})")
        sys.exit(f"{NAME}: cannot start tessera dev")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# --- Redis: a server of its own, every write fsynced -------------------------------------------
class Redis:
    """redis-server with its append-only file fsynced on every write (`appendfsync always`),
    so it acknowledges a write once it is on disk, as the other systems here do. With
    `appendfsync="everysec"` it fsyncs once a second instead (a write acknowledged before it is
    durable): the issue's baseline for YCSB E."""
    def __init__(self, name, appendfsync="always"):
        self.root = tempfile.mkdtemp(prefix="tessera-redis.")
        self.proc = self.pid = self.port = None
        for attempt in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["taskset", "-c", SERVER_CPU, "redis-server", "--port", str(self.port),
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
                ["taskset", "-c", SERVER_CPU, "etcd", "--name", "bench",
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
