//! The CLI sessions of the README and of docs/ work verbatim: every `$ ` command runs (under
//! bash, with the `tessera` under test first on PATH and TESSERA_ADDR pointing at a fresh
//! `tessera dev`) and prints exactly the lines the page shows under it.

mod common;

use std::path::Path;
use std::process::Command;

use common::{console_steps, DevServer, TESSERA};

/// The README's session ("A session").
#[test]
fn readme_session_runs_verbatim() {
    run_session(
        "README.md",
        "<!-- session:start -->",
        "<!-- session:end -->",
        10,
    );
}

/// docs/placements.md's session.
#[test]
fn placements_doc_session_runs_verbatim() {
    run_session(
        "docs/placements.md",
        "<!-- placements:start -->",
        "<!-- placements:end -->",
        14,
    );
}

/// docs/dynamic.md's session.
#[test]
fn dynamic_doc_session_runs_verbatim() {
    run_session(
        "docs/dynamic.md",
        "<!-- documents:start -->",
        "<!-- documents:end -->",
        14,
    );
}

/// docs/cuts.md's session: against a `tessera dev` that re-cuts nothing by itself (the session
/// re-cuts by hand).
#[test]
fn cuts_doc_session_runs_verbatim() {
    run_session_with(
        "docs/cuts.md",
        "<!-- spread:start -->",
        "<!-- spread:end -->",
        7,
        &["--recut-period-s", "0"],
    );
}

/// Runs the console block between `start` and `end` of `page` (a path from the repository's
/// root; at least `steps_min` commands) against a fresh `tessera dev`, in the repository's root
/// (a session may run its scripts).
fn run_session(page: &str, start: &str, end: &str, steps_min: usize) {
    run_session_with(page, start, end, steps_min, &[]);
}

/// [`run_session`] with `dev_args` given to `tessera dev`.
fn run_session_with(page: &str, start: &str, end: &str, steps_min: usize, dev_args: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join(page)).unwrap();
    let steps = console_steps(&text, start, end);
    assert!(steps.len() >= steps_min, "the session has its steps");

    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start_with(dev_args, dir.path());
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
