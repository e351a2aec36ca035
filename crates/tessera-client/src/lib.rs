//! The Tessera client for Rust applications.
//!
//! One [`Client`] holds one TCP connection and may be cloned freely and shared between tasks:
//! every request gets its own id, so any number can be in flight at once and each completes
//! as soon as its answer arrives (pipelining). The client caches the cluster configuration
//! (spaces, their schemas, who owns which region) and refreshes it when a response shows a
//! newer epoch; a request refused because the configuration changed under it is retried.
//!
//! ```no_run
//! use tessera_client::{Client, Predicate, PredicateOp, Value};
//!
//! # async fn demo() -> Result<(), tessera_client::ClientError> {
//! let client = Client::connect("127.0.0.1:1982").await?;
//! client
//!     .add_space(
//!         "space hotels
//!          key id
//!          attributes string city, int stars, int price
//!          subspace city, price",
//!     )
//!     .await?;
//! client
//!     .put("hotels", "h1", [("city", Value::from("Ithaca")), ("stars", 4.into()), ("price", 120.into())])
//!     .await?;
//! let hotel = client.get("hotels", "h1").await?.expect("just stored");
//! assert_eq!(hotel.attributes["price"], Value::Int(120));
//!
//! let cheap_in_ithaca = client
//!     .search(
//!         "hotels",
//!         vec![
//!             Predicate::equals("city", "Ithaca"),
//!             Predicate::new("price", PredicateOp::LessEqual(Value::Int(150))),
//!         ],
//!     )
//!     .await?;
//! assert_eq!(cheap_in_ithaca.len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! Errors are [`ClientError`]s; a server's refusal carries a [`Status`] (`NotFound`,
//! `CmpFail`, `UnknownSpace`, `WrongType`, ...) and a message.

mod connection;
mod error;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

pub use error::ClientError;
pub use tessera_protocol::{Configuration, Explanation, SortOrder, Status, WriteMode};
pub use tessera_types::{
    Funcall, FuncallOp, NumOp, Predicate, PredicateOp, SpaceSchema, Value, Version,
};

use tessera_protocol::{Request, Response, SpaceConfig, WireObject};

use crate::connection::Connection;

/// Times a request is sent again after the configuration changed under it.
const STALE_RETRIES_MAX: usize = 3;

/// An object as the client returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub key: Value,
    pub version: Version,
    /// Every attribute except the key, by name.
    pub attributes: BTreeMap<String, Value>,
}

/// A connection to a Tessera server. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Client {
    connection: Arc<Connection>,
    config: Arc<RwLock<Arc<Configuration>>>,
}

impl Client {
    /// Connects to a server (`host:port`) and fetches the configuration.
    pub async fn connect(address: &str) -> Result<Client, ClientError> {
        let connection = Arc::new(Connection::open(address).await?);
        let config = match connection.call(Request::GetConfig, tessera_types::Epoch(0)).await? {
            Response::Config(c) => c,
            other => return Err(unexpected(other)),
        };
        Ok(Client { connection, config: Arc::new(RwLock::new(Arc::from(config))) })
    }

    /// The configuration as last fetched.
    pub fn configuration(&self) -> Arc<Configuration> {
        self.config.read().expect("config lock").clone()
    }

    /// Fetches the configuration again.
    pub async fn refresh(&self) -> Result<Arc<Configuration>, ClientError> {
        let fresh: Arc<Configuration> = match self.connection.call(Request::GetConfig, tessera_types::Epoch(0)).await? {
            Response::Config(c) => Arc::from(c),
            other => return Err(unexpected(other)),
        };
        let mut slot = self.config.write().expect("config lock");
        if fresh.epoch >= slot.epoch {
            *slot = fresh;
        }
        Ok(slot.clone())
    }

    /// Sends a request, refreshing the configuration and retrying when the server says it
    /// was built on an older one; refreshes after any answer that shows a newer epoch.
    async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let mut attempt = 0;
        loop {
            let epoch = self.configuration().epoch;
            let (response, server_epoch) = self.connection.call_with_epoch(request.clone(), epoch).await?;
            if server_epoch > epoch {
                self.refresh().await?;
            }
            match response {
                Response::Error(e) if e.status == Status::StaleEpoch && attempt < STALE_RETRIES_MAX => {
                    attempt += 1;
                    self.refresh().await?;
                }
                Response::Error(e) => return Err(ClientError::from(e)),
                other => return Ok(other),
            }
        }
    }

    async fn expect_done(&self, request: Request) -> Result<(), ClientError> {
        match self.call(request).await? {
            Response::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// The schema of a space, from the configuration (refreshed once if the space is unknown).
    async fn space(&self, name: &str) -> Result<SpaceConfig, ClientError> {
        if let Some(s) = self.configuration().space(name) {
            return Ok(s.clone());
        }
        self.refresh().await?.space(name).cloned().ok_or_else(|| {
            ClientError::Server { status: Status::UnknownSpace, message: format!("no space named {name:?}") }
        })
    }

    async fn record(&self, space: &str, object: WireObject) -> Result<Record, ClientError> {
        // The cached configuration names the values without copying the schema.
        let config = self.configuration();
        if let Some(s) = config.space(space).filter(|s| s.schema.attributes.len() == object.values.len()) {
            return Ok(to_record(&s.schema, object));
        }
        // The space changed shape (or appeared) since the configuration was cached.
        let config = self.refresh().await?;
        let schema = &config
            .space(space)
            .ok_or_else(|| ClientError::Server { status: Status::UnknownSpace, message: format!("no space named {space:?}") })?
            .schema;
        if schema.attributes.len() != object.values.len() {
            return Err(ClientError::Protocol(format!("an object of {space:?} does not fit its schema")));
        }
        Ok(to_record(schema, object))
    }

    // ---- spaces -------------------------------------------------------------------------

    /// Creates a space from its description (see the space description language in the
    /// README). Fails with `SpaceExists` if one of that name exists, `BadDescription` (with a
    /// line and column) if the description is wrong.
    pub async fn add_space(&self, description: &str) -> Result<(), ClientError> {
        self.expect_done(Request::AddSpace { description: description.to_owned() }).await?;
        self.refresh().await?;
        Ok(())
    }

    /// Removes a space and every object in it.
    pub async fn rm_space(&self, name: &str) -> Result<(), ClientError> {
        self.expect_done(Request::RmSpace { name: name.to_owned() }).await?;
        self.refresh().await?;
        Ok(())
    }

    /// Every space, freshly fetched.
    pub async fn list_spaces(&self) -> Result<Vec<SpaceSchema>, ClientError> {
        Ok(self.refresh().await?.spaces.iter().map(|s| s.schema.clone()).collect())
    }

    /// One space's schema.
    pub async fn describe_space(&self, name: &str) -> Result<SpaceSchema, ClientError> {
        Ok(self.space(name).await?.schema)
    }

    // ---- keys ---------------------------------------------------------------------------

    /// The object stored under `key`, or `None`.
    pub async fn get(&self, space: &str, key: impl Into<Value>) -> Result<Option<Record>, ClientError> {
        match self.call(Request::Get { space: space.to_owned(), key: key.into() }).await? {
            Response::Object(None) => Ok(None),
            Response::Object(Some(o)) => Ok(Some(self.record(space, o).await?)),
            other => Err(unexpected(other)),
        }
    }

    /// Any write to one key. The other write methods are this with fixed arguments.
    pub async fn write(
        &self,
        space: &str,
        key: impl Into<Value>,
        mode: WriteMode,
        conditions: Vec<Predicate>,
        funcalls: Vec<Funcall>,
    ) -> Result<(), ClientError> {
        self.expect_done(Request::Put { space: space.to_owned(), key: key.into(), mode, conditions, funcalls })
            .await
    }

    /// Creates the object or updates the attributes given (the others keep their values, or
    /// take their type's default on creation: "", 0, 0.0, empty containers).
    pub async fn put<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(space, key, WriteMode::Upsert, vec![], assignments(attributes)).await
    }

    /// Creates the object; fails with `CmpFail` if the key has one.
    pub async fn put_if_not_exist<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(space, key, WriteMode::CreateOnly, vec![], assignments(attributes)).await
    }

    /// Updates the object only if every condition holds on it (`CmpFail` otherwise,
    /// `NotFound` if there is no object).
    pub async fn cond_put<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        conditions: Vec<Predicate>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(space, key, WriteMode::UpdateOnly, conditions, assignments(attributes)).await
    }

    /// Like [`Client::cond_put`], but creates the object when there is none.
    pub async fn cond_put_or_create<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        conditions: Vec<Predicate>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(space, key, WriteMode::Upsert, conditions, assignments(attributes)).await
    }

    /// Applies atomic operations to an existing object (`NotFound` if none): all of them or,
    /// if one cannot apply (integer overflow, division by zero), none, with `CmpFail`.
    ///
    /// ```no_run
    /// # async fn demo(client: tessera_client::Client) -> Result<(), tessera_client::ClientError> {
    /// use tessera_client::{Funcall, FuncallOp, NumOp};
    /// client.atomic("hotels", "h1", vec![Funcall::new("price", FuncallOp::Num(NumOp::Add), 10i64)]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn atomic(&self, space: &str, key: impl Into<Value>, funcalls: Vec<Funcall>) -> Result<(), ClientError> {
        self.write(space, key, WriteMode::UpdateOnly, vec![], funcalls).await
    }

    /// Deletes the object (`NotFound` if none).
    pub async fn del(&self, space: &str, key: impl Into<Value>) -> Result<(), ClientError> {
        self.cond_del(space, key, vec![]).await
    }

    /// Deletes the object only if every condition holds on it.
    pub async fn cond_del(&self, space: &str, key: impl Into<Value>, conditions: Vec<Predicate>) -> Result<(), ClientError> {
        self.expect_done(Request::Del { space: space.to_owned(), key: key.into(), conditions }).await
    }

    // ---- search -------------------------------------------------------------------------

    /// Every object matching all predicates (an empty list matches everything).
    pub async fn search(&self, space: &str, predicates: Vec<Predicate>) -> Result<Vec<Record>, ClientError> {
        self.search_stream(space, predicates).await?.collect().await
    }

    /// Like [`Client::search`], but yields objects as the server streams them.
    pub async fn search_stream(&self, space: &str, predicates: Vec<Predicate>) -> Result<SearchStream, ClientError> {
        let schema = self.space(space).await?.schema;
        let epoch = self.configuration().epoch;
        let responses =
            self.connection.stream(Request::Search { space: space.to_owned(), predicates }, epoch).await?;
        Ok(SearchStream { schema, responses, buffered: Vec::new().into_iter(), done: false })
    }

    /// How many objects match.
    pub async fn count(&self, space: &str, predicates: Vec<Predicate>) -> Result<u64, ClientError> {
        match self.call(Request::Count { space: space.to_owned(), predicates }).await? {
            Response::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    /// At most `limit` matching objects, ordered by attribute `sort_by`.
    pub async fn sorted_search(
        &self,
        space: &str,
        predicates: Vec<Predicate>,
        sort_by: &str,
        limit: u32,
        order: SortOrder,
    ) -> Result<Vec<Record>, ClientError> {
        let schema = self.space(space).await?.schema;
        let epoch = self.configuration().epoch;
        let request =
            Request::SortedSearch { space: space.to_owned(), predicates, sort_by: sort_by.to_owned(), limit, order };
        let responses = self.connection.stream(request, epoch).await?;
        SearchStream { schema, responses, buffered: Vec::new().into_iter(), done: false }.collect().await
    }

    /// Deletes every matching object; returns how many.
    pub async fn group_del(&self, space: &str, predicates: Vec<Predicate>) -> Result<u64, ClientError> {
        match self.call(Request::GroupDel { space: space.to_owned(), predicates }).await? {
            Response::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    /// Applies `funcalls` to every matching object, all of them to an object or none;
    /// returns how many objects were updated (those on which an operation cannot apply, by
    /// integer overflow for instance, are left as they were and not counted).
    pub async fn group_update(&self, space: &str, predicates: Vec<Predicate>, funcalls: Vec<Funcall>) -> Result<u64, ClientError> {
        match self.call(Request::GroupUpdate { space: space.to_owned(), predicates, funcalls }).await? {
            Response::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    /// How a search would run: the subspace chosen and the regions and servers it contacts.
    pub async fn explain(&self, space: &str, predicates: Vec<Predicate>) -> Result<Explanation, ClientError> {
        match self.call(Request::Explain { space: space.to_owned(), predicates }).await? {
            Response::Explain(e) => Ok(e),
            other => Err(unexpected(other)),
        }
    }
}

/// Objects of a search, as the server streams them.
pub struct SearchStream {
    schema: SpaceSchema,
    responses: tokio::sync::mpsc::UnboundedReceiver<Result<Response, ClientError>>,
    buffered: std::vec::IntoIter<WireObject>,
    done: bool,
}

impl SearchStream {
    /// Every remaining object.
    pub async fn collect(mut self) -> Result<Vec<Record>, ClientError> {
        let mut out = Vec::new();
        while let Some(r) = self.next().await? {
            out.push(r);
        }
        Ok(out)
    }

    /// The next object, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Record>, ClientError> {
        loop {
            if let Some(o) = self.buffered.next() {
                return Ok(Some(to_record(&self.schema, o)));
            }
            if self.done {
                return Ok(None);
            }
            match self.responses.recv().await {
                None => return Err(ClientError::ConnectionClosed),
                Some(Err(e)) => return Err(e),
                Some(Ok(Response::SearchItems(items))) => self.buffered = items.into_iter(),
                Some(Ok(Response::SearchDone)) => self.done = true,
                Some(Ok(Response::Error(e))) => return Err(e.into()),
                Some(Ok(other)) => return Err(unexpected(other)),
            }
        }
    }
}

fn assignments<A: Into<String>, V: Into<Value>>(attributes: impl IntoIterator<Item = (A, V)>) -> Vec<Funcall> {
    attributes.into_iter().map(|(a, v)| Funcall::set(a, v)).collect()
}

fn to_record(schema: &SpaceSchema, object: WireObject) -> Record {
    let mut values = object.values.into_iter();
    let key = values.next().expect("an object has its key");
    let attributes = schema.attributes[1..].iter().map(|a| a.name.clone()).zip(values).collect();
    Record { key, version: object.version, attributes }
}

fn unexpected(response: Response) -> ClientError {
    ClientError::Protocol(format!("unexpected response {response:?}"))
}
