//! The flags that bound what clients may hold of a daemon, shared by `tessera dev`,
//! `tessera coordinator` and `tessera server`.

use std::time::Duration;

use tessera_server::ConnectionLimits;

#[derive(clap::Args, Clone, Copy, Debug)]
pub struct LimitArgs {
    /// Connections a daemon serves at once, not counting those of other members once they have
    /// proved the cluster secret. One more is answered `Unavailable: too many connections` and
    /// closed, instead of hanging once the process runs out of file descriptors. Lowered, with a
    /// warning, to fit under the file-descriptor limit (`ulimit -n`) less 128.
    #[arg(long, default_value_t = ConnectionLimits::default().connections_max as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Seconds a request frame, once begun, may take to arrive whole; a connection that stops
    /// mid-frame is closed after at most this long.
    #[arg(long, default_value_t = ConnectionLimits::default().frame_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub frame_timeout_s: u64,
    /// Seconds a connection with nothing in progress may send nothing before it is closed.
    /// 0 (the default): idle connections stay open, as pooled client connections expect.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=86400))]
    pub idle_timeout_s: u64,
}

impl LimitArgs {
    pub fn options(self) -> ConnectionLimits {
        ConnectionLimits {
            frame_timeout: Duration::from_secs(self.frame_timeout_s),
            idle_timeout: (self.idle_timeout_s > 0)
                .then(|| Duration::from_secs(self.idle_timeout_s)),
            connections_max: self.max_connections as usize,
        }
    }
}
