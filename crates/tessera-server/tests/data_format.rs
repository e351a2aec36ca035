//! A server opens only data directories of the formats it reads
//! (`tessera_protocol::data_format`): it marks a new one with its own, and refuses a newer one
//! with an error that says so, writing nothing in it.

mod common;

use common::TestServer;
use tessera_protocol::data_format::{self, DataKind, Found};
use tessera_server::{Server, ServerOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_data_directory_is_marked_with_the_current_format() {
    let s = TestServer::start().await;
    assert_eq!(
        data_format::read(s.dir.path(), DataKind::Server).unwrap(),
        Found::Format(DataKind::Server.current())
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refuses_a_newer_data_directory_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let newer = DataKind::Server.current() + 1;
    data_format::write(dir.path(), DataKind::Server, newer).unwrap();
    std::fs::write(dir.path().join("configuration"), b"from the future").unwrap();
    let options = ServerOptions::new(dir.path(), "127.0.0.1:0".parse().unwrap());
    let refused = Server::start(options).await.err().expect("refused");
    let text = refused.to_string();
    assert!(
        text.contains("newer") && text.contains(&format!("format {newer}")),
        "{text}"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["FORMAT", "configuration"]);
    assert_eq!(
        std::fs::read(dir.path().join("configuration")).unwrap(),
        b"from the future"
    );
}
