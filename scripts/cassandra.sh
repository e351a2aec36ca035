#!/usr/bin/env bash
# Apache Cassandra 5.0 for the benchmarks and the bench crate's CQL test, without Docker or a
# tarball: its jars from Maven Central (cassandra-all and its runtime dependencies), run by the
# machine's Java 17 with a minimal configuration in a directory of the caller's.
#
#   scripts/cassandra.sh fetch          jars into $CASSANDRA_CACHE/lib (once: a second fetch
#                                       finds them and downloads nothing); prints that directory
#   scripts/cassandra.sh start DIR      writes DIR/conf/cassandra.yaml and DIR/conf/logback.xml,
#                                       starts Cassandra in the background (data, commit log,
#                                       hints and saved caches under DIR), waits until its CQL
#                                       port answers, prints "127.0.0.1:PORT"; pid in DIR/pid
#   scripts/cassandra.sh stop DIR       stops it (SIGTERM, then SIGKILL after 30 s)
#
# Knobs (environment): CASSANDRA_VERSION=5.0.8, CASSANDRA_CACHE=~/.cache/tessera-bench/
#   cassandra-$CASSANDRA_VERSION, CASSANDRA_HEAP=1G, CASSANDRA_CQL_PORT (free port by default),
#   CASSANDRA_CPU (a taskset CPU list for the server; unset: not pinned), CASSANDRA_START_S=180.
#
# Durable as a benchmark against fsyncing systems needs: `commitlog_sync: batch`, so a write is
# acknowledged only after the commit log holding it is fsynced (Cassandra 5.0 has no batch window
# any more: every batch is synced as soon as it is written). Everything listens on 127.0.0.1 only;
# JMX is off (no jmx port property is set), and so is the sstable auto-snapshot. Needs java (17),
# and mvn (3.8) for fetch. Ports: CQL as asked, storage on a free port (one node, no peers).
set -euo pipefail

VERSION="${CASSANDRA_VERSION:-5.0.8}"
CACHE="${CASSANDRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera-bench/cassandra-$VERSION}"
HEAP="${CASSANDRA_HEAP:-1G}"
START_S="${CASSANDRA_START_S:-180}"

die() { echo "cassandra.sh: $*" >&2; exit 2; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

fetch() {
    if [ -f "$CACHE/complete" ]; then
        echo "$CACHE"
        return
    fi
    command -v mvn >/dev/null || die "mvn not found (Debian: apt-get install maven)"
    mkdir -p "$CACHE"
    local work
    work="$(mktemp -d)"
    # A project whose only dependency is cassandra-all: copy-dependencies puts the jar and
    # everything it needs at run time into lib/.
    cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tessera.bench</groupId>
  <artifactId>cassandra-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
    echo "cassandra.sh: fetching cassandra-all $VERSION and its dependencies into $CACHE/lib" >&2
    rm -rf "$CACHE/lib"
    mvn -B -q -f "$work/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$CACHE/lib" >&2 ||
        die "mvn could not fetch cassandra-all $VERSION (see above)"
    rm -rf "$work"
    touch "$CACHE/complete"
    echo "$CACHE"
}

# The JVM options of Cassandra 5.0's conf/jvm-server.options and conf/jvm17-server.options that
# a server on Java 17 needs (module access for its off-heap and reflection tricks, G1), with a
# small heap for a 2-core machine.
jvm_options() {
    local dir="$1"
    local opens=(
        java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref
        java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module
        java.base/jdk.internal.util.jar jdk.management/com.sun.management.internal
        java.base/sun.nio.ch java.base/java.io java.base/java.lang.reflect
        jdk.compiler/com.sun.tools.javac java.base/java.lang java.base/java.util
    )
    local exports=(
        java.base/jdk.internal.misc java.management.rmi/com.sun.jmx.remote.internal.rmi
        java.rmi/sun.rmi.registry java.rmi/sun.rmi.server java.sql/java.sql
        java.base/java.lang.ref jdk.unsupported/sun.misc
        jdk.compiler/com.sun.tools.javac.file jdk.attach/sun.tools.attach
    )
    local o
    for o in "${exports[@]}"; do printf '%s\n' --add-exports "$o=ALL-UNNAMED"; done
    for o in "${opens[@]}"; do printf '%s\n' --add-opens "$o=ALL-UNNAMED"; done
    printf '%s\n' \
        "-Xms$HEAP" "-Xmx$HEAP" -Xss256k -XX:+UseG1GC -XX:+ParallelRefProcEnabled \
        -XX:MaxTenuringThreshold=1 -XX:G1HeapRegionSize=16m -XX:MaxGCPauseMillis=300 \
        -XX:+UseTLAB -XX:+ResizeTLAB \
        -XX:+PerfDisableSharedMem -XX:+ExitOnOutOfMemoryError \
        -Djdk.attach.allowAttachSelf=true -Djava.net.preferIPv4Stack=true \
        -Dio.netty.tryReflectionSetAccessible=true -Dio.netty.allocator.useCacheForAllThreads=true \
        -Dio.netty.allocator.maxOrder=11 \
        -Dcassandra-foreground=yes -Dcassandra.config="file://$dir/conf/cassandra.yaml" \
        -Dcassandra.logdir="$dir/logs" -Dcassandra.storagedir="$dir/data" \
        -Dlogback.configurationFile="file://$dir/conf/logback.xml" \
        -Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.ring_delay_ms=0
}

write_config() {
    local dir="$1" cql="$2" storage="$3"
    mkdir -p "$dir/conf" "$dir/logs" "$dir/data"
    cat >"$dir/conf/cassandra.yaml" <<EOF
# One node on 127.0.0.1 for a benchmark: scripts/cassandra.sh wrote this.
cluster_name: tessera-bench
num_tokens: 16
allocate_tokens_for_local_replication_factor: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$storage"
listen_address: 127.0.0.1
storage_port: $storage
rpc_address: 127.0.0.1
start_native_transport: true
native_transport_port: $cql
data_file_directories:
  - $dir/data/data
commitlog_directory: $dir/data/commitlog
hints_directory: $dir/data/hints
saved_caches_directory: $dir/data/saved_caches
cdc_raw_directory: $dir/data/cdc_raw
# A write is acknowledged once the commit log holding it is fsynced.
commitlog_sync: batch
commitlog_segment_size: 32MiB
disk_failure_policy: stop
commit_failure_policy: stop
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
auto_snapshot: false
snapshot_on_duplicate_row_detection: false
concurrent_reads: 16
concurrent_writes: 16
concurrent_counter_writes: 16
read_request_timeout: 10000ms
write_request_timeout: 10000ms
range_request_timeout: 20000ms
request_timeout: 20000ms
# Storage-attached indexes (CREATE CUSTOM INDEX ... USING 'StorageAttachedIndex').
sai_options: {}
default_secondary_index: sai
default_secondary_index_enabled: true
EOF
    cat >"$dir/conf/logback.xml" <<EOF
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$dir/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE" /></root>
</configuration>
EOF
}

# Whether something on 127.0.0.1:$1 accepts a connection and answers a CQL OPTIONS frame.
cql_answers() {
    python3 - "$1" <<'PY'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
        # Protocol v4 request header: version, flags, stream, opcode OPTIONS (5), length 0.
        s.sendall(bytes([4, 0, 0, 1, 5, 0, 0, 0, 0]))
        reply = s.recv(9)
        sys.exit(0 if len(reply) == 9 and reply[0] == 0x84 and reply[4] == 6 else 1)
except OSError:
    sys.exit(1)
PY
}

start() {
    local dir="$1"
    command -v java >/dev/null || die "java not found (Debian: apt-get install openjdk-17-jre-headless)"
    [ -f "$CACHE/complete" ] || die "no jars in $CACHE: run scripts/cassandra.sh fetch first"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    local cql="${CASSANDRA_CQL_PORT:-$(free_port)}" storage
    storage="$(free_port)"
    write_config "$dir" "$cql" "$storage"
    local pin=()
    if [ -n "${CASSANDRA_CPU:-}" ]; then pin=(taskset -c "$CASSANDRA_CPU"); fi
    mapfile -t opts < <(jvm_options "$dir")
    # setsid: its own session, so the caller's Ctrl-C does not reach it before stop does. The
    # shell it starts writes its own pid, then becomes taskset, then java (exec keeps the pid).
    rm -f "$dir/pid"
    setsid bash -c 'echo $$ >"$0/pid"; exec "$@"' "$dir" "${pin[@]}" java "${opts[@]}" \
        -cp "$CACHE/lib/*" org.apache.cassandra.service.CassandraDaemon \
        >"$dir/logs/stdout.log" 2>&1 </dev/null &
    local i pid=""
    for i in $(seq 100); do
        [ -s "$dir/pid" ] && pid="$(cat "$dir/pid")" && break
        sleep 0.05
    done
    [ -n "$pid" ] || die "Cassandra's process did not start"
    local deadline=$((SECONDS + START_S))
    until cql_answers "$cql"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$dir/logs/stdout.log" "$dir/logs/system.log" >&2 2>/dev/null || true
            die "Cassandra exited before its CQL port answered (logs in $dir/logs)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            stop "$dir"
            die "Cassandra's CQL port $cql did not answer within ${START_S}s (logs in $dir/logs)"
        fi
        sleep 1
    done
    echo "127.0.0.1:$cql"
}

stop() {
    local dir="$1" pid
    [ -f "$dir/pid" ] || return 0
    pid="$(cat "$dir/pid")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        local i
        for i in $(seq 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
}

case "${1:-}" in
    fetch) fetch ;;
    start) [ $# -eq 2 ] || die "usage: cassandra.sh start DIR"; start "$2" ;;
    stop) [ $# -eq 2 ] || die "usage: cassandra.sh stop DIR"; stop "$2" ;;
    dir) echo "$CACHE" ;;
    *) die "usage: cassandra.sh fetch | start DIR | stop DIR | dir" ;;
esac
