//! `tessera advise`: the workload (a file's text, or the trace printed as the same lines), the
//! space's schema and object count, then the advisor (`tessera-advisor`), printed as JSON.

use tessera_advisor::{advise as rank, parse_workload, AdvisorOptions, Calibration};
use tessera_client::Client;

use crate::Failure;

/// Ranks `space`'s subspace configurations for the workload in `text`. Without an `objects`
/// line, the workload gets the space's current object count.
pub async fn advise(
    client: &Client,
    space: &str,
    text: &str,
    top: usize,
    calibration: Calibration,
) -> Result<serde_json::Value, Failure> {
    let mut schema = client.describe_space(space).await?;
    if !client.is_cluster() {
        // A standalone server is every region's only replica, whatever the space tolerates.
        schema.tolerate = 0;
    }
    let mut text = text.to_owned();
    if !has_objects_line(&text) {
        let objects = client.count(space, vec![]).await?.max(1);
        text.push_str(&format!("\n{{\"objects\": {objects}}}\n"));
    }
    let workload = parse_workload(&text, &schema)
        .map_err(|e| Failure::Error(format!("the workload for {space:?}: {e}")))?;
    let options = AdvisorOptions {
        clusters_reported: top,
        ..AdvisorOptions::default()
    };
    let advice = rank(&schema, &workload, calibration, options)
        .map_err(|e| Failure::Error(format!("advising on {space:?}: {e}")))?;
    serde_json::to_value(&advice).map_err(|e| Failure::Error(format!("the advice as JSON: {e}")))
}

/// Whether some line of the workload gives the object count.
fn has_objects_line(text: &str) -> bool {
    text.lines().any(|line| {
        serde_json::from_str::<serde_json::Value>(line.trim())
            .is_ok_and(|v| v.get("objects").is_some())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_objects_line_is_found_among_the_others() {
        assert!(super::has_objects_line(
            "{\"p\": 1, \"get\": true}\n  {\"objects\": 5}\n"
        ));
        assert!(!super::has_objects_line(
            "{\"p\": 1, \"get\": true}\n# {\"objects\": 5}\nnot json"
        ));
    }
}
