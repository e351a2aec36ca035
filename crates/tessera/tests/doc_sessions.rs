//! The CLI session in the README works verbatim: every `$ ` command runs (under bash, with the
//! `tessera` under test first on PATH and TESSERA_ADDR pointing at a fresh `tessera dev`) and
//! prints exactly the lines the README shows under it.

mod common;

use std::path::Path;
use std::process::Command;

use common::{console_steps, DevServer, TESSERA};

#[test]
fn readme_session_runs_verbatim() {
    run_session("<!-- session:start -->", "<!-- session:end -->", 10);
}

#[test]
fn readme_placements_session_runs_verbatim() {
    run_session("<!-- placements:start -->", "<!-- placements:end -->", 14);
}

#[test]
fn readme_documents_session_runs_verbatim() {
    run_session("<!-- documents:start -->", "<!-- documents:end -->", 14);
}

/// The session of "Regions that fit the data": against a `tessera dev` that re-cuts nothing by
/// itself (the session re-cuts by hand).
#[test]
fn readme_spread_session_runs_verbatim() {
    run_session_with(
        "<!-- spread:start -->",
        "<!-- spread:end -->",
        7,
        &["--recut-period-s", "0"],
    );
}

/// Runs the README's console block between `start` and `end` (at least `steps_min` commands)
/// against a fresh `tessera dev`, in the repository's root (a session may run its scripts).
fn run_session(start: &str, end: &str, steps_min: usize) {
    run_session_with(start, end, steps_min, &[]);
}

/// [`run_session`] with `dev_args` given to `tessera dev`.
fn run_session_with(start: &str, end: &str, steps_min: usize, dev_args: &[&str]) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let steps = console_steps(&readme, start, end);
    assert!(steps.len() >= steps_min, "the session has its steps");

    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start_with(dev_args, dir.path());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin_dir = Path::new(TESSERA).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for step in &steps {
        let out = Command::new("bash")
            .args(["-c", &step.command])
            .env("PATH", &path)
            .env("TESSERA_ADDR", &server.addr)
            .current_dir(&root)
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
}
