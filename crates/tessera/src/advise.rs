//! `tessera trace` (the workload a space served, as every server sampled it) and `tessera
//! advise`: the workload (a file's text, or the trace printed as the same lines), the space's
//! schema and object count, then the advisor (`tessera-advisor`), printed as JSON; with
//! `--apply`, the best configuration made the space's (alter.rs). The advisor is asked
//! through advice.rs, as the adaptation driver (adapt.rs) asks it.

use tessera_advisor::{Advice, Calibration};

use std::path::PathBuf;

use crate::advice::{advice_for, best_subspaces, from_model};
use crate::failure::Failure;
use crate::stdio::{print_line, read_text};
use crate::target::{connect, Target};
use crate::{alter, json};

// `tessera trace` (its help: `Command::Trace`).
#[derive(clap::Args)]
pub struct TraceArgs {
    space: String,
    /// How many minutes back (each server keeps the last 15); 0: everything since each
    /// server started (what the adaptation driver reads).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=15))]
    minutes: u32,
}

// `tessera advise` (its help: `Command::Advise`).
#[derive(clap::Args)]
pub struct AdviseArgs {
    space: String,
    /// The workload file (JSON lines); `-` reads stdin.
    #[arg(long)]
    workload: Option<PathBuf>,
    /// Use what the servers sampled over the last `--minutes` minutes instead.
    #[arg(long)]
    from_trace: bool,
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=15))]
    minutes: u32,
    /// How many groups of equally good configurations to print.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    top: u32,
    /// The model's constants, as `tessera calibrate --save` wrote them (default: those
    /// `tessera calibrate` kept with the configuration, else constants measured on a 2-core
    /// machine).
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// Print, instead of the whole advice, one line per ranked group (its first
    /// configuration) and per baseline: `rank` or `baseline`, `subspaces`, and
    /// `throughput_ops_s` rounded to a whole operation a second.
    #[arg(long)]
    summary: bool,
    /// Make the best configuration the space's (see above).
    #[arg(long)]
    apply: bool,
    /// With --apply: give up waiting for a build after this many seconds (exit 2; the
    /// build goes on). Without it, wait as long as each build takes.
    #[arg(long, requires = "apply")]
    wait_timeout: Option<f64>,
}

/// `tessera trace`: the shapes of the requests a space served, one JSON line per kind.
pub async fn trace(args: TraceArgs, target: &Target) -> Result<(), Failure> {
    let TraceArgs { space, minutes } = args;
    let client = connect(target).await?;
    let trace = client.trace(&space, minutes).await?;
    let total = trace.requests();
    let window = match trace.minutes {
        0 => "since the servers started".to_owned(),
        m => format!("over the last {m} minutes"),
    };
    eprintln!(
        "tessera trace: {total:.0} requests in {space:?} {window}, as {} server(s) saw them",
        trace.servers
    );
    for line in json::workload_lines(&trace) {
        print_line(&line)?;
    }
    Ok(())
}

/// `tessera advise`: the configurations ranked for a workload (a file, or the live trace),
/// printed whole or in short; with `--apply`, the best made the space's.
pub async fn advise(args: AdviseArgs, target: &Target) -> Result<(), Failure> {
    let AdviseArgs {
        space,
        workload,
        from_trace: _,
        minutes,
        top,
        calibration,
        summary,
        apply,
        wait_timeout: seconds,
    } = args;
    let wait = alter::wait_timeout(seconds)?;
    let client = connect(target).await?;
    let calibration = match calibration {
        None => client
            .refresh()
            .await?
            .model
            .as_ref()
            .map_or_else(Calibration::default, from_model),
        Some(path) => serde_json::from_str(&read_text(&path)?)
            .map_err(|e| Failure::Error(format!("the calibration in {}: {e}", path.display())))?,
    };
    let text = match workload {
        Some(path) => read_text(&path)?,
        None => {
            let trace = client.trace(&space, minutes).await?;
            let lines = json::workload_lines(&trace);
            if lines.is_empty() {
                return Err(Failure::Error(format!(
                    "no request to {space:?} was traced in the last {minutes} minutes: nothing to advise on"
                )));
            }
            lines
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let advice = advice_for(&client, &space, &text, top as usize, calibration).await?;
    if summary {
        for line in summary_lines(&advice)? {
            print_line(&line)?;
        }
    } else {
        print_line(&to_json(&advice)?)?;
    }
    if !apply {
        return Ok(());
    }
    let best = best_subspaces(&advice)?;
    alter::apply(&client, &space, &best, wait).await
}

pub fn to_json(advice: &Advice) -> Result<serde_json::Value, Failure> {
    serde_json::to_value(advice).map_err(|e| Failure::Error(format!("the advice as JSON: {e}")))
}

/// The advice in short, one JSON line per ranked group (its first configuration) and per
/// baseline: the subspaces and the predicted throughput, rounded to a whole operation a
/// second (`tessera advise --summary`).
pub fn summary_lines(advice: &Advice) -> Result<Vec<serde_json::Value>, Failure> {
    let mut lines = Vec::new();
    for cluster in &advice.clusters {
        let Some(first) = cluster.configurations.first() else {
            continue;
        };
        lines.push(serde_json::json!({
            "rank": cluster.rank,
            "subspaces": first.subspaces,
            "throughput_ops_s": first.throughput_ops_s.round() as u64,
        }));
    }
    for baseline in &advice.baselines {
        lines.push(serde_json::json!({
            "baseline": baseline.name,
            "subspaces": baseline.prediction.subspaces,
            "throughput_ops_s": baseline.prediction.throughput_ops_s.round() as u64,
        }));
    }
    Ok(lines)
}
