//! A daemon's HTTP port (`--http ADDR`): the web console at `/` (its data at `/api/...`, see
//! console.rs) and Prometheus text at `/metrics`.
//!
//! The daemons' crates record through the `metrics` facade (counters and histograms as requests
//! and commits happen); this module installs the Prometheus recorder once per process, and on
//! each scrape first asks every daemon of the process to publish its gauges (regions, objects,
//! Raft progress), then renders. Hostile HTTP clients are bounded like Tessera's own: at most
//! [`HTTP_CONNECTIONS_MAX`] at once, and a request's head must arrive within
//! [`HTTP_HEADER_TIMEOUT`].
//!
//! A daemon that requires client tokens (`--auth`) requires one here too, for `/metrics` and
//! `/api/...`: `Authorization: Bearer TOKEN`, any role of the token file (these only read).
//! The page at `/` holds no data and asks for the token when the API refuses it. A daemon with
//! TLS (`--tls-cert`) serves this port as HTTPS with the same certificate, so tokens and data
//! never cross in clear; a plain HTTP request to it is answered, in plain HTTP, with 400 saying
//! so.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use tessera_protocol::tls::ServerTls;
use tessera_protocol::Gate;

use crate::console::{Console, ConsoleError, Query};
use crate::failure::Failure;

const HTTP_CONNECTIONS_MAX: usize = 64;
const HTTP_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Seconds: 50 µs to 10 s, for request latencies and fsyncs.
const SECONDS_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 10.0,
];
/// Counts (writes per group commit, regions per search, servers per chain): powers of two.
const COUNT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// How often the recorder folds the histogram samples recorded since into their buckets.
const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// The process's recorder, installed on first use, with the thread that keeps its memory
/// bounded: a histogram keeps every sample recorded until upkeep folds them into its buckets,
/// which a scrape does, so a daemon nobody scrapes grew by every request it served (about
/// 55 bytes per object loaded: docs/benchmarks.md, "Memory, third session").
fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        // Histograms named *_seconds time things; the others count things.
        let handle = PrometheusBuilder::new()
            .set_buckets(COUNT_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            })
            .expect("bucket lists are not empty")
            .install_recorder()
            .expect("the metrics recorder is installed once");
        let upkept = handle.clone();
        std::thread::Builder::new()
            .name("tessera-metrics".into())
            .spawn(move || loop {
                std::thread::sleep(UPKEEP_PERIOD);
                upkept.run_upkeep();
            })
            .expect("spawning the metrics upkeep thread");
        handle
    })
}

/// What publishes a daemon's gauges just before a scrape.
pub type Publish = Arc<dyn Fn() + Send + Sync>;

/// The daemons of this process, whose gauges a scrape publishes, how the console reaches
/// their cluster, and the gate their clients pass (whose tokens this port asks for too).
#[derive(Clone)]
pub struct Daemons {
    publishers: Arc<std::sync::Mutex<Vec<Publish>>>,
    console: Arc<OnceLock<Console>>,
    gate: Arc<Gate>,
    tls: Option<ServerTls>,
}

/// Why the HTTP port refused a request for want of a token.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this daemon requires a token (--auth): send it as `Authorization: Bearer TOKEN`")]
    NoToken,
    #[error("unknown token")]
    UnknownToken,
}

impl Daemons {
    /// The daemons of a process whose client connections pass `gate` and, with `tls`, speak
    /// TLS (so does this port then).
    pub fn guarded_by(gate: Arc<Gate>, tls: Option<ServerTls>) -> Daemons {
        Daemons {
            publishers: Arc::default(),
            console: Arc::default(),
            gate,
            tls,
        }
    }

    /// `http` or `https`: what this port speaks.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Whether a request with this `Authorization` header may read metrics and the console's
    /// data: always without client tokens; else when it brings a token of the file, as the
    /// file reads now (a token removed and the file reloaded stops working here too).
    fn admit(&self, authorization: Option<&[u8]>) -> Result<(), Refusal> {
        let policy = self.gate.policy();
        let Some(tokens) = &policy.tokens else {
            return Ok(());
        };
        let token = authorization
            .and_then(|h| h.strip_prefix(b"Bearer "))
            .ok_or(Refusal::NoToken)?;
        std::str::from_utf8(token)
            .ok()
            .and_then(|t| tokens.role_of(t.trim()))
            .map(|_| ())
            .ok_or(Refusal::UnknownToken)
    }

    pub fn add(&self, publish: Publish) {
        self.publishers.lock().expect("publishers").push(publish);
    }

    /// Where the console connects (`addresses`, as a client's `--addr`) and how (the daemon's
    /// drivers' options: its TLS authority and cluster secret). Once, when the daemon is up;
    /// until then the console's data answers 503.
    pub fn serve_console(&self, addresses: String, options: tessera_client::ClientOptions) {
        let _ = self.console.set(Console::new(addresses, options));
    }

    fn publish(&self) {
        let publishers = self.publishers.lock().expect("publishers").clone();
        for publish in publishers {
            publish();
        }
    }
}

/// Where `tessera dev` serves its metrics unless told.
pub const DEV_DEFAULT: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    1980,
));

/// Says on stderr where a daemon's console and metrics are served, if they are.
pub fn say_served(daemon: &str, served: Option<SocketAddr>, daemons: &Daemons) {
    if let Some(address) = served {
        let scheme = daemons.scheme();
        eprintln!(
            "{daemon}: console at {scheme}://{address}/, metrics at {scheme}://{address}/metrics"
        );
    }
}

/// `--http`, shared by the daemons.
#[derive(clap::Args, Clone, Debug)]
pub struct HttpArgs {
    /// Serve the web console at http://ADDR/ (cluster health, spaces, each subspace's regions,
    /// a space's statistics, a re-cut's progress, a search's box, an update's chain, live
    /// throughput) and Prometheus metrics at http://ADDR/metrics: requests by operation and
    /// status, latency histograms, group commits and their fsync times, regions and stored
    /// entries per space and subspace, connections, Raft term and progress on coordinators.
    /// With --auth, /metrics and the console's data need a token of the file (any role) as
    /// `Authorization: Bearer TOKEN` (the page asks for it); with --tls-cert, the port speaks
    /// HTTPS with the daemon's certificate. `off`: serve none. Default: 127.0.0.1:1980 for
    /// `tessera dev` (skipped with a warning when that port is taken and --http was not
    /// given), none for coordinators and servers.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
}

impl HttpArgs {
    /// Starts serving what `--http` asks, `default` when it was not given; the address served.
    pub async fn start(
        &self,
        default: Option<SocketAddr>,
        daemons: Daemons,
    ) -> Result<Option<SocketAddr>, Failure> {
        let address = match self.http.as_deref() {
            Some("off") => return Ok(None),
            Some(text) => text.parse::<SocketAddr>().map_err(|e| {
                Failure::Error(format!("--http {text:?}: {e} (give HOST:PORT, or off)"))
            })?,
            None => match default {
                None => return Ok(None),
                Some(address) => {
                    return match start(address, daemons).await {
                        Ok(bound) => Ok(Some(bound)),
                        Err(Failure::Error(e)) => {
                            tracing::warn!("metrics not served: {e}");
                            Ok(None)
                        }
                        Err(other) => Err(other),
                    };
                }
            },
        };
        start(address, daemons).await.map(Some)
    }
}

/// Installs the recorder (so that what the daemons record from their start is counted) and
/// binds `address`; serves from then on in the background. Returns the bound address.
pub async fn start(address: SocketAddr, daemons: Daemons) -> Result<SocketAddr, Failure> {
    recorder();
    let listener = TcpListener::bind(address).await.map_err(|e| {
        Failure::Error(format!(
            "cannot serve --http on {address}: {e} (give another --http ADDR, or --http off)"
        ))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::Error(e.to_string()))?;
    tokio::spawn(serve(listener, daemons));
    Ok(bound)
}

async fn serve(listener: TcpListener, daemons: Daemons) {
    let slots = Arc::new(Semaphore::new(HTTP_CONNECTIONS_MAX));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        // Past the cap a connection is closed at once: HTTP clients retry.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let daemons = daemons.clone();
        tokio::spawn(async move {
            serve_one(tcp, daemons).await;
            drop(slot);
        });
    }
}

/// What a plain HTTP request to a port serving HTTPS is told.
const USE_HTTPS: &str = "this port speaks HTTPS (the daemon has --tls-cert): use https://\n";

/// Serves one accepted connection: HTTP, or HTTPS when the daemon has TLS. A plain HTTP
/// request to an HTTPS port is read and answered by hyper like any other, with 400 and
/// [`USE_HTTPS`], in plain HTTP.
async fn serve_one(tcp: TcpStream, daemons: Daemons) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HTTP_HEADER_TIMEOUT);
    let Some(tls) = daemons.tls.clone() else {
        let _ = http
            .serve_connection(TokioIo::new(tcp), answering(daemons))
            .await;
        return;
    };
    let mut first = [0u8; 1];
    match tokio::time::timeout(HTTP_HEADER_TIMEOUT, tcp.peek(&mut first)).await {
        Ok(Ok(1..)) => {}
        _ => return, // closed, failed, or silent past the deadline
    }
    if !ServerTls::opens_handshake(first[0]) {
        let told = hyper::service::service_fn(|_| async {
            Ok::<_, Infallible>(reply(
                StatusCode::BAD_REQUEST,
                "text/plain",
                USE_HTTPS.into(),
            ))
        });
        let _ = http.serve_connection(TokioIo::new(tcp), told).await;
        return;
    }
    match tokio::time::timeout(HTTP_HEADER_TIMEOUT, tls.handshake(tcp)).await {
        Ok(Ok(socket)) => {
            let _ = http
                .serve_connection(TokioIo::new(socket), answering(daemons))
                .await;
        }
        Ok(Err(e)) => tracing::info!(error = %e, "HTTPS handshake failed"),
        Err(_) => {} // no handshake within the deadline
    }
}

/// The service answering a connection's requests from `daemons`.
fn answering(
    daemons: Daemons,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future: Send,
> {
    hyper::service::service_fn(move |request| {
        let daemons = daemons.clone();
        async move { Ok::<_, Infallible>(answer(&request, &daemons).await) }
    })
}

/// The console's page: one file, its script and styles inline, nothing fetched from elsewhere.
const CONSOLE_PAGE: &str = include_str!("console.html");

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

async fn answer(request: &Request<Incoming>, daemons: &Daemons) -> Response<Full<Bytes>> {
    if request.method() != Method::GET {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET is served\n".into(),
        );
    }
    let path = request.uri().path();
    if path == "/metrics" || path.starts_with("/api/") {
        let authorization = request.headers().get(hyper::header::AUTHORIZATION);
        if let Err(refusal) = daemons.admit(authorization.map(|h| h.as_bytes())) {
            tracing::info!(path, cause = %refusal, "HTTP request refused");
            let mut refused = reply(
                StatusCode::UNAUTHORIZED,
                "application/json",
                serde_json::json!({ "error": refusal.to_string() }).to_string(),
            );
            refused.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer realm=\"tessera\""),
            );
            return refused;
        }
    }
    match path {
        "/metrics" => {
            daemons.publish();
            let handle = recorder();
            handle.run_upkeep();
            reply(StatusCode::OK, "text/plain; version=0.0.4", handle.render())
        }
        "/" | "/index.html" => reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            CONSOLE_PAGE.into(),
        ),
        path if path.starts_with("/api/") => {
            let (status, body) = api(&path["/api/".len()..], request.uri().query(), daemons).await;
            reply(status, "application/json", body.to_string())
        }
        other => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("nothing at {other}: / serves the console, /metrics Prometheus text\n"),
        ),
    }
}

/// The console's data: JSON, and `{"error": ...}` with a status saying whose fault it is.
async fn api(
    path: &str,
    query: Option<&str>,
    daemons: &Daemons,
) -> (StatusCode, serde_json::Value) {
    let Some(console) = daemons.console.get() else {
        let error = "the daemon is still starting";
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({ "error": error }),
        );
    };
    let query = match parse_query(query.unwrap_or("")) {
        Ok(query) => query,
        Err(e) => return (StatusCode::BAD_REQUEST, serde_json::json!({ "error": e })),
    };
    match console.answer(path, &query).await {
        Ok(json) => (StatusCode::OK, json),
        Err(e) => {
            let status = match e {
                ConsoleError::BadRequest(_) => StatusCode::BAD_REQUEST,
                ConsoleError::NotFound(_) => StatusCode::NOT_FOUND,
                ConsoleError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            (status, serde_json::json!({ "error": e.to_string() }))
        }
    }
}

/// `a=1&b=x%20y` as `[("a", "1"), ("b", "x y")]` (`+` is a space, as forms send it).
fn parse_query(query: &str) -> Result<Query, String> {
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(&text.replace('+', " "))
            .decode_utf8()
            .map(|t| t.into_owned())
            .map_err(|_| format!("the query {query:?} is not UTF-8 once decoded"))
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((decode(name)?, decode(value)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::{Policy, TokenTable};

    #[test]
    fn a_daemon_with_tokens_asks_for_one_of_them() {
        const READER: &str = "reader-token-0123456789";
        let open = Daemons::guarded_by(Arc::new(Gate::new(Policy::default())), None);
        assert_eq!(open.admit(None), Ok(()));
        let tokens = TokenTable::parse(&format!("{READER} read\n")).unwrap();
        let gate = Arc::new(Gate::new(Policy {
            tokens: Some(tokens),
            secret: None,
        }));
        let guarded = Daemons::guarded_by(gate.clone(), None);
        assert_eq!(guarded.admit(None), Err(Refusal::NoToken));
        assert_eq!(
            guarded.admit(Some(format!("Basic {READER}").as_bytes())),
            Err(Refusal::NoToken)
        );
        assert_eq!(
            guarded.admit(Some(b"Bearer \xff")),
            Err(Refusal::UnknownToken)
        );
        assert_eq!(
            guarded.admit(Some(b"Bearer reader-token-0123456780")),
            Err(Refusal::UnknownToken)
        );
        assert_eq!(
            guarded.admit(Some(format!("Bearer {READER}").as_bytes())),
            Ok(())
        );
        // The file reloaded without the token: refused from then on.
        gate.set_tokens(Some(TokenTable::parse("").unwrap()));
        assert_eq!(
            guarded.admit(Some(format!("Bearer {READER}").as_bytes())),
            Err(Refusal::UnknownToken)
        );
    }

    #[test]
    fn queries_are_split_and_decoded() {
        let pairs = |q: &str| parse_query(q).unwrap();
        assert_eq!(pairs(""), Query::new());
        assert_eq!(
            pairs("space=hotels&q=price%3C100+city%3D%22New%20York%22&flag"),
            [
                ("space".to_string(), "hotels".to_string()),
                ("q".to_string(), "price<100 city=\"New York\"".to_string()),
                ("flag".to_string(), String::new()),
            ]
        );
        assert!(parse_query("q=%FF").is_err());
    }
}
