//! The hotel data set and the workloads A, B and C of seed 000 §5.2, for the advisor's
//! evaluation ([`crate::advisor_eval`]). Pure and seeded: every value is a function of the
//! seed, the hotel's number, the attribute and how many times the attribute was updated.
//!
//! # The data set
//!
//! A hotel has a key (`h{n}`), `city`, `stars`, `price`, `address`, `postcode` and `tel`: the
//! attributes of the seed's hotels (§3.3). The seed gives one figure about them: a search by
//! city returns 50 hotels on average, and one by city and address a single hotel (§3.3). The
//! rest is chosen here, to look like a hotel directory (see docs/advisor.md):
//!
//! * `city` (string): `hotels / 50` cities (at least 1), so a city holds
//!   [`HOTELS_PER_CITY_MEAN`] hotels on average as in the seed, drawn from a Zipf law of
//!   exponent [`CITY_ZIPF_EXPONENT`] over the cities (a few large cities, many small ones).
//! * `stars` (int, 1 to 5): [`STARS_WEIGHTS`], most hotels 3 or 4 stars.
//! * `price` (int, euros a night): [`PRICE_BASE`] for the hotel's stars times a factor
//!   log-uniform in [[`PRICE_FACTOR_MIN`], [`PRICE_FACTOR_MAX`]]: correlated with stars.
//! * `address` (string): house number, street name, street kind: near-unique (about a million
//!   combinations), so city and address single out a hotel as in the seed.
//! * `postcode` (string): one of [`POSTCODES_PER_CITY`] postcodes of the hotel's city
//!   (correlated with the city: a postcode implies its city).
//! * `tel` (string): a nine-digit number: near-unique.
//!
//! Updates assign new values of the same laws: a new address or tel, a new postcode of the same
//! city, a new price for the same stars. `city` and `stars` never change.
//!
//! # The workloads
//!
//! Seed 000 §5.2 describes them in words only; its searches (§4.5, Table 4.4) fix `city`,
//! `city, address`, `city, address, postcode` and `city, address, postcode, tel` by equality.
//!
//! * **A** (very specific searches): those four classes with *increasing* probability,
//!   [`SEARCH_WEIGHTS_INCREASING`] (0.1, 0.2, 0.3, 0.4 of the searches); modifications: two
//!   classes of equal probability, each updating one attribute that is neither the most nor the
//!   least frequent in the searches (`city` is in all four, `tel` in one): `address` (in three)
//!   and `postcode` (in two).
//! * **B** (broad searches): the same classes in the *inverse* order of likelihood (0.4 … 0.1);
//!   modifications: a frequent update of `price` ([`B_PRICE_SHARE`] of them) and a rarer one of
//!   `address`, `postcode` and `tel` together.
//! * **C**: A's searches and modifications with slightly more writes: each mix has
//!   [`C_EXTRA_WRITES`] more modifications than A's.
//!
//! Each in three mixes (§5.2): read-heavy RH (90 % searches), balanced BAL (50 %) and
//! write-heavy WH (10 %); C's are 85 %, 45 % and 5 %. Nine workloads in all, each rendered as
//! the advisor's workload file ([`HotelWorkload::workload_file`]) and chosen from by the driver
//! ([`HotelWorkload::choose`]) from the same list of classes.

use std::collections::BTreeMap;
use std::fmt;

use rand::Rng;
use serde::Serialize;
use tessera_types::{SpaceSchema, Value};

use crate::subspaces::mix;

/// The space the evaluation creates (and drops) for every configuration it measures.
pub const SPACE_NAME: &str = "advisor_eval_hotels";

/// Hotels per city on average: seed 000 §3.3 ("Q1 returns on average 50 hotels").
pub const HOTELS_PER_CITY_MEAN: u64 = 50;
/// Exponent of the Zipf law of hotels over cities (city `i`, from 1, gets a share ∝ 1/i^s).
/// 0.5: the largest city of 400 holds about 2.6 % of the hotels (520 of 20 000), the smallest
/// about 13.
pub const CITY_ZIPF_EXPONENT: f64 = 0.5;
/// Postcodes per city: about 5 hotels per postcode on average.
pub const POSTCODES_PER_CITY: u64 = 10;
/// Share of hotels with 1, 2, 3, 4 and 5 stars.
pub const STARS_WEIGHTS: [f64; 5] = [0.05, 0.15, 0.35, 0.30, 0.15];
/// Median-ish price of a night, in euros, by stars (1 to 5).
pub const PRICE_BASE: [f64; 5] = [45.0, 70.0, 105.0, 170.0, 280.0];
/// A price is its stars' base times a factor log-uniform between these.
pub const PRICE_FACTOR_MIN: f64 = 0.7;
pub const PRICE_FACTOR_MAX: f64 = 1.45;

/// Probabilities of the four search classes of A and C (fixing 1, 2, 3, 4 attributes); B
/// takes them in reverse.
pub const SEARCH_WEIGHTS_INCREASING: [f64; 4] = [0.1, 0.2, 0.3, 0.4];
/// B: the share of modifications that update `price` alone; the rest update `address`,
/// `postcode` and `tel` together.
pub const B_PRICE_SHARE: f64 = 0.8;
/// C: modifications added to each of A's mixes (0.05: RH 85 % searches, BAL 45 %, WH 5 %).
pub const C_EXTRA_WRITES: f64 = 0.05;

/// A hotel attribute (the key aside).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Attribute {
    City,
    Stars,
    Price,
    Address,
    Postcode,
    Tel,
}

impl Attribute {
    /// In the space's declaration order.
    pub const ALL: [Attribute; 6] = [
        Attribute::City,
        Attribute::Stars,
        Attribute::Price,
        Attribute::Address,
        Attribute::Postcode,
        Attribute::Tel,
    ];
    /// The attributes updates change, each with its slot in [`Generations`].
    pub const UPDATED: [Attribute; 4] = [
        Attribute::Price,
        Attribute::Address,
        Attribute::Postcode,
        Attribute::Tel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attribute::City => "city",
            Attribute::Stars => "stars",
            Attribute::Price => "price",
            Attribute::Address => "address",
            Attribute::Postcode => "postcode",
            Attribute::Tel => "tel",
        }
    }

    pub fn from_name(name: &str) -> Option<Attribute> {
        Attribute::ALL.into_iter().find(|a| a.name() == name)
    }

    fn type_name(self) -> &'static str {
        match self {
            Attribute::Stars | Attribute::Price => "int",
            _ => "string",
        }
    }

    /// Its slot among [`Attribute::UPDATED`], if updates change it.
    pub fn updated_slot(self) -> Option<usize> {
        Attribute::UPDATED.iter().position(|&a| a == self)
    }

    fn salt(self) -> u64 {
        0xA77A_0000 + self as u64
    }
}

impl fmt::Display for Attribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The space description with these subspaces (attribute names, in declaration order): the one
/// place that says what the evaluation's space is. One copy of each region (`tolerate 0
/// failures`): K = 1, on a cluster as on a standalone server.
pub fn space_description(subspaces: &[Vec<String>], partitions: u32) -> String {
    let mut d = format!("space {SPACE_NAME}\nkey id\nattributes ");
    d.push_str(
        &Attribute::ALL
            .iter()
            .map(|a| format!("{} {}", a.type_name(), a.name()))
            .collect::<Vec<_>>()
            .join(", "),
    );
    d.push('\n');
    for s in subspaces {
        d.push_str(&format!("subspace {}\n", s.join(", ")));
    }
    d.push_str(&format!(
        "create {partitions} partitions\ntolerate 0 failures\n"
    ));
    d
}

/// The space without subspaces (the key's only), as the advisor is given it.
pub fn base_schema(partitions: u32) -> SpaceSchema {
    tessera_types::parse_space(&space_description(&[], partitions))
        .expect("the evaluation's space description is valid")
}

/// A uniform number in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

const CITY_SYLLABLES: [&str; 16] = [
    "bel", "mar", "san", "to", "ri", "vel", "por", "lin", "ca", "ster", "dor", "ne", "al", "vik",
    "mon", "ga",
];
const STREET_NAMES: [&str; 32] = [
    "Oak", "Mill", "Church", "Station", "Harbour", "King", "Queen", "Market", "Bridge", "Castle",
    "Garden", "River", "Park", "Victoria", "Main", "High", "Elm", "Cedar", "Lake", "Hill", "Rose",
    "Abbey", "Chapel", "Forest", "Meadow", "North", "South", "West", "East", "Spring", "Orchard",
    "Windmill",
];
const STREET_QUALIFIERS: [&str; 16] = [
    "", "Old ", "New ", "Upper ", "Lower ", "Little ", "Great ", "St ", "Long ", "Green ",
    "Grand ", "Royal ", "Saint ", "Low ", "Far ", "Near ",
];
const STREET_KINDS: [&str; 8] = [
    "Street",
    "Road",
    "Avenue",
    "Lane",
    "Square",
    "Place",
    "Boulevard",
    "Quay",
];
/// House numbers 1 to this.
const HOUSE_NUMBERS: u64 = 250;

/// The hotel data set: `count` hotels from `seed`.
#[derive(Clone, Debug)]
pub struct Hotels {
    count: u64,
    seed: u64,
    /// Cumulative shares of the cities (Zipf), the last one 1.
    city_cdf: Vec<f64>,
}

impl Hotels {
    pub fn new(count: u64, seed: u64) -> Hotels {
        assert!(count > 0, "a data set has hotels");
        let cities = (count / HOTELS_PER_CITY_MEAN).max(1);
        let weights: Vec<f64> = (1..=cities)
            .map(|i| (i as f64).powf(-CITY_ZIPF_EXPONENT))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut city_cdf: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        *city_cdf.last_mut().expect("at least one city") = 1.0;
        Hotels {
            count,
            seed,
            city_cdf,
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn cities(&self) -> u64 {
        self.city_cdf.len() as u64
    }

    /// The key of hotel `n`.
    pub fn key(n: u64) -> String {
        format!("h{n}")
    }

    fn hash(&self, n: u64, attr: Attribute, generation: u32) -> u64 {
        mix(mix(mix(self.seed ^ attr.salt()) ^ n) ^ generation as u64)
    }

    /// The city (index) of hotel `n`.
    pub fn city_index(&self, n: u64) -> u64 {
        let u = unit(self.hash(n, Attribute::City, 0));
        self.city_cdf.partition_point(|&c| c <= u) as u64
    }

    /// The name of city `i`: syllables from the digits of `i` in base 16.
    pub fn city_name(i: u64) -> String {
        let mut name = String::new();
        let mut x = i;
        loop {
            name.push_str(CITY_SYLLABLES[(x % 16) as usize]);
            x /= 16;
            if x == 0 {
                break;
            }
        }
        // The first syllable from the lowest digit: different cities, different names.
        let mut chars = name.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => name,
        }
    }

    /// The stars (1 to 5) of hotel `n`.
    pub fn stars(&self, n: u64) -> i64 {
        let u = unit(self.hash(n, Attribute::Stars, 0));
        let mut acc = 0.0;
        for (i, w) in STARS_WEIGHTS.iter().enumerate() {
            acc += w;
            if u < acc {
                return i as i64 + 1;
            }
        }
        STARS_WEIGHTS.len() as i64
    }

    /// Attribute `attr` of hotel `n` after `generation` updates of it (`city` and `stars` have
    /// only generation 0).
    pub fn value(&self, n: u64, attr: Attribute, generation: u32) -> Value {
        let h = self.hash(n, attr, generation);
        match attr {
            Attribute::City => Value::from(Hotels::city_name(self.city_index(n))),
            Attribute::Stars => Value::Int(self.stars(n)),
            Attribute::Price => {
                let base = PRICE_BASE[(self.stars(n) - 1) as usize];
                let (lo, hi) = (PRICE_FACTOR_MIN.ln(), PRICE_FACTOR_MAX.ln());
                let factor = (lo + unit(h) * (hi - lo)).exp();
                Value::Int((base * factor).round() as i64)
            }
            Attribute::Address => {
                let house = 1 + h % HOUSE_NUMBERS;
                let h2 = mix(h);
                Value::from(format!(
                    "{house} {}{} {}",
                    STREET_QUALIFIERS[(h2 % 16) as usize],
                    STREET_NAMES[((h2 >> 8) % 32) as usize],
                    STREET_KINDS[((h2 >> 16) % 8) as usize]
                ))
            }
            Attribute::Postcode => {
                let k = h % POSTCODES_PER_CITY;
                Value::from(format!(
                    "{:05}",
                    self.city_index(n) * POSTCODES_PER_CITY + k
                ))
            }
            Attribute::Tel => {
                let digits = h % 1_000_000_000;
                Value::from(format!(
                    "+33 {} {:02} {:02} {:02} {:02}",
                    1 + digits / 100_000_000,
                    digits / 1_000_000 % 100,
                    digits / 10_000 % 100,
                    digits / 100 % 100,
                    digits % 100
                ))
            }
        }
    }

    /// Every attribute of hotel `n` as loaded (generation 0).
    pub fn object(&self, n: u64) -> Vec<(&'static str, Value)> {
        Attribute::ALL
            .iter()
            .map(|&a| (a.name(), self.value(n, a, 0)))
            .collect()
    }

    /// What the loaded data set holds, per attribute.
    pub fn census(&self) -> Census {
        let mut attributes = BTreeMap::new();
        for attr in Attribute::ALL {
            let mut counts: BTreeMap<Value, u64> = BTreeMap::new();
            for n in 0..self.count {
                *counts.entry(self.value(n, attr, 0)).or_default() += 1;
            }
            let total = self.count as f64;
            let sum_squares: f64 = counts.values().map(|&c| (c as f64 / total).powi(2)).sum();
            let largest = counts.values().copied().max().unwrap_or(0);
            let spread = match (counts.keys().next(), counts.keys().next_back()) {
                (Some(Value::Int(lo)), Some(Value::Int(hi))) => {
                    Some((hi.abs_diff(*lo) as f64 + 1.0) / 2f64.powi(64))
                }
                _ => None,
            };
            attributes.insert(
                attr,
                AttributeCensus {
                    distinct: counts.len() as u64,
                    effective_distinct: 1.0 / sum_squares,
                    largest_share: largest as f64 / total,
                    spread,
                },
            );
        }
        Census {
            hotels: self.count,
            cities: self.cities(),
            attributes,
        }
    }
}

/// The loaded data set, per attribute.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Census {
    pub hotels: u64,
    pub cities: u64,
    pub attributes: BTreeMap<Attribute, AttributeCensus>,
}

/// One attribute's values over the loaded data set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttributeCensus {
    /// Distinct values.
    pub distinct: u64,
    /// 1 / Σ share², the share being each value's fraction of the hotels: the `distinct` under
    /// which the model's equality selectivity (1 / distinct) is the expected fraction of the
    /// hotels a search returns when its value is that of a random hotel, as the driver draws
    /// them. Equal to `distinct` for uniform values, fewer for skewed ones (cities).
    pub effective_distinct: f64,
    /// The most frequent value's fraction of the hotels.
    pub largest_share: f64,
    /// Int attributes: the fraction of the int axis (2^64 values) between the smallest and the
    /// largest value, the model's `spread`. Tessera cuts an int dimension into equal slices of
    /// the whole axis, so prices and stars all sit in one slice: an update never moves a hotel
    /// along them, a range never narrows them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
}

/// How many times each updated attribute of each hotel has been updated, as far as the driver
/// knows: a search asks for a hotel's current values, an update writes the next generation.
/// Each task updates only its own hotels ([`own_hotel`]), and records a generation once the
/// put is acknowledged, so a search may lag a write in flight but never runs ahead of one.
#[derive(Debug)]
pub struct Generations {
    slots: Vec<std::sync::atomic::AtomicU32>,
}

impl Generations {
    pub fn new(hotels: u64) -> Generations {
        Generations {
            slots: (0..hotels as usize * Attribute::UPDATED.len())
                .map(|_| std::sync::atomic::AtomicU32::new(0))
                .collect(),
        }
    }

    fn slot(&self, n: u64, attr: Attribute) -> Option<&std::sync::atomic::AtomicU32> {
        let i = attr.updated_slot()?;
        self.slots.get(n as usize * Attribute::UPDATED.len() + i)
    }

    /// The generation of `attr` of hotel `n` (0 for attributes no update changes).
    pub fn get(&self, n: u64, attr: Attribute) -> u32 {
        self.slot(n, attr)
            .map_or(0, |s| s.load(std::sync::atomic::Ordering::Acquire))
    }

    pub fn set(&self, n: u64, attr: Attribute, generation: u32) {
        if let Some(s) = self.slot(n, attr) {
            s.store(generation, std::sync::atomic::Ordering::Release);
        }
    }
}

/// A random hotel among task `task`'s own (`n % tasks == task`) of `hotels`. Needs
/// `hotels >= tasks`, so that every task has one.
pub fn own_hotel<R: Rng + ?Sized>(rng: &mut R, task: u64, tasks: u64, hotels: u64) -> u64 {
    assert!(task < tasks && tasks <= hotels);
    let owned = (hotels - task).div_ceil(tasks);
    task + tasks * rng.random_range(0..owned)
}

/// A workload family of seed 000 §5.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Family {
    A,
    B,
    C,
    /// Not seed 000's: the workload the shift experiment switches to (`advisor-shift`),
    /// searches by `postcode` and by `tel` (half each), updates of `price` and of `address`
    /// (half each). No search of A, B or C fixes either alone, so its best subspaces differ.
    D,
}

/// The share of searches (seed 000 §5.2: RH 90 %, BAL 50 %, WH 10 %; C has
/// [`C_EXTRA_WRITES`] more writes). `S` and `M` are the step-by-step validation's
/// micro-scenarios (seed 000 §4.5, tables 4.2–4.6): a family's searches alone and its
/// modifications alone, at the family's relative weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mix {
    #[serde(rename = "RH")]
    ReadHeavy,
    #[serde(rename = "BAL")]
    Balanced,
    #[serde(rename = "WH")]
    WriteHeavy,
    #[serde(rename = "S")]
    SearchOnly,
    #[serde(rename = "M")]
    ModifyOnly,
}

impl Mix {
    /// The seed's three mixes.
    pub const ALL: [Mix; 3] = [Mix::ReadHeavy, Mix::Balanced, Mix::WriteHeavy];
    /// The micro-scenarios.
    pub const MICRO: [Mix; 2] = [Mix::SearchOnly, Mix::ModifyOnly];

    pub fn label(self) -> &'static str {
        match self {
            Mix::ReadHeavy => "RH",
            Mix::Balanced => "BAL",
            Mix::WriteHeavy => "WH",
            Mix::SearchOnly => "S",
            Mix::ModifyOnly => "M",
        }
    }

    /// The searches' share in workloads A and B.
    pub fn search_share(self) -> f64 {
        match self {
            Mix::ReadHeavy => 0.9,
            Mix::Balanced => 0.5,
            Mix::WriteHeavy => 0.1,
            Mix::SearchOnly => 1.0,
            Mix::ModifyOnly => 0.0,
        }
    }
}

/// What one class of a workload does.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HotelOperation {
    /// A search fixing these attributes by equality to a random hotel's current values.
    Search(Vec<Attribute>),
    /// A put of a random existing hotel assigning new values to these attributes.
    Update(Vec<Attribute>),
}

impl HotelOperation {
    /// `search city, address` or `update price`.
    pub fn describe(&self) -> String {
        let (verb, attrs) = match self {
            HotelOperation::Search(a) => ("search", a),
            HotelOperation::Update(a) => ("update", a),
        };
        let names: Vec<&str> = attrs.iter().map(|a| a.name()).collect();
        format!("{verb} {}", names.join(", "))
    }
}

/// One class of a workload and its probability among all operations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotelClass {
    pub probability: f64,
    pub operation: HotelOperation,
}

/// One of the nine workloads: a family in a mix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotelWorkload {
    pub family: Family,
    pub mix: Mix,
    pub classes: Vec<HotelClass>,
}

/// The four search classes of seed 000's hotel workloads, fixing 1 to 4 attributes.
pub fn search_classes() -> [Vec<Attribute>; 4] {
    use Attribute::*;
    [
        vec![City],
        vec![City, Address],
        vec![City, Address, Postcode],
        vec![City, Address, Postcode, Tel],
    ]
}

impl HotelWorkload {
    pub fn new(family: Family, mix: Mix) -> HotelWorkload {
        use Attribute::*;
        let micro = Mix::MICRO.contains(&mix);
        let extra_writes = if family == Family::C && !micro {
            C_EXTRA_WRITES
        } else {
            0.0
        };
        let searches = mix.search_share() - extra_writes;
        let writes = 1.0 - searches;
        let search_weights: Vec<f64> = match family {
            Family::A | Family::C => SEARCH_WEIGHTS_INCREASING.to_vec(),
            Family::B => SEARCH_WEIGHTS_INCREASING.iter().rev().copied().collect(),
            Family::D => vec![0.5, 0.5],
        };
        let updates: Vec<(f64, Vec<Attribute>)> = match family {
            Family::A | Family::C => vec![(0.5, vec![Address]), (0.5, vec![Postcode])],
            Family::B => vec![
                (B_PRICE_SHARE, vec![Price]),
                (1.0 - B_PRICE_SHARE, vec![Address, Postcode, Tel]),
            ],
            Family::D => vec![(0.5, vec![Price]), (0.5, vec![Address])],
        };
        let searched: Vec<Vec<Attribute>> = match family {
            Family::D => vec![vec![Postcode], vec![Tel]],
            _ => search_classes().to_vec(),
        };
        let mut classes: Vec<HotelClass> = searched
            .into_iter()
            .zip(search_weights)
            .map(|(attrs, w)| HotelClass {
                probability: searches * w,
                operation: HotelOperation::Search(attrs),
            })
            .collect();
        classes.extend(updates.into_iter().map(|(w, attrs)| HotelClass {
            probability: writes * w,
            operation: HotelOperation::Update(attrs),
        }));
        // A micro-scenario has no class of the other kind.
        classes.retain(|c| c.probability > 0.0);
        HotelWorkload {
            family,
            mix,
            classes,
        }
    }

    /// A-RH … C-WH, family by family.
    pub fn all() -> Vec<HotelWorkload> {
        [Family::A, Family::B, Family::C]
            .into_iter()
            .flat_map(|f| Mix::ALL.into_iter().map(move |m| HotelWorkload::new(f, m)))
            .collect()
    }

    /// `A-RH`, `B-BAL`, `C-WH`.
    pub fn name(&self) -> String {
        format!("{:?}-{}", self.family, self.mix.label())
    }

    /// The workload named `name` (any case), as [`HotelWorkload::name`] writes it: one of the
    /// nine, D-RH, D-BAL, D-WH, or a family's micro-scenario (A-S, B-M, ...).
    pub fn from_name(name: &str) -> Option<HotelWorkload> {
        let d = Mix::ALL
            .into_iter()
            .map(|m| HotelWorkload::new(Family::D, m));
        HotelWorkload::all()
            .into_iter()
            .chain(d)
            .chain(HotelWorkload::micro())
            .find(|w| w.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The step-by-step validation's micro-scenarios: A's and B's searches alone and
    /// modifications alone (C's are A's; D's are the shift's).
    pub fn micro() -> Vec<HotelWorkload> {
        [Family::A, Family::B]
            .into_iter()
            .flat_map(|f| {
                Mix::MICRO
                    .into_iter()
                    .map(move |m| HotelWorkload::new(f, m))
            })
            .collect()
    }

    /// The searches' share of the operations.
    pub fn search_share(&self) -> f64 {
        self.classes
            .iter()
            .filter(|c| matches!(c.operation, HotelOperation::Search(_)))
            .map(|c| c.probability)
            .sum()
    }

    /// The attributes some search fixes, in declaration order.
    pub fn searched_attributes(&self) -> Vec<Attribute> {
        let mut attrs: Vec<Attribute> = self
            .classes
            .iter()
            .flat_map(|c| match &c.operation {
                HotelOperation::Search(a) => a.clone(),
                HotelOperation::Update(_) => vec![],
            })
            .collect();
        attrs.sort();
        attrs.dedup();
        attrs
    }

    /// The attributes some class names (searched or updated), in declaration order.
    pub fn named_attributes(&self) -> Vec<Attribute> {
        let mut attrs: Vec<Attribute> = self
            .classes
            .iter()
            .flat_map(|c| match &c.operation {
                HotelOperation::Search(a) | HotelOperation::Update(a) => a.clone(),
            })
            .collect();
        attrs.sort();
        attrs.dedup();
        attrs
    }

    /// The advisor's workload file (crates/tessera-advisor/src/parse.rs): the object count,
    /// each searched attribute's `distinct` (its effective distinct values in `census`: see
    /// [`AttributeCensus::effective_distinct`]), each named int attribute's `spread`, and one
    /// line per class. What a user who knows the data would write.
    pub fn workload_file(&self, census: &Census) -> String {
        let mut out = format!(
            "# Seed 000 §5.2, workload {} on the hotel data set: {} hotels, {} cities.\n",
            self.name(),
            census.hotels,
            census.cities
        );
        out.push_str(&format!(
            "{}\n",
            serde_json::json!({ "objects": census.hotels })
        ));
        let searched = self.searched_attributes();
        for attr in self.named_attributes() {
            let Some(c) = census.attributes.get(&attr) else {
                continue;
            };
            let mut line = serde_json::Map::new();
            line.insert("attribute".into(), attr.name().into());
            if searched.contains(&attr) {
                out.push_str(&format!(
                    "# {attr}: {} distinct values; 1 / Σ share² = {:.1}\n",
                    c.distinct, c.effective_distinct
                ));
                let distinct = (c.effective_distinct.round() as u64).max(1);
                line.insert("distinct".into(), distinct.into());
            }
            if let Some(spread) = c.spread {
                out.push_str(&format!(
                    "# {attr}: an int; its values fill {spread:.3e} of the axis\n"
                ));
                line.insert("spread".into(), spread.into());
            }
            if line.len() > 1 {
                out.push_str(&format!("{}\n", serde_json::Value::Object(line)));
            }
        }
        for class in &self.classes {
            // Nine decimals: 0.9 × 0.1 prints 0.09, not 0.09000000000000001.
            let p = (class.probability * 1e9).round() / 1e9;
            let line = match &class.operation {
                HotelOperation::Search(attrs) => {
                    let mut predicates = serde_json::Map::new();
                    for a in attrs {
                        predicates.insert(a.name().to_owned(), "eq".into());
                    }
                    serde_json::json!({ "p": p, "search": predicates })
                }
                HotelOperation::Update(attrs) => {
                    let names: Vec<&str> = attrs.iter().map(|a| a.name()).collect();
                    serde_json::json!({ "p": p, "update": names })
                }
            };
            out.push_str(&format!("{line}\n"));
        }
        out
    }

    /// The index of the next operation's class, drawn by the classes' probabilities.
    pub fn choose<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let mut x = rng.random::<f64>() * self.classes.iter().map(|c| c.probability).sum::<f64>();
        for (i, c) in self.classes.iter().enumerate() {
            if x < c.probability {
                return i;
            }
            x -= c.probability;
        }
        self.classes.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use tessera_advisor::{parse_workload, Operation, PredicateKind};

    fn string(v: Value) -> String {
        match v {
            Value::String(s) => s.as_str().expect("text").to_owned(),
            other => panic!("not a string: {other:?}"),
        }
    }

    fn int(v: Value) -> i64 {
        match v {
            Value::Int(i) => i,
            other => panic!("not an int: {other:?}"),
        }
    }

    #[test]
    fn the_space_description_parses_with_any_subspaces() {
        let base = base_schema(64);
        assert_eq!(base.name, SPACE_NAME);
        assert_eq!(base.attributes.len(), 7, "the key and six attributes");
        assert_eq!(base.subspaces.len(), 1, "the key subspace only");
        assert_eq!(base.replicas(), 1, "K = 1");
        let with = tessera_types::parse_space(&space_description(
            &[
                vec!["city".into()],
                vec!["city".into(), "address".into(), "postcode".into()],
            ],
            64,
        ))
        .expect("parses");
        assert_eq!(with.subspaces.len(), 3);
        assert_eq!(with.subspaces[2].dimensions.len(), 3);
        for a in Attribute::ALL {
            assert_eq!(Attribute::from_name(a.name()), Some(a));
            assert!(base.attribute_index(a.name()).is_some(), "{a}");
        }
    }

    #[test]
    fn the_generator_follows_its_laws() {
        let hotels = Hotels::new(20_000, 7);
        assert_eq!(hotels.cities(), 400, "50 hotels per city on average");
        let census = hotels.census();
        let city = &census.attributes[&Attribute::City];
        assert_eq!(city.distinct, 400, "every city has hotels");
        // Zipf(0.5) over 400 cities: the first holds 1 / Σ i^-0.5 ≈ 2.6 %; searches for a
        // random hotel's city see fewer effective cities than there are.
        assert!((0.020..0.033).contains(&city.largest_share), "{city:?}");
        assert!(
            (180.0..280.0).contains(&city.effective_distinct),
            "{city:?}"
        );
        for near_unique in [Attribute::Address, Attribute::Tel] {
            let c = &census.attributes[&near_unique];
            assert!(c.distinct >= 19_800, "{near_unique}: {c:?}");
            assert!(c.effective_distinct >= 19_600.0, "{near_unique}: {c:?}");
        }
        let postcode = &census.attributes[&Attribute::Postcode];
        assert!(postcode.distinct <= 400 * POSTCODES_PER_CITY);
        // Small cities (13 hotels for 10 postcodes) leave some of theirs unused.
        assert!(postcode.distinct >= 3_700, "{postcode:?}");
        // Stars: the shares of STARS_WEIGHTS; prices grow with the stars and stay in range.
        let mut stars = [0u64; 5];
        let mut price_sum = [0.0f64; 5];
        for n in 0..hotels.count() {
            let s = int(hotels.value(n, Attribute::Stars, 0));
            assert!((1..=5).contains(&s));
            stars[(s - 1) as usize] += 1;
            let p = int(hotels.value(n, Attribute::Price, 0)) as f64;
            let base = PRICE_BASE[(s - 1) as usize];
            assert!(
                p >= (base * PRICE_FACTOR_MIN).floor() && p <= (base * PRICE_FACTOR_MAX).ceil(),
                "{s} stars at {p}"
            );
            price_sum[(s - 1) as usize] += p;
        }
        for (i, w) in STARS_WEIGHTS.iter().enumerate() {
            let share = stars[i] as f64 / 20_000.0;
            assert!((share - w).abs() < 0.01, "{} stars: {share}", i + 1);
        }
        let means: Vec<f64> = (0..5).map(|i| price_sum[i] / stars[i] as f64).collect();
        assert!(means.windows(2).all(|w| w[0] < w[1]), "{means:?}");
    }

    #[test]
    fn postcodes_belong_to_their_city_and_updates_keep_the_laws() {
        let hotels = Hotels::new(5_000, 3);
        let mut city_of_postcode: BTreeMap<String, String> = BTreeMap::new();
        let (mut moved_address, mut moved_postcode) = (0, 0);
        for n in 0..hotels.count() {
            let city = string(hotels.value(n, Attribute::City, 0));
            for g in 0..3 {
                let p = string(hotels.value(n, Attribute::Postcode, g));
                let earlier = city_of_postcode.entry(p.clone()).or_insert(city.clone());
                assert_eq!(earlier, &city, "postcode {p} is in one city");
            }
            if hotels.value(n, Attribute::Address, 0) != hotels.value(n, Attribute::Address, 1) {
                moved_address += 1;
            }
            if hotels.value(n, Attribute::Postcode, 0) != hotels.value(n, Attribute::Postcode, 1) {
                moved_postcode += 1;
            }
            // City and stars have one generation: the same whatever is asked.
            assert_eq!(
                hotels.value(n, Attribute::City, 5),
                hotels.value(n, Attribute::City, 0)
            );
            let price = int(hotels.value(n, Attribute::Price, 4)) as f64;
            let base = PRICE_BASE[(hotels.stars(n) - 1) as usize];
            assert!(price >= (base * PRICE_FACTOR_MIN).floor());
        }
        assert!(moved_address >= 4_990, "{moved_address}");
        // A new postcode of the same city: 9 chances in 10 of another one.
        assert!((4_300..4_700).contains(&moved_postcode), "{moved_postcode}");
    }

    #[test]
    fn the_data_set_is_a_function_of_its_seed() {
        let (a, b, c) = (
            Hotels::new(1000, 1),
            Hotels::new(1000, 1),
            Hotels::new(1000, 2),
        );
        for n in 0..1000 {
            assert_eq!(a.object(n), b.object(n));
        }
        assert!((0..1000).filter(|&n| a.object(n) != c.object(n)).count() > 990);
        assert_eq!(Hotels::key(12), "h12");
        assert_ne!(Hotels::city_name(1), Hotels::city_name(16));
        assert_eq!(Hotels::new(10, 1).cities(), 1, "at least one city");
    }

    #[test]
    fn nine_workloads_whose_probabilities_sum_to_one() {
        let all = HotelWorkload::all();
        let names: Vec<String> = all.iter().map(|w| w.name()).collect();
        assert_eq!(
            names,
            ["A-RH", "A-BAL", "A-WH", "B-RH", "B-BAL", "B-WH", "C-RH", "C-BAL", "C-WH"]
        );
        for w in &all {
            let sum: f64 = w.classes.iter().map(|c| c.probability).sum();
            assert!((sum - 1.0).abs() < 1e-12, "{}: {sum}", w.name());
            assert_eq!(
                HotelWorkload::from_name(&w.name().to_lowercase()).as_ref(),
                Some(w)
            );
            let expected = w.mix.search_share()
                - if w.family == Family::C {
                    C_EXTRA_WRITES
                } else {
                    0.0
                };
            assert!((w.search_share() - expected).abs() < 1e-12);
            let searches: Vec<(usize, f64)> = w
                .classes
                .iter()
                .filter_map(|c| match &c.operation {
                    HotelOperation::Search(a) => Some((a.len(), c.probability)),
                    HotelOperation::Update(_) => None,
                })
                .collect();
            assert_eq!(
                searches.iter().map(|s| s.0).collect::<Vec<_>>(),
                [1, 2, 3, 4]
            );
            let increasing = searches.windows(2).all(|p| p[0].1 < p[1].1);
            let decreasing = searches.windows(2).all(|p| p[0].1 > p[1].1);
            match w.family {
                Family::A | Family::C => assert!(increasing, "{}", w.name()),
                Family::B => assert!(decreasing, "{}", w.name()),
                Family::D => panic!("D is not one of the nine"),
            }
        }
        assert!(HotelWorkload::from_name("E-RH").is_none());
        let a = HotelWorkload::new(Family::A, Mix::Balanced);
        let updates: Vec<String> = a.classes[4..]
            .iter()
            .map(|c| format!("{} {}", c.operation.describe(), c.probability))
            .collect();
        assert_eq!(updates, ["update address 0.25", "update postcode 0.25"]);
        let b = HotelWorkload::new(Family::B, Mix::WriteHeavy);
        assert_eq!(b.classes[4].operation.describe(), "update price");
        assert!((b.classes[4].probability - 0.72).abs() < 1e-12);
        assert_eq!(
            b.classes[5].operation.describe(),
            "update address, postcode, tel"
        );
        let c = HotelWorkload::new(Family::C, Mix::ReadHeavy);
        assert!((c.search_share() - 0.85).abs() < 1e-12);
    }

    #[test]
    fn micro_scenarios_are_a_familys_searches_or_its_modifications_alone() {
        let names: Vec<String> = HotelWorkload::micro().iter().map(|w| w.name()).collect();
        assert_eq!(names, ["A-S", "A-M", "B-S", "B-M"]);
        let described = |name: &str| -> Vec<String> {
            HotelWorkload::from_name(name)
                .expect("exists")
                .classes
                .iter()
                .map(|c| format!("{} {:.1}", c.operation.describe(), c.probability))
                .collect()
        };
        assert_eq!(
            described("a-s"),
            [
                "search city 0.1",
                "search city, address 0.2",
                "search city, address, postcode 0.3",
                "search city, address, postcode, tel 0.4"
            ]
        );
        assert_eq!(
            described("B-M"),
            ["update price 0.8", "update address, postcode, tel 0.2"]
        );
        let b_m = HotelWorkload::from_name("B-M").expect("B-M exists");
        assert_eq!(b_m.search_share(), 0.0);
        // C's micro-scenarios would be A's: not offered, nor D's.
        assert!(HotelWorkload::from_name("C-S").is_none());
        assert!(HotelWorkload::from_name("D-M").is_none());
        for w in HotelWorkload::micro() {
            let text = w.workload_file(&Hotels::new(2_000, 11).census());
            assert!(parse_workload(&text, &base_schema(64)).is_ok(), "{text}");
        }
    }

    #[test]
    fn the_shift_workload_searches_by_postcode_and_tel() {
        let d = HotelWorkload::from_name("d-rh").expect("D-RH exists");
        assert_eq!(d.family, Family::D);
        assert!((d.search_share() - 0.9).abs() < 1e-12);
        let described: Vec<String> = d.classes.iter().map(|c| c.operation.describe()).collect();
        assert_eq!(
            described,
            [
                "search postcode",
                "search tel",
                "update price",
                "update address"
            ]
        );
        let total: f64 = d.classes.iter().map(|c| c.probability).sum();
        assert!((total - 1.0).abs() < 1e-12);
        // Not one of seed 000's nine.
        assert!(HotelWorkload::all().iter().all(|w| w.family != Family::D));
        let text = d.workload_file(&Hotels::new(2_000, 11).census());
        assert!(parse_workload(&text, &base_schema(64)).is_ok(), "{text}");
    }

    #[test]
    fn workload_files_parse_back_through_the_advisor() {
        let hotels = Hotels::new(2_000, 11);
        let census = hotels.census();
        let schema = base_schema(64);
        for w in HotelWorkload::all() {
            let text = w.workload_file(&census);
            let parsed = parse_workload(&text, &schema)
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", w.name()));
            assert_eq!(parsed.objects(), 2_000);
            assert_eq!(parsed.classes().len(), w.classes.len());
            for (mine, theirs) in w.classes.iter().zip(parsed.classes()) {
                assert!((mine.probability - theirs.probability).abs() < 1e-9);
                match (&mine.operation, &theirs.operation) {
                    (
                        HotelOperation::Search(attrs),
                        Operation::Search {
                            predicates,
                            matches,
                        },
                    ) => {
                        assert_eq!(*matches, None);
                        let names: Vec<&str> = predicates
                            .iter()
                            .map(|(a, k)| {
                                assert_eq!(*k, PredicateKind::Eq);
                                schema.attribute(*a).name.as_str()
                            })
                            .collect();
                        let expected: Vec<&str> = attrs.iter().map(|a| a.name()).collect();
                        assert_eq!(names, expected);
                    }
                    (HotelOperation::Update(attrs), Operation::Update { attributes }) => {
                        let names: Vec<&str> = attributes
                            .iter()
                            .map(|a| schema.attribute(*a).name.as_str())
                            .collect();
                        let expected: Vec<&str> = attrs.iter().map(|a| a.name()).collect();
                        assert_eq!(names, expected);
                    }
                    other => panic!("{}: classes differ: {other:?}", w.name()),
                }
            }
            // The statistics: each searched attribute's effective distinct values.
            for attr in w.searched_attributes() {
                let index = schema.attribute_index(attr.name()).expect("exists");
                let want = census.attributes[&attr].effective_distinct;
                let sel = parsed.equality_selectivity(index);
                assert_eq!(1.0 / sel, want.round(), "{attr}");
            }
            if w.family == Family::B {
                let price = schema.attribute_index("price").expect("exists");
                let spread = census.attributes[&Attribute::Price].spread.expect("an int");
                assert!(spread > 0.0 && spread < 1e-15, "{spread}");
                let given = parsed.spread(price);
                assert!(
                    (given / spread - 1.0).abs() < 1e-12,
                    "B updates price: {given}"
                );
            } else {
                assert!(!text.contains("price"), "A and C do not name price");
            }
            assert!(text.contains("\"p\":0.") || text.contains("\"p\": 0."));
        }
    }

    #[test]
    fn the_driver_draws_classes_by_their_probabilities() {
        let w = HotelWorkload::new(Family::B, Mix::Balanced);
        let mut rng = SmallRng::seed_from_u64(5);
        let mut counts = vec![0u64; w.classes.len()];
        let draws = 200_000;
        for _ in 0..draws {
            counts[w.choose(&mut rng)] += 1;
        }
        for (c, class) in counts.iter().zip(&w.classes) {
            let share = *c as f64 / draws as f64;
            assert!(
                (share - class.probability).abs() < 0.005,
                "{class:?}: {share}"
            );
        }
    }

    #[test]
    fn tasks_update_only_their_own_hotels_and_generations_count() {
        let mut rng = SmallRng::seed_from_u64(9);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..10_000 {
            let n = own_hotel(&mut rng, 2, 7, 100);
            assert_eq!(n % 7, 2);
            assert!(n < 100);
            seen.insert(n);
        }
        assert_eq!(seen.len(), 14, "hotels 2, 9, …, 93: all reached");
        let g = Generations::new(10);
        assert_eq!(g.get(3, Attribute::Address), 0);
        g.set(3, Attribute::Address, 2);
        g.set(3, Attribute::City, 9);
        assert_eq!(g.get(3, Attribute::Address), 2);
        assert_eq!(g.get(3, Attribute::Postcode), 0);
        assert_eq!(g.get(4, Attribute::Address), 0);
        assert_eq!(g.get(3, Attribute::City), 0, "city has one generation");
    }
}
