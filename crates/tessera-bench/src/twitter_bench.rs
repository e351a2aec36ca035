//! `tessera bench -w twitter`: seed 003 §3.1's Twitter workload ([`crate::twitter`]) on three
//! spaces, `tw_users`, `tw_tweets` and `tw_timelines`, with the `tweets` space placed at random,
//! ordered or tagged, as the seed compared them:
//!
//! * random: every space placed at random;
//! * ordered: tweets and timelines ordered (a user's tweets, and a user's timeline, are each
//!   one range of keys);
//! * tagged: tweets tagged by their mention (`@u`) and topic (`#t`), timelines ordered.
//!
//! A tweet's key is `author << 32 | (u32::MAX - seq)` and a timeline entry's
//! `user << 32 | (u32::MAX - seq)`, `seq` counting tweets, so a user's newest come first in
//! key order. The seven operations:
//!
//! | operation | what it does |
//! |---|---|
//! | search_contains_hashtag | `get_by_tags(tweets, ["#t"])`, t by a power law |
//! | statuses_mentions | `get_by_tags(tweets, ["@u"])`, u by followers |
//! | statuses_user_timeline | `get_by_range` over u's tweets, newest 20 |
//! | statuses_friends_timeline | `get_by_range` over u's timeline, newest 20, then `multi_get` of those tweets |
//! | statuses_update | a tweet put, and its entry put in the timelines of up to 20 followers (`multi_put`) |
//! | friendships_create / _destroy | `set_add` / `set_remove` on the two users' friends and followers |
//!
//! Per operation the report gives throughput, latency (p50, p99) and, computed by the client's
//! own routing ([`tessera_client::search_contacts`], [`tessera_client::key_leaders`]) from the
//! configuration, the servers contacted and the requests sent, with the fewest-servers fan-out
//! and with one replica per region. `--twitter-route-servers N` computes those counts for a
//! cluster of N servers (replica sets assigned as the coordinators assign them) without
//! running any server: the sizes seed 003 simulated.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tessera_client::{
    key_leaders, search_contacts, Client, ClientOptions, Fanout, Funcall, FuncallOp, Predicate,
    PredicateOp, ServerId, SpaceConfig, Value,
};

use crate::twitter::{FollowGraph, Operation, TweetSource, TwitterShape, OPERATION_MIX};

const USERS: &str = "tw_users";
const TWEETS: &str = "tw_tweets";
const TIMELINES: &str = "tw_timelines";

/// Newest items a timeline read returns.
const TIMELINE_LENGTH: u32 = 20;

/// Followers whose timelines a tweet is written to (a bound on the fan-out of one write).
const TIMELINE_FANOUT_MAX: usize = 20;

/// Where the tweets go (and the timelines with them, as seed 003's three configurations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TweetPlacement {
    Random,
    Ordered,
    Tagged,
}

/// How a read over several regions picks replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FanoutChoice {
    /// The fewest servers that hold every region.
    Fewest,
    /// One replica per region.
    EachRegion,
}

impl FanoutChoice {
    fn fanout(self) -> Fanout {
        match self {
            FanoutChoice::Fewest => Fanout::Fewest,
            FanoutChoice::EachRegion => Fanout::EachRegion,
        }
    }
}

/// `tessera bench -w twitter` options (with `--records` initial tweets, `--operations`,
/// `--threads`, `--seed`, `--duration-s`).
#[derive(Clone, Debug, clap::Args)]
pub struct TwitterArgs {
    /// Placement of the tweets (and timelines): random, ordered or tagged.
    #[arg(id = "twitter_placement", long = "twitter-placement", value_enum, default_value_t = TweetPlacement::Tagged)]
    pub placement: TweetPlacement,
    /// Users of the follow graph.
    #[arg(id = "twitter_users", long = "twitter-users", default_value_t = 2_000)]
    pub users: u32,
    /// Failures each space tolerates (replicas K = this + 1).
    #[arg(
        id = "twitter_tolerate",
        long = "twitter-tolerate",
        default_value_t = 0
    )]
    pub tolerate: u32,
    /// How the client picks replicas for reads over several regions.
    #[arg(id = "twitter_fanout", long = "twitter-fanout", value_enum, default_value_t = FanoutChoice::Fewest)]
    pub fanout: FanoutChoice,
    /// Partitions of each space (`create P partitions`).
    #[arg(
        id = "twitter_partitions",
        long = "twitter-partitions",
        default_value_t = 32
    )]
    pub partitions: u32,
    /// Route the operations over a computed cluster of this many servers instead of running
    /// them (0: run them against --target).
    #[arg(
        id = "twitter_route_servers",
        long = "twitter-route-servers",
        default_value_t = 0
    )]
    pub route_servers: u32,
}

/// What `-w twitter` measured.
#[derive(Clone, Debug, Serialize)]
pub struct TwitterReport {
    pub placement: TweetPlacement,
    pub tolerate: u32,
    pub fanout: FanoutChoice,
    pub users: u32,
    pub partitions: u32,
    /// Servers of the cluster (the live one's, or the computed one's).
    pub servers: usize,
    /// True when no operation ran: the counts come from routing a computed cluster.
    pub routed_only: bool,
    pub elapsed_s: f64,
    pub ops: BTreeMap<String, TwitterOpReport>,
}

/// One operation of the workload.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TwitterOpReport {
    pub count: u64,
    pub errors: u64,
    /// `count` per second of the run (0 when routed only).
    pub throughput: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Mean distinct servers an operation asks, with the fewest-servers fan-out.
    pub servers_fewest: f64,
    /// The same with one replica per region.
    pub servers_each_region: f64,
    /// Mean requests an operation sends (one per server and subspace a read asks, one per
    /// point leader of a `multi_get`, one per put), with the fewest-servers fan-out.
    pub requests_fewest: f64,
    pub requests_each_region: f64,
    /// Mean objects an operation returned.
    pub returned: f64,
}

/// Why the Twitter workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum TwitterError {
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    #[error("{0}")]
    Client(#[from] tessera_client::ClientError),
}

/// The three spaces' descriptions for `placement`.
pub fn descriptions(args: &TwitterArgs) -> [String; 3] {
    let tail = format!(
        "create {} partitions tolerate {} failures",
        args.partitions, args.tolerate
    );
    let domain = format!(
        "placement ordered from 0 to {}",
        u64::from(args.users) << 32
    );
    let (tweets, timelines) = match args.placement {
        TweetPlacement::Random => (String::new(), String::new()),
        TweetPlacement::Ordered => (domain.clone(), domain.clone()),
        TweetPlacement::Tagged => ("placement tagged tags axes 1 spread 2".to_owned(), domain),
    };
    [
        format!("space {USERS} key int id attributes set(int) friends, set(int) followers {tail}"),
        format!(
            "space {TWEETS} key int id attributes int author, string text, set(string) tags {tail} {tweets}"
        ),
        format!("space {TIMELINES} key int id attributes int tweet {tail} {timelines}"),
    ]
}

fn item_key(user: u32, seq: u32) -> i64 {
    ((u64::from(user) << 32) | u64::from(u32::MAX - seq)) as i64
}

/// The keys of `user`'s tweets or timeline: `[user << 32, (user + 1) << 32)`.
fn user_range(user: u32) -> (Value, Value) {
    (
        Value::Int((u64::from(user) << 32) as i64),
        Value::Int((u64::from(user + 1) << 32) as i64),
    )
}

/// What the workload's world holds, as the benchmark keeps track of it: the graph and each
/// user's timeline ((entry, tweet) keys, oldest first).
struct World {
    graph: FollowGraph,
    timelines: Vec<Vec<(i64, i64)>>,
    seq: u32,
}

/// One tweet to write: its key, fields, and the timeline entries it makes.
struct NewTweet {
    key: i64,
    author: u32,
    tags: BTreeSet<String>,
    entries: Vec<i64>,
}

impl World {
    fn new(graph: FollowGraph) -> World {
        let n = graph.users() as usize;
        World {
            graph,
            timelines: vec![Vec::new(); n],
            seq: 0,
        }
    }

    /// A new tweet by a drawn author, recorded in the world.
    fn tweet(&mut self, source: &mut TweetSource, rng: &mut SmallRng) -> NewTweet {
        let author = source.author(rng);
        let t = source.tags(&self.graph, author, rng);
        let mut tags = BTreeSet::new();
        if let Some(m) = t.mention {
            tags.insert(format!("@{m}"));
        }
        if let Some(topic) = t.topic {
            tags.insert(format!("#{topic}"));
        }
        self.seq += 1;
        let key = item_key(author, self.seq);
        let followers: Vec<u32> = self.graph.followers[author as usize]
            .iter()
            .take(TIMELINE_FANOUT_MAX)
            .copied()
            .collect();
        let mut entries = Vec::with_capacity(followers.len());
        for f in followers {
            let entry = item_key(f, self.seq);
            self.timelines[f as usize].push((entry, key));
            entries.push(entry);
        }
        NewTweet {
            key,
            author,
            tags,
            entries,
        }
    }
}

/// What one operation read or wrote, for counting servers and requests by routing.
enum Touch {
    /// A search of a space by predicates.
    Search(&'static str, Vec<Predicate>),
    /// A `multi_get`: one request per point leader.
    Gets(&'static str, Vec<Value>),
    /// Puts: one request per key.
    Puts(&'static str, Vec<Value>),
}

/// An operation with its arguments, drawn from the world.
struct Planned {
    op: Operation,
    touches: Vec<Touch>,
    /// For a live run: what to do.
    action: Action,
}

enum Action {
    Tags(Vec<String>),
    UserTimeline(u32),
    FriendsTimeline(u32),
    Update(NewTweet),
    Friendship { from: u32, to: u32, add: bool },
}

fn tags_touch(tags: &[String]) -> Touch {
    Touch::Search(
        TWEETS,
        tags.iter()
            .map(|t| Predicate::new("tags", PredicateOp::Contains(Value::from(t.as_str()))))
            .collect(),
    )
}

fn range_touch(space: &'static str, user: u32) -> Touch {
    let (from, to) = user_range(user);
    Touch::Search(
        space,
        vec![
            Predicate::new("id", PredicateOp::GreaterEqual(from)),
            Predicate::new("id", PredicateOp::LessThan(to)),
        ],
    )
}

/// Draws the next operation and its arguments, updating the world for writes.
fn plan(world: &mut World, source: &mut TweetSource, rng: &mut SmallRng) -> Planned {
    let users = world.graph.users();
    let op = Operation::draw(rng);
    let (touches, action) = match op {
        Operation::SearchContainsHashtag => {
            let tags = vec![format!("#{}", source.topic(rng))];
            (vec![tags_touch(&tags)], Action::Tags(tags))
        }
        Operation::StatusesMentions => {
            let tags = vec![format!("@{}", source.author(rng))];
            (vec![tags_touch(&tags)], Action::Tags(tags))
        }
        Operation::StatusesUserTimeline => {
            let user = source.author(rng);
            (vec![range_touch(TWEETS, user)], Action::UserTimeline(user))
        }
        Operation::StatusesFriendsTimeline => {
            let user = rng.random_range(0..users);
            let newest: Vec<Value> = world.timelines[user as usize]
                .iter()
                .rev()
                .take(TIMELINE_LENGTH as usize)
                .map(|(_, tweet)| Value::Int(*tweet))
                .collect();
            (
                vec![range_touch(TIMELINES, user), Touch::Gets(TWEETS, newest)],
                Action::FriendsTimeline(user),
            )
        }
        Operation::StatusesUpdate => {
            let new = world.tweet(source, rng);
            let entries = new.entries.iter().map(|k| Value::Int(*k)).collect();
            (
                vec![
                    Touch::Puts(TWEETS, vec![Value::Int(new.key)]),
                    Touch::Puts(TIMELINES, entries),
                ],
                Action::Update(new),
            )
        }
        Operation::FriendshipsCreate | Operation::FriendshipsDestroy => {
            let add = op == Operation::FriendshipsCreate;
            let from = rng.random_range(0..users);
            let friends = &world.graph.friends[from as usize];
            let to = if add {
                source.author(rng)
            } else if friends.is_empty() {
                from
            } else {
                friends[rng.random_range(0..friends.len())]
            };
            if from != to {
                let (f, t) = (from as usize, to as usize);
                if add {
                    if let Err(i) = world.graph.friends[f].binary_search(&to) {
                        world.graph.friends[f].insert(i, to);
                    }
                    if let Err(i) = world.graph.followers[t].binary_search(&from) {
                        world.graph.followers[t].insert(i, from);
                    }
                } else {
                    world.graph.friends[f].retain(|&x| x != to);
                    world.graph.followers[t].retain(|&x| x != from);
                }
            }
            let keys = vec![Value::Int(i64::from(from)), Value::Int(i64::from(to))];
            (
                vec![Touch::Puts(USERS, keys)],
                Action::Friendship { from, to, add },
            )
        }
    };
    Planned {
        op,
        touches,
        action,
    }
}

/// (servers, requests) an operation's touches cost under `fanout`, by the client's routing.
fn route(
    spaces: &BTreeMap<&'static str, SpaceConfig>,
    touches: &[Touch],
    fanout: Fanout,
    turn: u64,
) -> Result<(usize, usize), TwitterError> {
    let mut servers: BTreeSet<ServerId> = BTreeSet::new();
    let mut requests = 0;
    for touch in touches {
        match touch {
            Touch::Search(space, predicates) => {
                let asked = search_contacts(&spaces[space], predicates, fanout, turn)?;
                requests += asked.len();
                servers.extend(asked.iter().map(|(s, _, _)| *s));
            }
            Touch::Gets(space, keys) => {
                let leaders = key_leaders(&spaces[space], keys)?;
                requests += leaders.len();
                servers.extend(leaders);
            }
            Touch::Puts(space, keys) => {
                requests += keys.len();
                servers.extend(key_leaders(&spaces[space], keys)?);
            }
        }
    }
    Ok((servers.len(), requests))
}

/// Per-operation tallies of one task.
#[derive(Clone)]
struct Tally {
    latency_us: Histogram<u64>,
    errors: u64,
    returned: u64,
    servers: [u64; 2],
    requests: [u64; 2],
    routed: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            errors: 0,
            returned: 0,
            servers: [0; 2],
            requests: [0; 2],
            routed: 0,
        }
    }

    fn merge(&mut self, other: &Tally) {
        self.latency_us.add(&other.latency_us).expect("same bounds");
        self.errors += other.errors;
        self.returned += other.returned;
        self.routed += other.routed;
        for i in 0..2 {
            self.servers[i] += other.servers[i];
            self.requests[i] += other.requests[i];
        }
    }

    fn count_route(
        &mut self,
        spaces: &BTreeMap<&'static str, SpaceConfig>,
        touches: &[Touch],
        turn: u64,
    ) -> Result<(), TwitterError> {
        for (i, fanout) in [Fanout::Fewest, Fanout::EachRegion].into_iter().enumerate() {
            let (servers, requests) = route(spaces, touches, fanout, turn)?;
            self.servers[i] += servers as u64;
            self.requests[i] += requests as u64;
        }
        self.routed += 1;
        Ok(())
    }

    fn report(&self, elapsed_s: f64) -> TwitterOpReport {
        let count = self.latency_us.len();
        let per = |n: u64| n as f64 / self.routed.max(1) as f64;
        TwitterOpReport {
            count,
            errors: self.errors,
            throughput: if elapsed_s > 0.0 {
                count as f64 / elapsed_s
            } else {
                0.0
            },
            p50_us: if count > 0 {
                self.latency_us.value_at_quantile(0.5)
            } else {
                0
            },
            p99_us: if count > 0 {
                self.latency_us.value_at_quantile(0.99)
            } else {
                0
            },
            servers_fewest: per(self.servers[0]),
            servers_each_region: per(self.servers[1]),
            requests_fewest: per(self.requests[0]),
            requests_each_region: per(self.requests[1]),
            returned: self.returned as f64 / count.max(1) as f64,
        }
    }
}

fn shape(args: &TwitterArgs, tweets: u64) -> TwitterShape {
    TwitterShape {
        users: args.users,
        initial_tweets: tweets,
        ..TwitterShape::default()
    }
}

fn check(args: &TwitterArgs) -> Result<(), TwitterError> {
    if args.users < 2 || args.users > 1 << 30 {
        return Err(TwitterError::InvalidArgs(format!(
            "--twitter-users {}: 2 to 2^30 users",
            args.users
        )));
    }
    Ok(())
}

/// The world after the initial tweets, built the same way for a run and for routing.
fn initial_world(
    args: &TwitterArgs,
    tweets: u64,
    seed: u64,
) -> (World, Vec<NewTweet>, TweetSource) {
    let shape = shape(args, tweets);
    let mut rng = SmallRng::seed_from_u64(seed);
    let graph = FollowGraph::scale_free(shape.users, shape.follows_per_user, &mut rng);
    let mut source = TweetSource::new(&graph, &shape);
    let mut world = World::new(graph);
    let initial = (0..tweets)
        .map(|_| world.tweet(&mut source, &mut rng))
        .collect();
    (world, initial, source)
}

/// Routes `operations` operations over a computed cluster of `args.route_servers` servers.
pub fn route_only(
    args: &TwitterArgs,
    tweets: u64,
    operations: u64,
    seed: u64,
) -> Result<TwitterReport, TwitterError> {
    check(args)?;
    let servers: Vec<ServerId> = (1..=u64::from(args.route_servers)).map(ServerId).collect();
    if servers.len() < (args.tolerate + 1) as usize {
        return Err(TwitterError::InvalidArgs(format!(
            "{} servers cannot hold {} replicas a region",
            servers.len(),
            args.tolerate + 1
        )));
    }
    let mut spaces: BTreeMap<&'static str, SpaceConfig> = BTreeMap::new();
    let mut existing: Vec<SpaceConfig> = Vec::new();
    for (i, (name, text)) in [USERS, TWEETS, TIMELINES]
        .into_iter()
        .zip(descriptions(args))
        .enumerate()
    {
        let schema = tessera_types::parse_space(&text)
            .map_err(|e| TwitterError::InvalidArgs(format!("{name}: {e}")))?;
        let mut config = SpaceConfig::owned_by(i as u64 + 1, schema.clone(), &servers[..1]);
        let sets = existing.iter().flat_map(SpaceConfig::replica_sets);
        config.replicas = tessera_geometry::assign_replicas(&schema, &servers, sets);
        existing.push(config.clone());
        spaces.insert(name, config);
    }
    let (mut world, _, mut source) = initial_world(args, tweets, seed);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let mut tallies: BTreeMap<Operation, Tally> = BTreeMap::new();
    for turn in 0..operations {
        let planned = plan(&mut world, &mut source, &mut rng);
        tallies
            .entry(planned.op)
            .or_insert_with(Tally::new)
            .count_route(&spaces, &planned.touches, turn)?;
    }
    Ok(report(args, servers.len(), true, 0.0, &tallies))
}

fn report(
    args: &TwitterArgs,
    servers: usize,
    routed_only: bool,
    elapsed_s: f64,
    tallies: &BTreeMap<Operation, Tally>,
) -> TwitterReport {
    TwitterReport {
        placement: args.placement,
        tolerate: args.tolerate,
        fanout: args.fanout,
        users: args.users,
        partitions: args.partitions,
        servers,
        routed_only,
        elapsed_s,
        ops: OPERATION_MIX
            .iter()
            .filter_map(|(op, _)| {
                let t = tallies.get(op)?;
                Some((op.name().to_owned(), t.report(elapsed_s)))
            })
            .collect(),
    }
}

/// Creates the spaces (dropping earlier ones), loads the users and `tweets` tweets, then runs
/// `operations` operations (or until `duration`) from `threads` closed-loop tasks sharing one
/// client.
pub async fn run_live(
    addr: &str,
    args: &TwitterArgs,
    tweets: u64,
    operations: u64,
    threads: usize,
    seed: u64,
    duration: Option<Duration>,
) -> Result<(TwitterReport, f64), TwitterError> {
    check(args)?;
    let options =
        ClientOptions::with_timeout(Duration::from_secs(30)).with_fanout(args.fanout.fanout());
    let client = Client::connect_with(addr, options).await?;
    for space in [USERS, TWEETS, TIMELINES] {
        let _ = client.rm_space(space).await;
    }
    for description in descriptions(args) {
        client.add_space(&description).await?;
    }
    let (world, initial, source) = initial_world(args, tweets, seed);
    let load_started = Instant::now();
    let users: Vec<(Value, Vec<Funcall>)> = (0..world.graph.users())
        .map(|u| {
            let set =
                |ids: &[u32]| Value::Set(ids.iter().map(|&v| Value::Int(i64::from(v))).collect());
            (
                Value::Int(i64::from(u)),
                vec![
                    Funcall::set("friends", set(&world.graph.friends[u as usize])),
                    Funcall::set("followers", set(&world.graph.followers[u as usize])),
                ],
            )
        })
        .collect();
    load_all(&client, USERS, users).await?;
    let mut tweet_puts = Vec::new();
    let mut entry_puts = Vec::new();
    for t in &initial {
        tweet_puts.push(tweet_put(t));
        entry_puts.extend(entry_puts_of(t));
    }
    load_all(&client, TWEETS, tweet_puts).await?;
    load_all(&client, TIMELINES, entry_puts).await?;
    let load_s = load_started.elapsed().as_secs_f64();

    let world = Arc::new(Mutex::new(world));
    let source = Arc::new(Mutex::new(source));
    let started = Instant::now();
    let issued = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..threads {
        let (client, world, source, issued) = (
            client.clone(),
            world.clone(),
            source.clone(),
            issued.clone(),
        );
        let mut rng = SmallRng::seed_from_u64(seed ^ (task as u64 + 1).wrapping_mul(0x9e37));
        tasks.push(tokio::spawn(async move {
            let mut tallies: BTreeMap<Operation, Tally> = BTreeMap::new();
            // The spaces routed by, copied again only when the configuration changes.
            let config = client.configuration();
            let mut spaces = (config.epoch, live_spaces(&config));
            loop {
                let turn = issued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if turn >= operations || duration.is_some_and(|d| started.elapsed() >= d) {
                    break;
                }
                let planned = {
                    let mut w = world.lock().expect("not poisoned");
                    let mut s = source.lock().expect("not poisoned");
                    plan(&mut w, &mut s, &mut rng)
                };
                let tally = tallies.entry(planned.op).or_insert_with(Tally::new);
                let config = client.configuration();
                if config.epoch != spaces.0 {
                    spaces = (config.epoch, live_spaces(&config));
                }
                tally.count_route(&spaces.1, &planned.touches, turn)?;
                let at = Instant::now();
                match perform(&client, planned.action).await {
                    Ok(returned) => {
                        let us = at.elapsed().as_micros().max(1) as u64;
                        tally.latency_us.saturating_record(us);
                        tally.returned += returned;
                    }
                    Err(_) => tally.errors += 1,
                }
            }
            Ok::<_, TwitterError>(tallies)
        }));
    }
    let mut tallies: BTreeMap<Operation, Tally> = BTreeMap::new();
    for t in tasks {
        let task_tallies = t.await.expect("a benchmark task panicked")?;
        for (op, tally) in task_tallies {
            tallies.entry(op).or_insert_with(Tally::new).merge(&tally);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let servers = client.configuration().servers.len().max(1);
    Ok((report(args, servers, false, elapsed, &tallies), load_s))
}

/// The three spaces as a client's configuration has them (a standalone server: one server
/// holding everything).
fn live_spaces(config: &tessera_client::Configuration) -> BTreeMap<&'static str, SpaceConfig> {
    [USERS, TWEETS, TIMELINES]
        .into_iter()
        .filter_map(|name| Some((name, config.space(name)?.clone())))
        .collect()
}

fn tweet_put(t: &NewTweet) -> (Value, Vec<Funcall>) {
    let tags = Value::Set(t.tags.iter().map(|s| Value::from(s.as_str())).collect());
    (
        Value::Int(t.key),
        vec![
            Funcall::set("author", i64::from(t.author)),
            Funcall::set("text", format!("tweet {} by {}", t.key, t.author)),
            Funcall::set("tags", tags),
        ],
    )
}

fn entry_puts_of(t: &NewTweet) -> Vec<(Value, Vec<Funcall>)> {
    t.entries
        .iter()
        .map(|&e| (Value::Int(e), vec![Funcall::set("tweet", t.key)]))
        .collect()
}

async fn load_all(
    client: &Client,
    space: &str,
    items: Vec<(Value, Vec<Funcall>)>,
) -> Result<(), TwitterError> {
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let batch: Vec<_> = items.by_ref().take(4096).collect();
        for outcome in client.multi_put(space, batch).await {
            outcome?;
        }
    }
    Ok(())
}

/// Runs one operation; returns the objects it read.
async fn perform(client: &Client, action: Action) -> Result<u64, TwitterError> {
    Ok(match action {
        Action::Tags(tags) => client.get_by_tags(TWEETS, tags).await?.len() as u64,
        Action::UserTimeline(user) => {
            let (from, to) = user_range(user);
            client
                .get_by_range(TWEETS, from, to, Some(TIMELINE_LENGTH))
                .await?
                .len() as u64
        }
        Action::FriendsTimeline(user) => {
            let (from, to) = user_range(user);
            let entries = client
                .get_by_range(TIMELINES, from, to, Some(TIMELINE_LENGTH))
                .await?;
            let ids: Vec<Value> = entries
                .iter()
                .filter_map(|r| r.attributes.get("tweet").cloned())
                .collect();
            let found = client.multi_get(TWEETS, ids).await?;
            (entries.len() + found.iter().flatten().count()) as u64
        }
        Action::Update(t) => {
            let (key, funcalls) = tweet_put(&t);
            client
                .write(
                    TWEETS,
                    key,
                    tessera_client::WriteMode::Upsert,
                    vec![],
                    funcalls,
                )
                .await?;
            for outcome in client.multi_put(TIMELINES, entry_puts_of(&t)).await {
                outcome?;
            }
            0
        }
        Action::Friendship { from, to, add } => {
            if from != to {
                let op = if add {
                    FuncallOp::SetAdd
                } else {
                    FuncallOp::SetRemove
                };
                client
                    .atomic(
                        USERS,
                        i64::from(from),
                        vec![Funcall::new("friends", op, Value::Int(i64::from(to)))],
                    )
                    .await?;
                client
                    .atomic(
                        USERS,
                        i64::from(to),
                        vec![Funcall::new("followers", op, Value::Int(i64::from(from)))],
                    )
                    .await?;
            }
            0
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(placement: TweetPlacement, tolerate: u32) -> TwitterArgs {
        TwitterArgs {
            placement,
            users: 300,
            tolerate,
            fanout: FanoutChoice::Fewest,
            partitions: 64,
            route_servers: 20,
        }
    }

    #[test]
    fn the_descriptions_parse() {
        for placement in [
            TweetPlacement::Random,
            TweetPlacement::Ordered,
            TweetPlacement::Tagged,
        ] {
            for text in descriptions(&args(placement, 2)) {
                tessera_types::parse_space(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            }
        }
    }

    #[test]
    fn keys_put_a_users_newest_first_in_its_range() {
        let (a, b) = (item_key(7, 10), item_key(7, 11));
        assert!(b < a, "the newer sorts first");
        let (from, to) = user_range(7);
        for k in [a, b] {
            assert!(Value::Int(k) >= from && Value::Int(k) < to);
        }
        assert!(item_key(6, u32::MAX - 1) < item_key(7, u32::MAX - 1));
    }

    /// Routing without servers: the placements read what they are built for from few servers,
    /// and the fewest-servers fan-out never asks more servers than one replica per region.
    #[test]
    fn routing_favours_each_placements_reads() {
        let servers = |placement, tolerate| {
            route_only(&args(placement, tolerate), 2000, 2000, 1).expect("routes")
        };
        let random = servers(TweetPlacement::Random, 0);
        let ordered = servers(TweetPlacement::Ordered, 0);
        let tagged = servers(TweetPlacement::Tagged, 0);
        let at = |r: &TwitterReport, op: &str| r.ops[op].servers_fewest;
        // A user's tweets are one range: one server or two when ordered, every one at random.
        assert!(at(&ordered, "statuses_user_timeline") <= 2.0);
        assert!(at(&random, "statuses_user_timeline") >= 15.0);
        // A mention or a topic: few stretches of the tag curve when tagged.
        assert!(at(&tagged, "statuses_mentions") <= 4.0);
        assert!(at(&random, "statuses_mentions") >= 15.0);
        assert!(at(&tagged, "search_contains_hashtag") <= 4.0);
        // With three replicas, the cover asks fewer servers than one replica per region.
        let k3 = servers(TweetPlacement::Random, 2);
        let op = &k3.ops["statuses_mentions"];
        assert!(op.servers_fewest < op.servers_each_region, "{op:?}");
        for r in [&random, &ordered, &tagged, &k3] {
            for (name, op) in &r.ops {
                assert!(
                    op.servers_fewest <= op.servers_each_region,
                    "{name}: {op:?}"
                );
                assert!(op.servers_fewest >= 1.0, "{name}: {op:?}");
            }
        }
    }
}
