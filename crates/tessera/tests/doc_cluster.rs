//! docs/cluster.md's hand-started cluster works as written: the test starts the three
//! `tessera coordinator` and four `tessera server` commands of its "Starting a cluster" section
//! (each as its own process, under bash, with the page's variables), then runs its console
//! session and compares every output. Only the ports change: each port of the page maps to a
//! free one.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{console_steps, free_port, TESSERA};

/// A daemon started from a line of the page; killed when dropped.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `text` with every `127.0.0.1:PORT` moved to a free port (the same port of the page, the same
/// free port everywhere).
fn with_free_ports(text: &str) -> String {
    let mut ports: BTreeMap<String, String> = BTreeMap::new();
    for piece in text.split("127.0.0.1:").skip(1) {
        let port: String = piece.chars().take_while(char::is_ascii_digit).collect();
        ports.entry(port).or_insert_with(|| free_port().to_string());
    }
    // Longest first, so 1982 is never replaced inside 19820.
    let mut ordered: Vec<_> = ports.into_iter().collect();
    ordered.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    let mut out = text.to_owned();
    for (from, to) in ordered {
        out = out.replace(&format!("127.0.0.1:{from}"), &format!("127.0.0.1:{to}"));
    }
    out
}

#[test]
fn cluster_doc_runs_as_written() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cluster.md"),
    )
    .unwrap();
    let start = page
        .find("## Starting a cluster")
        .expect("the cluster section");
    let end = page
        .find("<!-- cluster:end -->")
        .expect("the cluster session's end")
        + "<!-- cluster:end -->".len();
    let section = with_free_ports(&page[start..end]);
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = Path::new(TESSERA).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // The daemons: every `tessera` line of the ```sh blocks, with the block's variables.
    let mut daemons = Vec::new();
    let mut blocks = section.split("```sh\n").skip(1);
    for block in blocks.by_ref().take(2) {
        let block = block.split("```").next().expect("a closed block");
        let variables: Vec<&str> = block
            .lines()
            .filter(|l| !l.starts_with("tessera ") && l.contains('='))
            .collect();
        let commands: Vec<&str> = block
            .lines()
            .filter(|l| l.starts_with("tessera "))
            .collect();
        for command in commands {
            let script = format!("{}\nexec {command}", variables.join("\n"));
            let mut child = Command::new("bash")
                .args(["-c", &script])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("RUST_LOG", "error,openraft=off")
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("starting a daemon");
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped"))
                .read_line(&mut line)
                .expect("a ready line");
            assert!(line.contains(": ready on "), "`{command}` printed {line:?}");
            daemons.push(Started(child));
        }
    }
    assert_eq!(daemons.len(), 7, "three coordinators and four servers");

    let steps = console_steps(&section, "<!-- cluster:start -->", "<!-- cluster:end -->");
    let address = steps[0]
        .command
        .strip_prefix("export TESSERA_ADDR=")
        .expect("the session sets TESSERA_ADDR first");
    for step in &steps {
        let out = Command::new("bash")
            .args(["-c", &step.command])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("TESSERA_ADDR", address)
            .output()
            .expect("running bash");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "`{}` failed: {}\nstderr: {}",
            step.command,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout, step.expected, "output of `{}`", step.command);
    }
    drop(daemons);
}
