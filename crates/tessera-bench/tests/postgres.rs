//! The PostgreSQL target against a real PostgreSQL cluster, made by the test (initdb into a
//! temporary directory, started on a free loopback port, stopped when the test ends).
//! Skipped, with a note, when PostgreSQL's programs are not installed: the rest of the crate
//! does not need them (`.ci/run` installs Debian's postgresql where it can).
//!
//! Built with feature `peers` only (`make test` turns it on).
#![cfg(feature = "peers")]

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::args;
use tessera_bench::target::postgres::PostgresTarget;
use tessera_bench::target::Target;
use tessera_bench::{run, BenchError};

/// A PostgreSQL program: on PATH, or in Debian's versioned directory.
fn pg_bin(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .map(|e| e.path().join("bin").join(name))
            .filter(|p| p.is_file())
            .collect();
        versions.sort();
        versions.pop()
    })
}

/// A cluster in a temporary directory; stopped (immediately) when dropped, pass or fail.
struct PgServer {
    root: tempfile::TempDir,
    port: u16,
    /// `runuser -u postgres --` when the test runs as root (initdb and postgres refuse root).
    prefix: Vec<String>,
}

impl PgServer {
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(
            self.prefix
                .first()
                .map_or(program.as_os_str(), |p| p.as_ref()),
        );
        c.args(self.prefix.iter().skip(1));
        if !self.prefix.is_empty() {
            c.arg(program);
        }
        c
    }

    fn start() -> Option<PgServer> {
        let (initdb, pg_ctl) = (pg_bin("initdb")?, pg_bin("pg_ctl")?);
        let root = tempfile::tempdir().expect("temp dir");
        let mut prefix = Vec::new();
        // The effective user, as `id -u` prints it.
        let uid = Command::new("id").arg("-u").output().expect("id -u");
        if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
            let chown = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(root.path())
                .status()
                .expect("chown");
            assert!(chown.success(), "chown the cluster's directory to postgres");
            prefix = ["runuser", "-u", "postgres", "--"]
                .map(str::to_owned)
                .to_vec();
        }
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
            listener.local_addr().expect("local addr").port()
        };
        let server = PgServer { root, port, prefix };
        let data = server.root.path().join("data");
        let out = server
            .command(&initdb)
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
            ])
            .output()
            .expect("initdb");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={}",
            server.port,
            server.root.path().display()
        );
        let out = server
            .command(&pg_ctl)
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(server.root.path().join("postgres.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"])
            .output()
            .expect("pg_ctl start");
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(server)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(pg_ctl) = pg_bin("pg_ctl") {
            let _ = self
                .command(&pg_ctl)
                .arg("-D")
                .arg(self.root.path().join("data"))
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
    }
}

/// YCSB A, E and S against PostgreSQL: the load writes every record, the runs' queries agree
/// with it (checked before timing), and scans and searches find what the load wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_target_loads_runs_scans_and_searches() {
    let Some(server) = PgServer::start() else {
        eprintln!("NOTE: PostgreSQL (initdb, pg_ctl) is not installed; skipping the PostgreSQL target test");
        return;
    };
    let url = server.url();
    for (workload, ops) in [
        ("a", ["read", "update"]),
        ("e", ["insert", "scan"]),
        ("s", ["search", ""]),
    ] {
        let report = run(args(
            &url,
            &[
                "-w",
                workload,
                "--records",
                "1500",
                "--operations",
                "1000",
                "-t",
                "4",
            ],
        ))
        .await
        .unwrap_or_else(|e| panic!("workload {workload} against PostgreSQL: {e}"));
        let load = report.load.expect("load ran");
        assert_eq!(
            (load.operations, load.errors),
            (1500, 0),
            "workload {workload}"
        );
        let run = report.run.expect("run ran");
        assert_eq!(
            (run.operations, run.errors),
            (1000, 0),
            "workload {workload}: {run:?}"
        );
        for op in ops.iter().filter(|o| !o.is_empty()) {
            assert!(
                run.ops[*op].count > 0,
                "workload {workload} ran {op}: {run:?}"
            );
        }
    }
    // Searches on secondary attributes: every query kind agrees with the generator's counts
    // before it is timed, and every search is answered.
    common::secondary_searches_agree_and_run(&url).await;
    let mut target = PostgresTarget::connect(&url).await.expect("connect");
    for n in [0, 999, 1000, 1499] {
        assert!(target.read(n).await.expect("read"), "record {n} missing");
        assert_eq!(target.search(n).await.expect("search"), 1);
    }
    assert_eq!(target.scan(10, 20).await.expect("scan"), 20);
    assert_eq!(
        target.scan(990, 100).await.expect("scan"),
        10,
        "scans stop at the prefix group"
    );
    target.update(10, 3, "changed").await.expect("update");
    assert!(target.read(10).await.expect("read"));

    // A table of that name without the benchmark's columns is refused, not misused.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .batch_execute("DROP TABLE ycsb; CREATE TABLE ycsb (key text PRIMARY KEY)")
        .await
        .expect("replace the table");
    let refused = run(args(
        &url,
        &["-w", "a", "--records", "10", "--operations", "10"],
    ))
    .await;
    assert!(
        matches!(&refused, Err(BenchError::Connect { .. })),
        "{:?}",
        refused.as_ref().err()
    );
}
