//! TLS on every connection (rustls, with ring's cryptography): a daemon's listener serves it
//! with a certificate and key (`ServerTls`); clients and connecting members trust a certificate
//! authority (`ClientTls`) and check that the daemon's certificate names the host they dialed.
//! `Authority` makes such an authority and the daemons' certificates, for `tessera certs` and
//! the tests.
//!
//! TLS only keeps the bytes private and proves the daemon's identity; who may do what is still
//! decided by tokens and the cluster secret (`crate::auth`), over TLS or not.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::status::{ErrorReply, Status};

/// Why certificates, keys or an authority could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: io::Error },
    #[error("cannot write {path}: {error}")]
    Write { path: PathBuf, error: io::Error },
    #[error("{path} holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no PEM private key: {error}")]
    NoKey { path: PathBuf, error: String },
    #[error("{path}: {error}")]
    BadPem { path: PathBuf, error: String },
    #[error("the certificate or key was refused: {0}")]
    Refused(#[from] rustls::Error),
    #[error("cannot make a certificate: {0}")]
    Make(#[from] rcgen::Error),
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_owned(),
        error,
    })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadPem {
            path: path.to_owned(),
            error: e.to_string(),
        })?;
    if certificates.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certificates)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS record carrying a handshake starts with this byte. A plain Tessera frame never does:
/// its first byte is the top byte of a length, and a frame of 0x16 << 24 bytes (352 MiB) is far
/// over every limit — so one byte tells a TLS client from a plain one.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A listener's side of TLS: its certificate chain and private key.
#[derive(Clone)]
pub struct ServerTls {
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls")
    }
}

/// Why an accepted connection did not become a TLS stream.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    #[error("a client spoke plain Tessera to a TLS port (it was told so)")]
    PlainClient,
    #[error("no TLS handshake within {0:?}")]
    TimedOut(Duration),
    #[error("TLS handshake failed: {0}")]
    Handshake(io::Error),
}

impl ServerTls {
    /// From a PEM certificate chain (the daemon's certificate first) and a PEM private key.
    pub fn from_pem_files(certificate: &Path, key: &Path) -> Result<ServerTls, TlsError> {
        let chain = certificates(certificate)?;
        let key = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| TlsError::NoKey {
            path: key.to_owned(),
            error: e.to_string(),
        })?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(ServerTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// Runs the daemon's side of the handshake on an accepted connection, within `timeout`. A
    /// client that speaks plain Tessera instead is answered with an `UNSUPPORTED_PROTOCOL` error
    /// saying so (in plain frames, which it understands), and the connection is closed.
    pub async fn accept(&self, tcp: TcpStream, timeout: Duration) -> Result<Socket, AcceptError> {
        let work = async {
            let mut first = [0u8; 1];
            if tcp.peek(&mut first).await.map_err(AcceptError::Handshake)? == 0 {
                return Err(AcceptError::Handshake(io::ErrorKind::UnexpectedEof.into()));
            }
            if first[0] != TLS_HANDSHAKE_RECORD {
                tell_plain_client(tcp).await;
                return Err(AcceptError::PlainClient);
            }
            self.handshake(tcp).await
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| AcceptError::TimedOut(timeout))?
    }

    /// Whether the first byte a client sent opens a TLS handshake (for a port that tells plain
    /// clients off in a protocol of its own, such as the HTTP port).
    pub fn opens_handshake(first: u8) -> bool {
        first == TLS_HANDSHAKE_RECORD
    }

    /// Runs the daemon's side of the handshake, with no check of what the client sent first
    /// and no deadline: the caller's.
    pub async fn handshake(&self, tcp: TcpStream) -> Result<Socket, AcceptError> {
        let tls = self
            .acceptor
            .accept(tcp)
            .await
            .map_err(AcceptError::Handshake)?;
        Ok(Socket::Tls(Box::new(tls.into())))
    }
}

/// Tells a plain client on a TLS port what is wrong, in plain frames, which it understands.
async fn tell_plain_client(tcp: TcpStream) {
    let error = ErrorReply::new(
        Status::UnsupportedProtocol,
        "this port speaks TLS: connect with TLS, trusting the certificate authority that signed \
         the daemon's certificate (--tls-ca, TESSERA_TLS_CA, tls_ca=)",
    );
    crate::frame::tell_and_close(tcp, error).await;
}

/// A connecting side's TLS: the certificate authorities it trusts.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// Trusting the certificates in a PEM file (typically one authority's).
    pub fn from_ca_file(path: &Path) -> Result<ClientTls, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for certificate in certificates(path)? {
            roots.add(certificate)?;
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Runs the client's side of the handshake with the daemon at `address` ("host:port"),
    /// whose certificate must name `host`.
    pub async fn connect(&self, address: &str, tcp: TcpStream) -> io::Result<Socket> {
        let name = ServerName::try_from(host_of(address).to_string()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{address:?} has no host name or IP address to check a certificate by"),
            )
        })?;
        let tls = self.connector.connect(name, tcp).await?;
        Ok(Socket::Tls(Box::new(tls.into())))
    }
}

/// A cluster member's TLS: the certificate its listener serves, and the authority it trusts
/// when it connects to the other members.
#[derive(Clone, Debug)]
pub struct MemberTls {
    pub serve: ServerTls,
    pub dial: ClientTls,
}

/// The host part of "host:port", "[v6]:port" or a bare host.
fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match address.rsplit_once(':') {
        Some((host, _port)) if !host.contains(':') => host,
        _ => address,
    }
}

/// A connection: plain TCP, or TLS over it.
pub enum Socket {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

/// The halves of a [`Socket`], for a reader task and a writer task.
pub type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
pub type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

impl Socket {
    /// Splits for a reader and a writer. Plain TCP splits without a lock; TLS shares one
    /// session between the halves (tokio's `split`).
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Socket::Plain(tcp) => {
                let (read, write) = tcp.into_split();
                (Box::new(read), Box::new(write))
            }
            Socket::Tls(tls) => {
                let (read, write) = tokio::io::split(*tls);
                (Box::new(read), Box::new(write))
            }
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Socket::Tls(_))
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Socket::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Socket::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_flush(cx),
            Socket::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Socket::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A certificate authority for a cluster, and the certificates it signs for daemons.
pub struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    certificate_pem: String,
}

/// A daemon's certificate and private key, in PEM.
pub struct Issued {
    pub certificate_pem: String,
    pub key_pem: String,
}

impl Authority {
    /// A new authority with a fresh key. Its name carries a random part, so that a client
    /// trusting another authority is told the issuer is unknown.
    pub fn create() -> Result<Authority, TlsError> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        let tag: u64 = rand::random();
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("Tessera cluster authority {tag:016x}"),
        );
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate()?;
        let certificate_pem = params.self_signed(&key)?.pem();
        Ok(Authority {
            issuer: rcgen::Issuer::new(params, key),
            certificate_pem,
        })
    }

    /// An authority made earlier, from its certificate and key files.
    pub fn load(certificate: &Path, key: &Path) -> Result<Authority, TlsError> {
        let certificate_pem = String::from_utf8_lossy(&read(certificate)?).into_owned();
        certificates(certificate)?;
        let key_text = String::from_utf8_lossy(&read(key)?).into_owned();
        let key = rcgen::KeyPair::from_pem(&key_text).map_err(|e| TlsError::NoKey {
            path: key.to_owned(),
            error: e.to_string(),
        })?;
        let issuer = rcgen::Issuer::from_ca_cert_pem(&certificate_pem, key).map_err(|e| {
            TlsError::BadPem {
                path: certificate.to_owned(),
                error: e.to_string(),
            }
        })?;
        Ok(Authority {
            issuer,
            certificate_pem,
        })
    }

    /// The authority's certificate: what clients and members trust (`--tls-ca`).
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The authority's private key: keep it off the daemons' machines.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A certificate for a daemon reached by each of `names` (host names or IP addresses),
    /// with a fresh key.
    pub fn issue(&self, names: &[String]) -> Result<Issued, TlsError> {
        let mut params = rcgen::CertificateParams::new(names.to_vec())?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        let common_name = names.first().map(String::as_str).unwrap_or("tessera");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let key = rcgen::KeyPair::generate()?;
        let certificate = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            certificate_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `text` to `path`, readable by its owner only when it is a private key.
pub fn write_pem(path: &Path, text: &str, private: bool) -> Result<(), TlsError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let _ = private;
    let wrote = options
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()));
    wrote.map_err(|error| TlsError::Write {
        path: path.to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Response;
    use futures::{SinkExt, StreamExt};
    use tessera_types::Epoch;
    use tokio::net::TcpListener;
    use tokio_util::codec::Framed;

    fn files(dir: &Path, authority: &Authority, names: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let issued = authority.issue(&names).unwrap();
        let (ca, cert, key) = (dir.join("ca.pem"), dir.join("d.pem"), dir.join("d.key"));
        write_pem(&ca, authority.certificate_pem(), false).unwrap();
        write_pem(&cert, &issued.certificate_pem, false).unwrap();
        write_pem(&key, &issued.key_pem, true).unwrap();
        (ca, cert, key)
    }

    /// A TLS echo daemon on a fresh port: echoes one frame per connection and says how its
    /// accept went.
    async fn echo_daemon(
        server: ServerTls,
    ) -> (String, tokio::sync::mpsc::Receiver<Result<(), String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (server, tx) = (server.clone(), tx.clone());
                tokio::spawn(async move {
                    match server.accept(tcp, Duration::from_secs(5)).await {
                        Ok(stream) => {
                            assert!(stream.is_tls());
                            let _ = tx.send(Ok(())).await;
                            let mut framed = Framed::new(stream, crate::frame::codec());
                            if let Some(Ok(frame)) = framed.next().await {
                                framed.send(frame.freeze()).await.unwrap();
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string())).await;
                        }
                    }
                });
            }
        });
        (address, rx)
    }

    #[tokio::test]
    async fn a_client_trusting_the_authority_talks_to_the_daemon_over_tls() {
        let dir = tempfile::tempdir().unwrap();
        let authority = Authority::create().unwrap();
        let (ca, cert, key) = files(dir.path(), &authority, &["localhost", "127.0.0.1"]);
        let (address, mut accepted) =
            echo_daemon(ServerTls::from_pem_files(&cert, &key).unwrap()).await;
        let client = ClientTls::from_ca_file(&ca).unwrap();
        let tcp = TcpStream::connect(&address).await.unwrap();
        let stream = client.connect(&address, tcp).await.unwrap();
        let mut framed = Framed::new(stream, crate::frame::codec());
        framed
            .send(bytes::Bytes::from_static(b"over tls"))
            .await
            .unwrap();
        let echoed = framed.next().await.unwrap().unwrap();
        assert_eq!(&echoed[..], b"over tls");
        assert_eq!(accepted.recv().await, Some(Ok(())));

        // "localhost" is named by the certificate too.
        let port = address.rsplit_once(':').unwrap().1;
        let by_name = format!("localhost:{port}");
        let tcp = TcpStream::connect(&address).await.unwrap();
        client.connect(&by_name, tcp).await.unwrap();
    }

    #[tokio::test]
    async fn a_client_refuses_a_daemon_signed_by_another_authority_or_for_another_name() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs) = (Authority::create().unwrap(), Authority::create().unwrap());
        let (ca, _, _) = files(dir.path(), &ours, &["127.0.0.1"]);
        let other = tempfile::tempdir().unwrap();
        let (_, cert, key) = files(other.path(), &theirs, &["127.0.0.1"]);
        let (address, _accepted) =
            echo_daemon(ServerTls::from_pem_files(&cert, &key).unwrap()).await;
        let client = ClientTls::from_ca_file(&ca).unwrap();
        let tcp = TcpStream::connect(&address).await.unwrap();
        let error = client.connect(&address, tcp).await.err().unwrap();
        // Both authorities have the same name: the signature is what fails.
        assert!(
            error.to_string().contains("invalid peer certificate"),
            "{error}"
        );

        // Signed by our authority, but for another host.
        let elsewhere = tempfile::tempdir().unwrap();
        let (_, cert, key) = files(elsewhere.path(), &ours, &["db.example.com"]);
        let (address, _accepted) =
            echo_daemon(ServerTls::from_pem_files(&cert, &key).unwrap()).await;
        let tcp = TcpStream::connect(&address).await.unwrap();
        let error = client.connect(&address, tcp).await.err().unwrap();
        assert!(error.to_string().contains("not valid for name"), "{error}");
    }

    #[tokio::test]
    async fn a_plain_client_on_a_tls_port_is_told_and_closed() {
        let dir = tempfile::tempdir().unwrap();
        let authority = Authority::create().unwrap();
        let (_, cert, key) = files(dir.path(), &authority, &["127.0.0.1"]);
        let (address, mut accepted) =
            echo_daemon(ServerTls::from_pem_files(&cert, &key).unwrap()).await;
        let tcp = TcpStream::connect(&address).await.unwrap();
        let mut framed = Framed::new(tcp, crate::frame::codec());
        let request = crate::frame::encode_request(&crate::message::RequestFrame {
            id: 7,
            epoch: Epoch(0),
            request: crate::message::Request::GetConfig,
        })
        .unwrap();
        framed.send(request).await.unwrap();
        let answer = framed.next().await.unwrap().unwrap();
        let frame = crate::frame::decode_response(&answer).unwrap();
        assert_eq!(frame.id, 0);
        match frame.response {
            Response::Error(e) => {
                assert_eq!(e.status, Status::UnsupportedProtocol);
                assert!(e.message.contains("speaks TLS"), "{}", e.message);
            }
            other => panic!("expected an error, got {other:?}"),
        }
        assert!(framed.next().await.is_none(), "the connection is closed");
        let said = accepted.recv().await.unwrap().unwrap_err();
        assert!(said.contains("plain"), "{said}");
    }

    #[tokio::test]
    async fn an_authority_loaded_from_its_files_signs_certificates_its_certificate_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let created = Authority::create().unwrap();
        let (ca_cert, ca_key) = (dir.path().join("ca.pem"), dir.path().join("ca.key"));
        write_pem(&ca_cert, created.certificate_pem(), false).unwrap();
        write_pem(&ca_key, &created.key_pem(), true).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&ca_key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let loaded = Authority::load(&ca_cert, &ca_key).unwrap();
        let later = tempfile::tempdir().unwrap();
        let (_, cert, key) = files(later.path(), &loaded, &["127.0.0.1"]);
        let (address, _accepted) =
            echo_daemon(ServerTls::from_pem_files(&cert, &key).unwrap()).await;
        let client = ClientTls::from_ca_file(&ca_cert).unwrap();
        let tcp = TcpStream::connect(&address).await.unwrap();
        client.connect(&address, tcp).await.unwrap();
    }

    #[test]
    fn bad_files_are_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let error = ClientTls::from_ca_file(&missing).unwrap_err();
        assert!(matches!(error, TlsError::Read { .. }), "{error}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = ClientTls::from_ca_file(&empty).unwrap_err();
        assert!(matches!(error, TlsError::NoCertificate { .. }), "{error}");
        assert!(error.to_string().contains("empty.pem"));
        let authority = Authority::create().unwrap();
        let (_, cert, _) = files(dir.path(), &authority, &["127.0.0.1"]);
        let error = ServerTls::from_pem_files(&cert, &empty).unwrap_err();
        assert!(matches!(error, TlsError::NoKey { .. }), "{error}");
    }

    #[test]
    fn the_host_is_what_precedes_the_port() {
        assert_eq!(host_of("127.0.0.1:1982"), "127.0.0.1");
        assert_eq!(host_of("db.example.com:1982"), "db.example.com");
        assert_eq!(host_of("[::1]:1982"), "::1");
        assert_eq!(host_of("db"), "db");
        assert_eq!(host_of("::1"), "::1");
    }
}
