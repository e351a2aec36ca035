//! The Twitter workload of seed 003 §3.1 (DataDroplets), as pure data: who follows whom,
//! which tweets exist, and which operation comes next. What runs the operations against a
//! store (three spaces: users, tweets, timelines) builds on this.
//!
//! * The follow graph is scale-free, as Twitter's is: users arrive one by one and each follows
//!   [`TwitterShape::follows_per_user`] earlier users picked with probability proportional to
//!   their followers plus one (preferential attachment), so a few users gather most followers.
//! * Tweets per user are proportional to the user's followers (plus one, so everyone tweets
//!   now and then). 36 % of tweets mention a user, picked at random among the author's friends
//!   (those the author follows); 5 % carry a topic, picked from a power law (Zipf) over the
//!   topics.
//! * Operations are drawn with Table 1's probabilities ([`Operation::draw`]).
//!
//! Every function takes its random source (`&mut impl Rng`), so a seed fixes the workload.

use rand::Rng;

use crate::generator::Zipfian;

/// How big the workload's world is, and its proportions (the seed's by default).
#[derive(Clone, Debug, PartialEq)]
pub struct TwitterShape {
    pub users: u32,
    /// Earlier users each arriving user follows (fewer for the first ones).
    pub follows_per_user: u32,
    /// Tweets written before the operations start, over all users.
    pub initial_tweets: u64,
    /// Share of tweets that mention a friend: 36 % in the seed's traces.
    pub mention_share: f64,
    /// Share of tweets that carry a topic: 5 % in the seed's traces.
    pub topic_share: f64,
    /// Distinct topics (hashtags), drawn by a power law.
    pub topics: u32,
}

impl Default for TwitterShape {
    fn default() -> TwitterShape {
        TwitterShape {
            users: 10_000,
            follows_per_user: 10,
            initial_tweets: 100_000,
            mention_share: 0.36,
            topic_share: 0.05,
            topics: 1_000,
        }
    }
}

/// Who follows whom: `friends[u]` are the users `u` follows, `followers[u]` those following
/// `u`, each in increasing order, no user following itself or anyone twice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowGraph {
    pub friends: Vec<Vec<u32>>,
    pub followers: Vec<Vec<u32>>,
}

impl FollowGraph {
    /// A scale-free graph by preferential attachment (see the module's documentation).
    pub fn scale_free(users: u32, follows_per_user: u32, rng: &mut impl Rng) -> FollowGraph {
        let n = users as usize;
        let mut friends: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut followers: Vec<Vec<u32>> = vec![Vec::new(); n];
        // Every user once, plus once more per follower: a uniform pick from it is a pick
        // proportional to followers + 1.
        let mut urn: Vec<u32> = Vec::with_capacity(n * (1 + follows_per_user as usize));
        for u in 0..users {
            let wanted = follows_per_user.min(u) as usize;
            let mut picked: Vec<u32> = Vec::with_capacity(wanted);
            while picked.len() < wanted {
                let v = urn[rng.random_range(0..urn.len())];
                if !picked.contains(&v) {
                    picked.push(v);
                }
            }
            for &v in &picked {
                followers[v as usize].push(u);
                urn.push(v);
            }
            picked.sort_unstable();
            friends[u as usize] = picked;
            urn.push(u);
        }
        // The first user arrived to an empty world: it follows one user picked the same way
        // later, so every user has a friend to mention.
        if users > 1 {
            let v = loop {
                let v = urn[rng.random_range(0..urn.len())];
                if v != 0 {
                    break v;
                }
            };
            friends[0].push(v);
            // User 0 comes first in any list of followers.
            followers[v as usize].insert(0, 0);
        }
        FollowGraph { friends, followers }
    }

    pub fn users(&self) -> u32 {
        self.friends.len() as u32
    }
}

/// One tweet's tags: the user it mentions and the topic it carries, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TweetTags {
    pub mention: Option<u32>,
    pub topic: Option<u32>,
}

/// Draws tweets' authors and tags with the seed's proportions.
pub struct TweetSource {
    /// Users, each `followers + 1` times: a uniform pick is an author proportional to followers.
    authors: Vec<u32>,
    topics: Zipfian,
    mention_share: f64,
    topic_share: f64,
}

impl TweetSource {
    pub fn new(graph: &FollowGraph, shape: &TwitterShape) -> TweetSource {
        let mut authors = Vec::new();
        for (u, f) in graph.followers.iter().enumerate() {
            authors.extend(std::iter::repeat_n(u as u32, f.len() + 1));
        }
        TweetSource {
            authors,
            topics: Zipfian::new(0, u64::from(shape.topics.max(1)) - 1),
            mention_share: shape.mention_share,
            topic_share: shape.topic_share,
        }
    }

    /// The author of the next tweet: proportional to followers + 1.
    pub fn author(&self, rng: &mut impl Rng) -> u32 {
        self.authors[rng.random_range(0..self.authors.len())]
    }

    /// The tags of a tweet by `author`: a mention of one of its friends (none when it follows
    /// nobody) and a topic, each with its share.
    pub fn tags(&mut self, graph: &FollowGraph, author: u32, rng: &mut impl Rng) -> TweetTags {
        let friends = &graph.friends[author as usize];
        let mention = (rng.random_bool(self.mention_share) && !friends.is_empty())
            .then(|| friends[rng.random_range(0..friends.len())]);
        let topic = rng.random_bool(self.topic_share).then(|| self.topic(rng));
        TweetTags { mention, topic }
    }

    /// A topic, by the power law tweets' topics follow (what a hashtag search asks for).
    pub fn topic(&mut self, rng: &mut impl Rng) -> u32 {
        self.topics.next(rng) as u32
    }
}

/// The seven operations of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    SearchContainsHashtag,
    StatusesMentions,
    StatusesUserTimeline,
    StatusesFriendsTimeline,
    StatusesUpdate,
    FriendshipsCreate,
    FriendshipsDestroy,
}

/// Table 1 of seed 003, in thousandths.
pub const OPERATION_MIX: [(Operation, u32); 7] = [
    (Operation::SearchContainsHashtag, 150),
    (Operation::StatusesMentions, 250),
    (Operation::StatusesUserTimeline, 50),
    (Operation::StatusesFriendsTimeline, 450),
    (Operation::StatusesUpdate, 50),
    (Operation::FriendshipsCreate, 25),
    (Operation::FriendshipsDestroy, 25),
];

impl Operation {
    /// The next operation, with Table 1's probabilities.
    pub fn draw(rng: &mut impl Rng) -> Operation {
        let mut at = rng.random_range(0..1000u32);
        for (op, share) in OPERATION_MIX {
            if at < share {
                return op;
            }
            at -= share;
        }
        unreachable!("the mix sums to 1000")
    }

    pub fn name(self) -> &'static str {
        match self {
            Operation::SearchContainsHashtag => "search_contains_hashtag",
            Operation::StatusesMentions => "statuses_mentions",
            Operation::StatusesUserTimeline => "statuses_user_timeline",
            Operation::StatusesFriendsTimeline => "statuses_friends_timeline",
            Operation::StatusesUpdate => "statuses_update",
            Operation::FriendshipsCreate => "friendships_create",
            Operation::FriendshipsDestroy => "friendships_destroy",
        }
    }

    /// Whether it changes anything.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Operation::StatusesUpdate
                | Operation::FriendshipsCreate
                | Operation::FriendshipsDestroy
        )
    }
}

const _: () = {
    let mut sum = 0;
    let mut i = 0;
    while i < OPERATION_MIX.len() {
        sum += OPERATION_MIX[i].1;
        i += 1;
    }
    assert!(sum == 1000, "Table 1 sums to 100 %");
};

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn graph(seed: u64) -> FollowGraph {
        FollowGraph::scale_free(5_000, 8, &mut SmallRng::seed_from_u64(seed))
    }

    #[test]
    fn the_follow_graph_is_consistent_and_scale_free() {
        let g = graph(1);
        assert_eq!(g, graph(1), "a seed fixes the graph");
        let mut edges = 0;
        for (u, fs) in g.friends.iter().enumerate() {
            assert!(fs.windows(2).all(|w| w[0] < w[1]), "no one followed twice");
            assert!(!fs.contains(&(u as u32)), "no one follows itself");
            for &v in fs {
                assert!(g.followers[v as usize].binary_search(&(u as u32)).is_ok());
            }
            edges += fs.len();
        }
        assert_eq!(
            edges,
            g.followers.iter().map(Vec::len).sum::<usize>(),
            "every follow seen from both ends"
        );
        // Heavy tail: the top 1 % of users by followers hold far more than 1 % of the follows,
        // and the most followed far more than the mean (a uniform graph gives about 1 % and
        // about twice the mean).
        let mut counts: Vec<usize> = g.followers.iter().map(Vec::len).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: usize = counts[..counts.len() / 100].iter().sum();
        assert!(top * 100 > edges * 10, "top 1 % hold {top} of {edges}");
        let mean = edges as f64 / counts.len() as f64;
        assert!(
            counts[0] as f64 > 20.0 * mean,
            "max {} mean {mean}",
            counts[0]
        );
    }

    #[test]
    fn tweets_follow_followers_and_carry_the_seeds_shares_of_tags() {
        let g = graph(2);
        let shape = TwitterShape::default();
        let mut source = TweetSource::new(&g, &shape);
        let mut rng = SmallRng::seed_from_u64(3);
        let n = 200_000;
        let mut by_author = vec![0u64; g.users() as usize];
        let (mut mentions, mut topics) = (0u64, 0u64);
        let mut by_topic = vec![0u64; shape.topics as usize];
        for _ in 0..n {
            let author = source.author(&mut rng);
            by_author[author as usize] += 1;
            let tags = source.tags(&g, author, &mut rng);
            if let Some(m) = tags.mention {
                assert!(
                    g.friends[author as usize].contains(&m),
                    "a friend is mentioned"
                );
                mentions += 1;
            }
            if let Some(t) = tags.topic {
                topics += 1;
                by_topic[t as usize] += 1;
            }
        }
        // Proportional to followers + 1: the most followed user writes about
        // (followers + 1) / (edges + users) of the tweets.
        let weights: u64 = g.followers.iter().map(|f| f.len() as u64 + 1).sum();
        let star = (0..g.users() as usize)
            .max_by_key(|&u| g.followers[u].len())
            .unwrap();
        let expected = n as f64 * (g.followers[star].len() + 1) as f64 / weights as f64;
        let got = by_author[star] as f64;
        assert!(
            (got - expected).abs() < 0.1 * expected,
            "{got} vs {expected}"
        );
        // 36 % mention (every user follows someone), 5 % carry a topic.
        let mention_share = mentions as f64 / n as f64;
        assert!((mention_share - 0.36).abs() < 0.01, "{mention_share}");
        let topic_share = topics as f64 / n as f64;
        assert!((topic_share - 0.05).abs() < 0.005, "{topic_share}");
        // Topics by a power law: the most used topic far above the median one.
        by_topic.sort_unstable_by(|a, b| b.cmp(a));
        assert!(by_topic[0] > 20 * by_topic[by_topic.len() / 2].max(1));
    }

    #[test]
    fn operations_come_in_table_1s_proportions() {
        let mut rng = SmallRng::seed_from_u64(4);
        let n = 400_000u32;
        let mut seen = std::collections::BTreeMap::new();
        for _ in 0..n {
            *seen.entry(Operation::draw(&mut rng)).or_insert(0u32) += 1;
        }
        for (op, thousandths) in OPERATION_MIX {
            let share = f64::from(seen[&op]) / f64::from(n);
            let wanted = f64::from(thousandths) / 1000.0;
            assert!((share - wanted).abs() < 0.005, "{}: {share}", op.name());
        }
        assert_eq!(
            OPERATION_MIX.iter().filter(|(op, _)| op.writes()).count(),
            3
        );
    }
}
