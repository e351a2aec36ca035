//! The CLI session in the README works verbatim: every `$ ` command runs (under bash, with the
//! `tessera` under test first on PATH and TESSERA_ADDR pointing at a fresh `tessera dev`) and
//! prints exactly the lines the README shows under it.

mod common;

use std::path::Path;
use std::process::Command;

use common::{DevServer, TESSERA};

struct Step {
    command: String,
    expected: String,
}

/// The steps of the session between `<!-- session:start -->` and `<!-- session:end -->`. A
/// command with a here-document runs until its terminator line.
fn session(readme: &str) -> Vec<Step> {
    let start = readme.find("<!-- session:start -->").expect("session start marker");
    let end = readme.find("<!-- session:end -->").expect("session end marker");
    let block: Vec<&str> = readme[start..end]
        .lines()
        .skip_while(|l| !l.starts_with("```console"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    let mut steps: Vec<Step> = Vec::new();
    let mut lines = block.into_iter();
    while let Some(line) = lines.next() {
        if let Some(command) = line.strip_prefix("$ ") {
            let mut command = command.to_owned();
            if let Some(at) = command.find("<<'") {
                let terminator = command[at + 3..].split('\'').next().unwrap().to_owned();
                for body in lines.by_ref() {
                    command.push('\n');
                    command.push_str(body);
                    if body == terminator {
                        break;
                    }
                }
            }
            steps.push(Step { command, expected: String::new() });
        } else {
            let step = steps.last_mut().expect("output before any command");
            step.expected.push_str(line);
            step.expected.push('\n');
        }
    }
    steps
}

#[test]
fn readme_session_runs_verbatim() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let steps = session(&readme);
    assert!(steps.len() >= 10, "the session has its steps");

    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(dir.path());
    let bin_dir = Path::new(TESSERA).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    for step in &steps {
        let out = Command::new("bash")
            .args(["-c", &step.command])
            .env("PATH", &path)
            .env("TESSERA_ADDR", &server.addr)
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
