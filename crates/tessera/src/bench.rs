//! `tessera bench`: the YCSB core workloads (tessera-bench) against Tessera or a peer store,
//! with the global `--token` and `--tls-ca`; the report is printed as pretty JSON.

use tessera_bench::BenchArgs;

use crate::failure::Failure;
use crate::target::Target;

/// `tessera bench` (its flags are tessera-bench's `BenchArgs`).
pub async fn bench(mut args: Box<BenchArgs>, target: &Target) -> Result<(), Failure> {
    args.client.token = target.token.clone();
    if let Some(ca) = &target.tls_ca {
        args.client = args
            .client
            .with_tls_ca(ca)
            .map_err(|e| Failure::Error(format!("--tls-ca: {e}")))?;
    }
    let report = tessera_bench::run(*args)
        .await
        .map_err(|e| Failure::Error(e.to_string()))?;
    let json = serde_json::to_value(&report).map_err(|e| Failure::Error(e.to_string()))?;
    println!("{}", serde_json::to_string_pretty(&json).expect("JSON"));
    Ok(())
}
