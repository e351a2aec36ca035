//! How a daemon (`tessera dev`, `coordinator`, `server`) is told to stop: Ctrl-C or SIGTERM.

/// Returns once the process got SIGINT (Ctrl-C) or SIGTERM.
pub(crate) async fn wait_for_stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
