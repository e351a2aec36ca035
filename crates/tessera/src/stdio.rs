//! What a command reads and prints: its input text (a file, or stdin for `-`) and its output on
//! stdout, where a reader that went away (`tessera status | head`) ends the command quietly.

use std::io::{Read, Write};
use std::path::Path;

use crate::failure::Failure;

/// `tessera status | head`: once the reader of stdout has gone, the command ends quietly (exit
/// 0), as other tools do, rather than with a panic's backtrace (`println!` panics on EPIPE).
pub(crate) fn end_quietly_on_a_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info)
    }));
}

/// Why writing to stdout failed; a reader that went away ends the command quietly, as above.
fn output_failed(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    Failure::Error(format!("writing output: {e}"))
}

/// The text of file `path`, or of stdin for `-`.
pub(crate) fn read_text(path: &Path) -> Result<String, Failure> {
    if path.as_os_str() != "-" {
        return std::fs::read_to_string(path)
            .map_err(|e| Failure::Error(format!("reading {}: {e}", path.display())));
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Failure::Error(format!("reading stdin: {e}")))?;
    Ok(text)
}

/// Writes `text` to stdout; a closed pipe (`| head`) is an error to report, not a panic.
pub(crate) fn print_text(text: &str) -> Result<(), Failure> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(output_failed)
}

/// Writes `json` to stdout as one line.
pub(crate) fn print_line(json: &serde_json::Value) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{json}").map_err(output_failed)
}
