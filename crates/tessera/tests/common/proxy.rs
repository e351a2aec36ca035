//! A network that can be cut: TCP proxies on loopback for partition tests. Every connection to
//! a server, and every connection a server makes to a coordinator, runs through a proxy that
//! belongs to that server. `Network::isolate` then silences every connection of one server:
//! those through its own proxies, and those its process opened to other servers' proxies
//! (found by the socket's owner in /proc). A silenced connection stays open and carries
//! nothing, as a link does when packets are dropped; new connections are accepted and silenced
//! too. `heal` closes the silenced connections, as a timed-out TCP connection would be, so both
//! ends reconnect.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The server cut off: the owner index of its proxies, its process, and the local ports of
/// the TCP sockets that process had open when it was cut off.
#[derive(Clone, Debug)]
struct Isolated {
    owner: usize,
    pid: u32,
    ports: Arc<HashSet<u16>>,
}

pub struct Network {
    runtime: tokio::runtime::Runtime,
    isolated: Arc<watch::Sender<Option<Isolated>>>,
    /// Connections silenced because the cut-off process opened them to another server's
    /// proxy (so a test can check the cut reached beyond the server's own proxies).
    silenced_outgoing: Arc<AtomicUsize>,
}

impl Network {
    pub fn new() -> Network {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        Network {
            runtime,
            isolated: Arc::new(watch::Sender::new(None)),
            silenced_outgoing: Arc::default(),
        }
    }

    /// A proxy on a free loopback port that forwards to `target` and belongs to server `owner`;
    /// returns the address it listens on.
    pub fn proxy(&self, owner: usize, target: &str) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).expect("non-blocking");
        let address = listener.local_addr().expect("bound").to_string();
        let (target, isolated, outgoing) = (
            target.to_owned(),
            self.isolated.clone(),
            self.silenced_outgoing.clone(),
        );
        self.runtime.spawn(async move {
            let listener = TcpListener::from_std(listener).expect("a tokio listener");
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(relay(
                    inbound,
                    target.clone(),
                    owner,
                    isolated.subscribe(),
                    outgoing.clone(),
                ));
            }
        });
        address
    }

    /// Cuts off server `owner` (whose process is `pid`) until `heal`.
    pub fn isolate(&self, owner: usize, pid: u32) {
        // Looked up once here, not by every connection: the proxies must not stall the others.
        let ports = Arc::new(local_ports_of(pid));
        self.isolated
            .send_replace(Some(Isolated { owner, pid, ports }));
    }

    pub fn heal(&self) {
        self.isolated.send_replace(None);
    }

    /// How many connections the cut-off servers had opened to other servers were silenced.
    pub fn silenced_outgoing(&self) -> usize {
        self.silenced_outgoing.load(Ordering::Relaxed)
    }
}

/// Copies bytes both ways between `inbound` and a new connection to `target` until either
/// side closes or the connection is cut off.
async fn relay(
    inbound: TcpStream,
    target: String,
    owner: usize,
    mut isolated: watch::Receiver<Option<Isolated>>,
    outgoing: Arc<AtomicUsize>,
) {
    let from_port = inbound.peer_addr().map(|a| a.port()).unwrap_or(0);
    let cut = |i: &Option<Isolated>| {
        i.as_ref().is_some_and(|i| {
            let theirs = i.ports.contains(&from_port);
            outgoing.fetch_add(usize::from(theirs), Ordering::Relaxed);
            i.owner == owner || theirs
        })
    };
    let isolated_now = isolated.borrow_and_update().clone();
    if let Some(i) = &isolated_now {
        // A connection opened during the cut: is it the cut-off process's?
        let (pid, port) = (i.pid, from_port);
        let theirs = tokio::task::spawn_blocking(move || local_ports_of(pid).contains(&port))
            .await
            .unwrap_or(false);
        outgoing.fetch_add(usize::from(theirs), Ordering::Relaxed);
        if i.owner == owner || theirs {
            return silent_until_healed(&mut isolated).await;
        }
    }
    let Ok(outbound) = TcpStream::connect(&target).await else {
        return;
    };
    let (mut in_read, mut in_write) = inbound.into_split();
    let (mut out_read, mut out_write) = outbound.into_split();
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            n = in_read.read(&mut up) => match n {
                Ok(n) if n > 0 && out_write.write_all(&up[..n]).await.is_ok() => {}
                _ => return,
            },
            n = out_read.read(&mut down) => match n {
                Ok(n) if n > 0 && in_write.write_all(&down[..n]).await.is_ok() => {}
                _ => return,
            },
            changed = isolated.changed() => {
                if changed.is_err() {
                    return;
                }
                if cut(&isolated.borrow_and_update()) {
                    // Both halves stay open, unread and unwritten, until the heal.
                    return silent_until_healed(&mut isolated).await;
                }
            }
        }
    }
}

async fn silent_until_healed(isolated: &mut watch::Receiver<Option<Isolated>>) {
    let _ = isolated.wait_for(Option::is_none).await;
}

/// The local ports of the TCP sockets process `pid` has open: the sockets among its open
/// files (`socket:[INODE]`), looked up by inode in /proc/net/tcp.
fn local_ports_of(pid: u32) -> HashSet<u16> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|f| std::fs::read_link(f.path()).ok())
        .filter_map(|link| {
            link.to_string_lossy()
                .strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_owned)
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // sl, local_address, rem_address, st, tx:rx queue, tr:when, retrnsmt, uid, timeout, inode
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = u16::from_str_radix(fields.get(1)?.rsplit(':').next()?, 16).ok()?;
            inodes.contains(*fields.get(9)?).then_some(port)
        })
        .collect()
}
