//! docs/operations.md's systemd units are what systemd and `tessera` accept: each unit's
//! command line, expanded as systemd expands it (`%i`, `$SEC` split at whitespace from the
//! page's `/etc/tessera/env`), is parsed by this build's `tessera` (every flag and value: the
//! line ends with `--help`, which clap reaches only once everything before it parsed), and
//! `systemd-analyze verify` finds nothing to say about either unit where systemd is installed.
//! The units are not run under systemd here (no systemd in the test machine's containers).

mod common;

use std::path::Path;
use std::process::Command;

use common::TESSERA;

/// The instance the template unit is checked as (a port, as on the page).
const INSTANCE: &str = "2001";

fn operations_page() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"))
        .expect("docs/operations.md")
}

/// The bodies of the page's fenced blocks in `language`, in order.
fn blocks<'a>(page: &'a str, language: &str) -> Vec<&'a str> {
    let fence = format!("```{language}\n");
    page.split(fence.as_str())
        .skip(1)
        .map(|rest| &rest[..rest.find("```").expect("a closed block")])
        .collect()
}

/// The words `SEC` holds in the page's `/etc/tessera/env`.
fn sec_words(page: &str) -> Vec<String> {
    let line = blocks(page, "sh")
        .into_iter()
        .flat_map(str::lines)
        .find_map(|l| l.strip_prefix("SEC="))
        .expect("the env file's SEC= line");
    line.split_whitespace().map(String::from).collect()
}

/// The unit's `ExecStart=` as systemd runs it: continuation lines joined, `%i` replaced,
/// `$SEC` (a word of its own) split into its words. The lines hold no quotes, so splitting at
/// whitespace is what systemd does too (asserted).
fn exec_start(unit: &str, sec: &[String]) -> Vec<String> {
    let joined = unit.replace("\\\n", " ");
    let line = joined
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart= line");
    assert!(
        !line.contains(['"', '\'']),
        "quotes in ExecStart: the expansion here would be wrong"
    );
    line.replace("%i", INSTANCE)
        .split_whitespace()
        .flat_map(|word| match word {
            "$SEC" => sec.to_vec(),
            w => {
                assert!(!w.contains('$'), "an unexpanded variable: {w}");
                vec![w.to_string()]
            }
        })
        .collect()
}

#[test]
fn the_units_command_lines_parse() {
    let page = operations_page();
    let units = blocks(&page, "ini");
    assert_eq!(
        units.len(),
        2,
        "the coordinator's unit and the servers' template"
    );
    let sec = sec_words(&page);
    assert!(
        sec.contains(&"--cluster-secret-file".to_string()),
        "{sec:?}"
    );
    for (unit, role) in units.iter().zip(["coordinator", "server"]) {
        let words = exec_start(unit, &sec);
        assert_eq!(words[0], "/usr/local/bin/tessera");
        assert_eq!(words[1], role);
        let out = Command::new(TESSERA)
            .args(&words[1..])
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tessera refuses the {role} unit's command line {words:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: tessera"));
    }
    // The template's instance is the port: it listens, advertises and serves metrics by it.
    let server = exec_start(units[1], &sec).join(" ");
    for wanted in [
        "--listen 0.0.0.0:2001",
        "--advertise a:2001",
        "--http 0.0.0.0:12001",
    ] {
        assert!(server.contains(wanted), "{wanted} not in {server}");
    }
}

#[test]
fn systemd_verifies_the_units() {
    let found = Command::new("systemd-analyze").arg("--version").output();
    if !found.map(|o| o.status.success()).unwrap_or(false) {
        eprintln!("SKIPPED: systemd-analyze is not installed (Debian: apt-get install systemd)");
        return;
    }
    let page = operations_page();
    let units = blocks(&page, "ini");
    let dir = tempfile::tempdir().unwrap();
    // The binary the page installs is not on this machine: the unit points at this build's.
    let files = [
        ("tessera-coordinator.service", units[0]),
        ("tessera-server@.service", units[1]),
    ];
    for (name, unit) in files {
        std::fs::write(
            dir.path().join(name),
            unit.replace("/usr/local/bin/tessera", TESSERA),
        )
        .unwrap();
    }
    std::fs::copy(
        dir.path().join("tessera-server@.service"),
        dir.path()
            .join(format!("tessera-server@{INSTANCE}.service")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join("tessera-coordinator.service"))
        .arg(
            dir.path()
                .join(format!("tessera-server@{INSTANCE}.service")),
        )
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
}
