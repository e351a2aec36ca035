//! The data of the document benchmarks (workloads `documents` and `dblp`, docs/benchmarks.md
//! "Dynamic spaces"), pure and seeded: entry `n` of a data set is a function of the seed and
//! `n` alone, so the loader, the query generator and the model that checks every system's
//! answers all see the same records without holding them in memory.
//!
//! Two data sets, both from seed 004 §7:
//!
//! * the **micro-benchmark objects**: "randomly-generated objects that contain an average of
//!   five properties per object, 10-character property keys and 100-character property
//!   values" ([`micro_object`]);
//! * a **DBLP-shaped bibliography** ([`Bibliography`]): the seed converted DBLP's 307 780 BibTeX
//!   entries to JSON objects with single-word values and found "61% of the properties of each
//!   object (roughly 6) are common between 99.99% of objects; 28% of them are common between
//!   95% of the objects; and 11% is only rarely shared", every object has a key, and "the union
//!   turns out to have more than 30 properties". DBLP's dump cannot be fetched here, so the
//!   generator reproduces that structure with the proportions written below as constants.
//!
//! Queries are data too ([`Query`]): a list of conditions every system translates into its own
//! language, and that [`Query::matches`] evaluates on a generated entry, the model each system's
//! counts are checked against before anything is timed.

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A property's value. The generator never produces an empty string or an empty list: a typed
/// space stores an absent property as its type's default ("", 0, []) and relies on that to
/// tell absent from present (see `docsys`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Val {
    Str(String),
    Int(i64),
    List(Vec<String>),
}

/// The kind of value a property holds, in every entry that has it (a typed space declares it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    List,
}

/// One record: its key and its properties (absent ones are simply not there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub props: BTreeMap<&'static str, Val>,
}

impl Entry {
    pub fn get(&self, name: &str) -> Option<&Val> {
        self.props.get(name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.props.contains_key(name)
    }
}

/// A stream of `n`'s own: entries are independent of one another and of the order they are
/// made in (splitmix64 of the seed and `n`, so neighbouring `n` give unrelated streams).
fn rng_for(seed: u64, salt: u64, n: u64) -> SmallRng {
    let mut z =
        seed ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    SmallRng::seed_from_u64(z ^ (z >> 31))
}

// ---- micro-benchmark objects (seed 004 §7) ---------------------------------------------------

/// Property names of the micro-benchmark objects: 10 characters each, as in the seed. The seed
/// does not say how its names were drawn; fully random names would give every object a shape of
/// its own, and a dynamic space keeps at most 4096 shapes (docs/dynamic.md), so names come from
/// this pool of ten: 4 to 6 of them per object give at most C(10,4)+C(10,5)+C(10,6) = 672 shapes.
pub const MICRO_NAMES: [&str; 10] = [
    "qbrxlmtzaw",
    "hvunkcpsoe",
    "dimgfyrtql",
    "wzaejnbhxc",
    "kpolsiuvgr",
    "tfymqdhwna",
    "lecbzxokjs",
    "ngaptvrfym",
    "sujhwcqbdi",
    "orkemlzgtu",
];
/// Properties per object: uniform in `MICRO_PROPERTIES_MIN..=MICRO_PROPERTIES_MAX`, mean 5.
pub const MICRO_PROPERTIES_MIN: usize = 4;
pub const MICRO_PROPERTIES_MAX: usize = 6;
/// Characters per value, as in the seed.
pub const MICRO_VALUE_LENGTH: usize = 100;

const MICRO_SALT: u64 = 0x4d49_4352_4f00;
const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// The key of micro-benchmark object `n`.
pub fn micro_key(n: u64) -> String {
    format!("obj{n}")
}

/// Micro-benchmark object `n` under `seed`: 4 to 6 of [`MICRO_NAMES`], each with a random
/// 100-character alphanumeric value (unique in practice: 62^100 values).
pub fn micro_object(seed: u64, n: u64) -> Entry {
    let mut rng = rng_for(seed, MICRO_SALT, n);
    let count = rng.random_range(MICRO_PROPERTIES_MIN..=MICRO_PROPERTIES_MAX);
    let mut names = MICRO_NAMES;
    // A partial Fisher-Yates shuffle: the first `count` names are a uniform sample.
    for i in 0..count {
        let j = rng.random_range(i..names.len());
        names.swap(i, j);
    }
    let props = names[..count]
        .iter()
        .map(|&name| {
            let value: String = (0..MICRO_VALUE_LENGTH)
                .map(|_| ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())] as char)
                .collect();
            (name, Val::Str(value))
        })
        .collect();
    Entry {
        key: micro_key(n),
        props,
    }
}

/// The micro-benchmark's search: one property of object `n` by equality (1 match: values are
/// unique), the property chosen by `pick` among those the object has.
pub fn micro_query(seed: u64, n: u64, pick: usize) -> Query {
    let entry = micro_object(seed, n);
    let (name, value) = entry
        .props
        .iter()
        .nth(pick % entry.props.len())
        .map(|(k, v)| (*k, v.clone()))
        .unwrap_or((MICRO_NAMES[0], Val::Str(String::new())));
    Query {
        kind: QueryKind::MicroProperty,
        conds: vec![Cond::Eq(name, value)],
    }
}

// ---- the bibliography ------------------------------------------------------------------------

/// Entries of the bibliography by default: the seed's DBLP snapshot had 307 780.
pub const DBLP_ENTRIES_DEFAULT: u64 = 300_000;

/// BibTeX entry types and their shares (per mille). Approximately DBLP's mix around the seed's
/// 2017 snapshot as dblp.org's statistics show it (conference papers a little over half,
/// journal articles about 40%, the other types a few percent between them); not measured from
/// the dump, which this machine cannot fetch. Sum: 1000.
pub const ENTRY_TYPES: [(&str, u32); 7] = [
    ("inproceedings", 545),
    ("article", 405),
    ("incollection", 15),
    ("phdthesis", 15),
    ("proceedings", 12),
    ("book", 7),
    ("mastersthesis", 1),
];

/// Every property of the bibliography and its kind: 32, "more than 30" as in the seed. The
/// entry's type is a property (`type`); its key is the object's key, not a property.
pub const PROPERTIES: [(&str, Kind); 32] = [
    // Near-universal (the seed's "common between 99.99%"): six per entry.
    ("type", Kind::Str),
    ("author", Kind::List),
    ("title", Kind::Str),
    ("year", Kind::Int),
    ("url", Kind::Str),
    ("mdate", Kind::Str),
    // Common to most entries of a type (the seed's "95%" group).
    ("ee", Kind::Str),
    ("pages", Kind::Str),
    ("journal", Kind::Str),
    ("volume", Kind::Str),
    ("number", Kind::Str),
    ("booktitle", Kind::Str),
    ("crossref", Kind::Str),
    ("doi", Kind::Str),
    // Type-specific (books, proceedings volumes, theses).
    ("editor", Kind::List),
    ("publisher", Kind::Str),
    ("isbn", Kind::Str),
    ("series", Kind::Str),
    ("school", Kind::Str),
    ("edition", Kind::Str),
    // Rare (the seed's "only rarely shared" 11%).
    ("note", Kind::Str),
    ("cdrom", Kind::Str),
    ("month", Kind::Str),
    ("cite", Kind::List),
    ("address", Kind::Str),
    ("chapter", Kind::Int),
    ("publnr", Kind::Str),
    ("archiveprefix", Kind::Str),
    ("eprint", Kind::Str),
    ("howpublished", Kind::Str),
    ("language", Kind::Str),
    ("publtype", Kind::Str),
];

/// Chance (per mille) that an entry has no author (DBLP has anonymous front matter); editors
/// replace authors on most proceedings volumes below.
pub const NO_AUTHOR_PERMILLE: u32 = 5;
/// Chance (per mille) that an entry has no year: near-universal, as in the seed.
pub const NO_YEAR_PERMILLE: u32 = 1;
/// Chance (per mille) that an entry has no url.
pub const NO_URL_PERMILLE: u32 = 2;
/// Per mille of articles and papers with an electronic edition (`ee`), pages, a volume
/// (articles), a number (articles), a crossref to their proceedings (papers).
pub const EE_PERMILLE: u32 = 950;
pub const PAGES_PERMILLE: u32 = 930;
pub const VOLUME_PERMILLE: u32 = 970;
pub const NUMBER_PERMILLE: u32 = 650;
pub const CROSSREF_PERMILLE: u32 = 500;
/// Entries with a DOI of their own ("doi on a fraction"): DBLP's `ee` is often a DOI link, the
/// BibTeX export then adds `doi`; older and informal entries have none.
pub const DOI_PERMILLE: u32 = 250;
/// Rare properties: per entry, with this chance (per mille) one of them (or the CoRR pair
/// `archiveprefix` + `eprint`), uniformly; at most one keeps the number of shapes bounded
/// (a dynamic space keeps at most 4096) while every rare property still appears.
pub const RARE_PERMILLE: u32 = 110;
/// The rare choices: each is one property, but the CoRR pair comes together.
const RARE: [&[&str]; 11] = [
    &["note"],
    &["cdrom"],
    &["month"],
    &["cite"],
    &["address"],
    &["publnr"],
    &["archiveprefix", "eprint"],
    &["howpublished"],
    &["language"],
    &["publtype"],
    &["chapter"],
];

/// Pools the values are drawn from; sizes scale the selectivity of the queries on them.
const JOURNALS: u64 = 1_500;
const CONFERENCES: u64 = 3_000;
const SCHOOLS: u64 = 300;
const PUBLISHERS: u64 = 60;
const SERIES: u64 = 40;
/// Years: the newest year, and the mean age of an entry. DBLP grew roughly exponentially, so
/// ages are exponential (mean 9 years), clamped to `YEAR_MIN`.
pub const YEAR_MAX: i64 = 2017;
pub const YEAR_MIN: i64 = 1936;
const YEAR_MEAN_AGE: f64 = 9.0;

const BIB_SALT: u64 = 0x4442_4c50;

/// The bibliography: `entries` entries generated from `seed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bibliography {
    pub seed: u64,
    pub entries: u64,
}

/// A pronounceable single word (the seed replaced multi-word values with single words) from a
/// number: base-20 consonant-vowel syllables.
fn word(mut x: u64, syllables: usize) -> String {
    const C: &[u8] = b"bcdfghjklmnprstvwxyz";
    const V: &[u8] = b"aeiou";
    let mut s = String::with_capacity(syllables * 2);
    for _ in 0..syllables {
        s.push(C[(x % C.len() as u64) as usize] as char);
        x /= C.len() as u64;
        s.push(V[(x % V.len() as u64) as usize] as char);
        x /= V.len() as u64;
    }
    s
}

fn capitalised(s: String) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => s,
    }
}

/// A skewed pick in `0..pool`: a few values are popular, most are rare (as authors and venues
/// are), by squaring a uniform draw.
fn skewed<R: Rng + ?Sized>(rng: &mut R, pool: u64) -> u64 {
    let u: f64 = rng.random();
    ((u * u * pool as f64) as u64).min(pool - 1)
}

fn per_mille<R: Rng + ?Sized>(rng: &mut R, p: u32) -> bool {
    rng.random_range(0..1000) < p
}

impl Bibliography {
    pub fn new(seed: u64, entries: u64) -> Bibliography {
        Bibliography { seed, entries }
    }

    /// Distinct authors: a fifth of the entries (DBLP's ratio of persons to publications was
    /// of that order), at least 100.
    fn authors(&self) -> u64 {
        (self.entries / 5).max(100)
    }

    fn person<R: Rng + ?Sized>(&self, rng: &mut R) -> String {
        let i = skewed(rng, self.authors());
        capitalised(word(i.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 16, 3)) + &i.to_string()
    }

    /// Entry `n` (`0..entries`).
    pub fn entry(&self, n: u64) -> Entry {
        let mut rng = rng_for(self.seed, BIB_SALT, n);
        let mut draw = rng.random_range(0..1000);
        let mut ty = ENTRY_TYPES[0].0;
        for (name, share) in ENTRY_TYPES {
            if draw < share {
                ty = name;
                break;
            }
            draw -= share;
        }
        let mut props: BTreeMap<&'static str, Val> = BTreeMap::new();
        let s = |v: String| Val::Str(v);
        props.insert("type", s(ty.to_owned()));
        let year =
            (YEAR_MAX - (-(1.0 - rng.random::<f64>()).ln() * YEAR_MEAN_AGE) as i64).max(YEAR_MIN);
        if !per_mille(&mut rng, NO_YEAR_PERMILLE) {
            props.insert("year", Val::Int(year));
        }
        // Titles: four words from a large vocabulary; duplicates are possible but rare.
        let title = (0..4)
            .map(|_| word(rng.random_range(0..2_000_000), 3))
            .collect::<Vec<_>>()
            .concat();
        props.insert("title", s(capitalised(title)));
        props.insert(
            "mdate",
            s(format!(
                "{}-{:02}-{:02}",
                rng.random_range(2008..=2017),
                rng.random_range(1..=12),
                rng.random_range(1..=28)
            )),
        );
        let key = self.venue(&mut rng, ty, n, year, &mut props);
        // Authors: on everything but most proceedings volumes (which have editors instead).
        let authored = ty != "proceedings" || per_mille(&mut rng, 100);
        if authored && !per_mille(&mut rng, NO_AUTHOR_PERMILLE) {
            props.insert("author", self.people(&mut rng, 5));
        }
        if !per_mille(&mut rng, NO_URL_PERMILLE) {
            props.insert("url", s(format!("db/{key}.html")));
        }
        let paper = matches!(ty, "article" | "inproceedings" | "incollection");
        if paper {
            if per_mille(&mut rng, EE_PERMILLE) {
                props.insert("ee", s(format!("https://e.example/{n}")));
            }
            if per_mille(&mut rng, PAGES_PERMILLE) {
                let first = rng.random_range(1..=900);
                props.insert(
                    "pages",
                    s(format!("{first}-{}", first + rng.random_range(1..=30))),
                );
            }
        }
        if per_mille(&mut rng, DOI_PERMILLE) {
            props.insert(
                "doi",
                s(format!("10.{}/e{n}", 1000 + rng.random_range(0..9000))),
            );
        }
        if per_mille(&mut rng, RARE_PERMILLE) {
            self.rare(&mut rng, &mut props);
        }
        Entry { key, props }
    }

    /// One to `most` people's names (a name drawn twice in a row is kept once).
    fn people(&self, rng: &mut SmallRng, most: u32) -> Val {
        let k = 1 + rng.random_range(0..most) as usize;
        let mut names: Vec<String> = (0..k).map(|_| self.person(rng)).collect();
        names.dedup();
        Val::List(names)
    }

    /// The venue of an entry of type `ty` (journal, conference, publisher or school) and its
    /// properties; returns the entry's key.
    fn venue(
        &self,
        rng: &mut SmallRng,
        ty: &str,
        n: u64,
        year: i64,
        props: &mut BTreeMap<&'static str, Val>,
    ) -> String {
        let s = |v: String| Val::Str(v);
        let venue;
        let key;
        match ty {
            "article" => {
                let j = skewed(rng, JOURNALS);
                venue = capitalised(word(j * 7919, 2)) + "J";
                key = format!("journals/{}/e{n}", venue.to_lowercase());
                props.insert("journal", s(venue.clone()));
                if per_mille(rng, VOLUME_PERMILLE) {
                    props.insert("volume", s(rng.random_range(1..=60).to_string()));
                }
                if per_mille(rng, NUMBER_PERMILLE) {
                    props.insert("number", s(rng.random_range(1..=12).to_string()));
                }
            }
            "inproceedings" | "proceedings" | "incollection" => {
                let c = skewed(rng, CONFERENCES);
                venue = word(c * 104_729, 2).to_uppercase();
                key = format!("conf/{}/e{n}", venue.to_lowercase());
                let proceedings = ty == "proceedings";
                // Proceedings volumes name their venue in the title and, on ~60%, a booktitle.
                if !proceedings || per_mille(rng, 600) {
                    props.insert("booktitle", s(venue.clone()));
                }
                if !proceedings && per_mille(rng, CROSSREF_PERMILLE) {
                    props.insert(
                        "crossref",
                        s(format!("conf/{}/{year}", venue.to_lowercase())),
                    );
                }
                if proceedings || ty == "incollection" {
                    if per_mille(rng, 900) {
                        props.insert("publisher", s(word(skewed(rng, PUBLISHERS), 3)));
                    }
                    if per_mille(rng, 700) {
                        props.insert(
                            "isbn",
                            s(format!("978-{}", rng.random_range(0..1_000_000_000u64))),
                        );
                    }
                    if per_mille(rng, 500) {
                        props.insert("series", s(capitalised(word(skewed(rng, SERIES), 2))));
                    }
                }
                if proceedings {
                    props.insert("editor", self.people(rng, 4));
                    if per_mille(rng, 400) {
                        props.insert("volume", s(rng.random_range(1..=9000).to_string()));
                    }
                }
            }
            "book" => {
                venue = word(skewed(rng, PUBLISHERS), 3);
                key = format!("books/{venue}/e{n}");
                props.insert("publisher", s(venue.clone()));
                if per_mille(rng, 800) {
                    props.insert(
                        "isbn",
                        s(format!("978-{}", rng.random_range(0..1_000_000_000u64))),
                    );
                }
                if per_mille(rng, 400) {
                    props.insert("series", s(capitalised(word(skewed(rng, SERIES), 2))));
                }
                if per_mille(rng, 200) {
                    props.insert("volume", s(rng.random_range(1..=500).to_string()));
                }
                if per_mille(rng, 150) {
                    props.insert("edition", s(rng.random_range(2..=5).to_string()));
                }
                if per_mille(rng, 300) {
                    props.insert("editor", self.people(rng, 3));
                }
            }
            _ => {
                // Theses.
                venue = capitalised(word(skewed(rng, SCHOOLS) * 31, 3)) + "U";
                key = format!("phd/{}/e{n}", venue.to_lowercase());
                props.insert("school", s(venue.clone()));
                if per_mille(rng, 100) {
                    props.insert("publisher", s(word(skewed(rng, PUBLISHERS), 3)));
                }
                if per_mille(rng, 200) {
                    props.insert(
                        "isbn",
                        s(format!("978-{}", rng.random_range(0..1_000_000_000u64))),
                    );
                }
            }
        }
        key
    }

    /// One of the rare combinations of properties ([`RARE`]).
    fn rare(&self, rng: &mut SmallRng, props: &mut BTreeMap<&'static str, Val>) {
        let s = |v: String| Val::Str(v);
        let choice = RARE[rng.random_range(0..RARE.len())];
        for &name in choice {
            let value = match name {
                "cite" => Val::List(
                    (0..rng.random_range(1..=4))
                        .map(|_| format!("e{}", rng.random_range(0..self.entries.max(1))))
                        .collect(),
                ),
                "chapter" => Val::Int(rng.random_range(1..=20)),
                "month" => {
                    s(["January", "April", "July", "October"][rng.random_range(0..4)].to_owned())
                }
                "archiveprefix" => s("arXiv".to_owned()),
                "language" => s(["German", "French", "Chinese"][rng.random_range(0..3)].to_owned()),
                "publtype" => {
                    s(["informal", "survey", "withdrawn"][rng.random_range(0..3)].to_owned())
                }
                _ => s(word(rng.random_range(0..10_000_000), 4)),
            };
            props.insert(name, value);
        }
    }

    /// The kind every property has (for a typed space's attributes).
    pub fn kind_of(name: &str) -> Option<Kind> {
        PROPERTIES.iter().find(|(p, _)| *p == name).map(|(_, k)| *k)
    }
}

// ---- queries ---------------------------------------------------------------------------------

/// One condition of a query; a query is their conjunction.
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    /// The property has this string or int value.
    Eq(&'static str, Val),
    /// The list property holds this string.
    Contains(&'static str, String),
    /// The int property lies in `lo..=hi`.
    Range(&'static str, i64, i64),
    /// The entry has at least one of these properties.
    Exists(Vec<&'static str>),
    /// The entry lacks this property.
    Missing(&'static str),
}

impl Cond {
    pub fn matches(&self, e: &Entry) -> bool {
        match self {
            Cond::Eq(p, v) => e.get(p) == Some(v),
            Cond::Contains(p, s) => matches!(e.get(p), Some(Val::List(l)) if l.contains(s)),
            Cond::Range(p, lo, hi) => matches!(e.get(p), Some(Val::Int(i)) if lo <= i && i <= hi),
            Cond::Exists(ps) => ps.iter().any(|p| e.has(p)),
            Cond::Missing(p) => !e.has(p),
        }
    }

    /// The condition as `tessera search` would take it on the command line.
    pub fn describe(&self) -> String {
        let v = |v: &Val| match v {
            Val::Str(s) => format!("'{s}'"),
            Val::Int(i) => i.to_string(),
            Val::List(l) => format!("{l:?}"),
        };
        match self {
            Cond::Eq(p, x) => format!("{p}={}", v(x)),
            Cond::Contains(p, s) => format!("{p} contains '{s}'"),
            Cond::Range(p, lo, hi) => format!("{p}>={lo} {p}<={hi}"),
            Cond::Exists(ps) => format!("exists({})", ps.join("|")),
            Cond::Missing(p) => format!("missing({p})"),
        }
    }
}

/// The kinds of query the `dblp` workload times, each reported on its own; and the
/// `documents` workload's search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueryKind {
    /// `title = T`: a near-universal property, about one match.
    Title,
    /// `author contains A, year = Y`: a list property and an int, a few matches.
    AuthorYear,
    /// `journal = J, Y <= year <= Y+4`: a range on year within one journal.
    JournalYears,
    /// `school = S`: a rare property (theses only).
    School,
    /// `exists(editor), year = Y`: structure and a value.
    EditorYear,
    /// `missing(doi), booktitle = B, year = Y`: a negation of structure and values.
    NoDoi,
    /// `exists(note|cdrom), year = Y`: a union of structures and a value.
    NoteOrCdrom,
    /// The micro-benchmark's equality on one property.
    MicroProperty,
}

impl QueryKind {
    pub const DBLP: [QueryKind; 7] = [
        QueryKind::Title,
        QueryKind::AuthorYear,
        QueryKind::JournalYears,
        QueryKind::School,
        QueryKind::EditorYear,
        QueryKind::NoDoi,
        QueryKind::NoteOrCdrom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QueryKind::Title => "title",
            QueryKind::AuthorYear => "author_year",
            QueryKind::JournalYears => "journal_year_range",
            QueryKind::School => "rare_school",
            QueryKind::EditorYear => "exists_editor_year",
            QueryKind::NoDoi => "missing_doi_venue_year",
            QueryKind::NoteOrCdrom => "exists_note_or_cdrom_year",
            QueryKind::MicroProperty => "search_one_property",
        }
    }

    /// The query of this kind whose values come from entry `e`, so that it has at least that
    /// match; `None` when `e` lacks what the kind needs.
    pub fn from_entry(self, e: &Entry) -> Option<Query> {
        let year = || match e.get("year") {
            Some(Val::Int(y)) => Some(*y),
            _ => None,
        };
        let string = |p: &str| match e.get(p) {
            Some(Val::Str(s)) => Some(s.clone()),
            _ => None,
        };
        let conds = match self {
            QueryKind::Title => vec![Cond::Eq("title", Val::Str(string("title")?))],
            QueryKind::AuthorYear => {
                let Some(Val::List(authors)) = e.get("author") else {
                    return None;
                };
                vec![
                    Cond::Contains("author", authors.first()?.clone()),
                    Cond::Eq("year", Val::Int(year()?)),
                ]
            }
            QueryKind::JournalYears => {
                let y = year()?;
                // The entry's year lies somewhere in the five-year window.
                let lo = y - (e.key.len() as i64 % 5);
                vec![
                    Cond::Eq("journal", Val::Str(string("journal")?)),
                    Cond::Range("year", lo, lo + 4),
                ]
            }
            QueryKind::School => vec![Cond::Eq("school", Val::Str(string("school")?))],
            QueryKind::EditorYear => {
                if !e.has("editor") {
                    return None;
                }
                vec![
                    Cond::Exists(vec!["editor"]),
                    Cond::Eq("year", Val::Int(year()?)),
                ]
            }
            QueryKind::NoDoi => {
                if e.has("doi") {
                    return None;
                }
                vec![
                    Cond::Missing("doi"),
                    Cond::Eq("booktitle", Val::Str(string("booktitle")?)),
                    Cond::Eq("year", Val::Int(year()?)),
                ]
            }
            QueryKind::NoteOrCdrom => {
                if !(e.has("note") || e.has("cdrom")) {
                    return None;
                }
                vec![
                    Cond::Exists(vec!["note", "cdrom"]),
                    Cond::Eq("year", Val::Int(year()?)),
                ]
            }
            QueryKind::MicroProperty => return None,
        };
        Some(Query { kind: self, conds })
    }
}

/// A query: the conjunction of its conditions.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub kind: QueryKind,
    pub conds: Vec<Cond>,
}

impl Query {
    pub fn matches(&self, e: &Entry) -> bool {
        self.conds.iter().all(|c| c.matches(e))
    }

    pub fn describe(&self) -> String {
        self.conds
            .iter()
            .map(Cond::describe)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `per_kind` queries of each kind in `kinds`, drawn from random entries of `bib` (seeded), so
/// that each has at least one match. Kinds whose entries are rare (theses) need many draws;
/// `max_draws` bounds the work, and a kind may come back with fewer queries (never none
/// unless the bibliography has no entry it can use).
pub fn draw_queries(
    bib: &Bibliography,
    kinds: &[QueryKind],
    per_kind: usize,
    salt: u64,
    max_draws: u64,
) -> BTreeMap<QueryKind, Vec<Query>> {
    let mut rng = rng_for(bib.seed, salt, 0);
    let mut out: BTreeMap<QueryKind, Vec<Query>> = kinds.iter().map(|&k| (k, Vec::new())).collect();
    for _ in 0..max_draws {
        if out.values().all(|q| q.len() >= per_kind) {
            break;
        }
        let e = bib.entry(rng.random_range(0..bib.entries.max(1)));
        for (kind, queries) in out.iter_mut() {
            if queries.len() < per_kind {
                if let Some(q) = kind.from_entry(&e) {
                    queries.push(q);
                }
            }
        }
    }
    out
}

/// Where the census's near-universal and common groups begin (shares of entries).
pub const UNIVERSAL_SHARE: f64 = 0.98;
pub const COMMON_SHARE: f64 = 0.30;

/// How often each property occurs in the first `sample` entries, and the mean number of
/// properties per entry: what the tests and the report say of the data's structure.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Census {
    pub entries: u64,
    pub mean_properties: f64,
    /// Share of entries having each property.
    pub share: BTreeMap<String, f64>,
    /// Of an average entry's properties, the shares that are near-universal (in >= 98% of
    /// entries), common (30% to 98%) and rare (< 30%): the seed's 61% / 28% / 11%. The seed
    /// does not say where its groups end; 30% puts the venue properties (journal for
    /// articles, booktitle for papers: common within their type) with the common ones.
    pub universal_share: f64,
    pub common_share: f64,
    pub rare_share: f64,
}

impl Census {
    pub fn of(bib: &Bibliography, sample: u64) -> Census {
        let n = sample.min(bib.entries).max(1);
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut total = 0u64;
        for i in 0..n {
            let e = bib.entry(i);
            total += e.props.len() as u64;
            for p in e.props.keys() {
                *counts.entry(p).or_default() += 1;
            }
        }
        let share: BTreeMap<String, f64> = counts
            .iter()
            .map(|(p, c)| ((*p).to_owned(), *c as f64 / n as f64))
            .collect();
        // An entry's properties, counted by class, summed over entries: sum of the counts of the
        // properties in the class.
        let class = |keep: &dyn Fn(f64) -> bool| {
            counts
                .iter()
                .filter(|(_, &c)| keep(c as f64 / n as f64))
                .map(|(_, &c)| c)
                .sum::<u64>() as f64
                / total.max(1) as f64
        };
        Census {
            entries: n,
            mean_properties: total as f64 / n as f64,
            universal_share: class(&|s| s >= UNIVERSAL_SHARE),
            common_share: class(&|s| (COMMON_SHARE..UNIVERSAL_SHARE).contains(&s)),
            rare_share: class(&|s| s < COMMON_SHARE),
            share,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const SAMPLE: u64 = 30_000;

    #[test]
    fn entries_are_a_function_of_seed_and_number() {
        let a = Bibliography::new(7, 1000);
        let b = Bibliography::new(7, 1000);
        let c = Bibliography::new(8, 1000);
        for n in [0, 1, 17, 999] {
            assert_eq!(a.entry(n), b.entry(n), "same seed, same entry");
        }
        let differ = (0..50).filter(|&n| a.entry(n) != c.entry(n)).count();
        assert!(
            differ >= 45,
            "another seed gives other entries ({differ}/50 differ)"
        );
        assert_eq!(micro_object(3, 5), micro_object(3, 5));
        assert_ne!(micro_object(3, 5), micro_object(4, 5));
    }

    #[test]
    fn more_than_thirty_properties_all_appear_with_their_declared_kinds() {
        let bib = Bibliography::new(1, DBLP_ENTRIES_DEFAULT);
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut keys = BTreeSet::new();
        for n in 0..SAMPLE {
            let e = bib.entry(n);
            assert!(keys.insert(e.key.clone()), "keys are unique: {}", e.key);
            for (p, v) in &e.props {
                seen.insert(p);
                let kind = Bibliography::kind_of(p).expect("every property is declared");
                let ok = match (kind, v) {
                    (Kind::Str, Val::Str(s)) => !s.is_empty(),
                    (Kind::Int, Val::Int(_)) => true,
                    (Kind::List, Val::List(l)) => !l.is_empty() && l.iter().all(|s| !s.is_empty()),
                    _ => false,
                };
                assert!(ok, "{p} = {v:?} in {}", e.key);
            }
        }
        assert!(PROPERTIES.len() > 30);
        assert_eq!(
            seen.len(),
            PROPERTIES.len(),
            "every property occurs: {seen:?}"
        );
    }

    #[test]
    fn proportions_follow_the_seed_within_tolerance() {
        let census = Census::of(&Bibliography::new(1, DBLP_ENTRIES_DEFAULT), SAMPLE);
        // The seed: roughly 6 near-universal properties that are 61% of an entry's, 28%
        // common, 11% rare; so about 10 properties per entry.
        assert!((9.0..=13.0).contains(&census.mean_properties), "{census:?}");
        assert!(
            (0.51..=0.71).contains(&census.universal_share),
            "{census:?}"
        );
        assert!((0.20..=0.36).contains(&census.common_share), "{census:?}");
        assert!((0.06..=0.16).contains(&census.rare_share), "{census:?}");
        let share = |p: &str| census.share.get(p).copied().unwrap_or(0.0);
        for p in ["type", "title", "year", "mdate", "url"] {
            assert!(share(p) >= 0.99, "{p}: {}", share(p));
        }
        let near = |p: &str, want: f64, tol: f64| {
            assert!(
                (share(p) - want).abs() <= tol,
                "{p}: {} vs {want}",
                share(p)
            );
        };
        near("author", 0.984, 0.006);
        near("doi", DOI_PERMILLE as f64 / 1000.0, 0.02);
        near("journal", 0.405, 0.02);
        near("booktitle", 0.545 + 0.015 + 0.012 * 0.6, 0.02);
        near("school", 0.016, 0.005);
        near("editor", 0.012 + 0.007 * 0.3, 0.004);
        // Each rare choice: 11% split 11 ways.
        near("note", 0.01, 0.004);
        near("eprint", 0.01, 0.004);
        assert_eq!(
            share("eprint"),
            share("archiveprefix"),
            "the CoRR pair comes together"
        );
    }

    #[test]
    fn shapes_stay_within_what_a_dynamic_space_keeps() {
        let bib = Bibliography::new(1, DBLP_ENTRIES_DEFAULT);
        let shapes: BTreeSet<Vec<&str>> = (0..SAMPLE)
            .map(|n| bib.entry(n).props.keys().copied().collect())
            .collect();
        // Far below the 4096 a space keeps, even over the whole bibliography.
        assert!(shapes.len() < 1500, "{} shapes", shapes.len());
        assert!(
            shapes.len() > 50,
            "the data is dynamic: {} shapes",
            shapes.len()
        );
        let micro: BTreeSet<Vec<&str>> = (0..5000)
            .map(|n| micro_object(1, n).props.keys().copied().collect())
            .collect();
        assert!(micro.len() <= 672, "{}", micro.len());
    }

    #[test]
    fn years_grow_towards_the_present() {
        let bib = Bibliography::new(2, 50_000);
        let mut by_year: BTreeMap<i64, u64> = BTreeMap::new();
        for n in 0..20_000 {
            if let Some(Val::Int(y)) = bib.entry(n).get("year") {
                assert!((YEAR_MIN..=YEAR_MAX).contains(y));
                *by_year.entry(*y).or_default() += 1;
            }
        }
        let count = |y| by_year.get(&y).copied().unwrap_or(0);
        assert!(
            count(2017) > count(2007) && count(2007) > count(1997),
            "{by_year:?}"
        );
    }

    #[test]
    fn micro_objects_have_the_seeds_dimensions() {
        let mut total = 0;
        for n in 0..2000 {
            let o = micro_object(9, n);
            assert_eq!(o.key, micro_key(n));
            assert!((MICRO_PROPERTIES_MIN..=MICRO_PROPERTIES_MAX).contains(&o.props.len()));
            total += o.props.len();
            for (name, v) in &o.props {
                assert_eq!(name.len(), 10);
                assert!(matches!(v, Val::Str(s) if s.len() == MICRO_VALUE_LENGTH));
            }
        }
        let mean = total as f64 / 2000.0;
        assert!((4.8..=5.2).contains(&mean), "mean {mean}");
        let q = micro_query(9, 3, 1);
        assert!(q.matches(&micro_object(9, 3)));
        assert!(!q.matches(&micro_object(9, 4)));
    }

    #[test]
    fn drawn_queries_match_the_entry_they_came_from_and_are_selective() {
        let bib = Bibliography::new(1, 20_000);
        let queries = draw_queries(&bib, &QueryKind::DBLP, 4, 11, 200_000);
        for kind in QueryKind::DBLP {
            let qs = &queries[&kind];
            assert_eq!(qs.len(), 4, "{kind:?}");
            for q in qs {
                let count = (0..bib.entries)
                    .filter(|&n| q.matches(&bib.entry(n)))
                    .count();
                assert!(count >= 1, "{kind:?} {} matches nothing", q.describe());
                // Every kind is a search for a few records, not a scan of the data.
                assert!(count < 2_000, "{kind:?} {} matches {count}", q.describe());
            }
        }
        assert_eq!(
            queries,
            draw_queries(&bib, &QueryKind::DBLP, 4, 11, 200_000),
            "seeded"
        );
    }

    #[test]
    fn conditions_evaluate_as_documented() {
        let e = Entry {
            key: "k".into(),
            props: [
                ("year", Val::Int(2010)),
                ("author", Val::List(vec!["A".into(), "B".into()])),
                ("title", Val::Str("T".into())),
            ]
            .into_iter()
            .collect(),
        };
        assert!(Cond::Eq("year", Val::Int(2010)).matches(&e));
        assert!(!Cond::Eq("year", Val::Str("2010".into())).matches(&e));
        assert!(Cond::Contains("author", "B".into()).matches(&e));
        assert!(!Cond::Contains("title", "T".into()).matches(&e));
        assert!(Cond::Range("year", 2008, 2010).matches(&e));
        assert!(!Cond::Range("year", 2011, 2012).matches(&e));
        assert!(Cond::Exists(vec!["doi", "title"]).matches(&e));
        assert!(!Cond::Exists(vec!["doi"]).matches(&e));
        assert!(Cond::Missing("doi").matches(&e));
        assert!(!Cond::Missing("year").matches(&e));
    }
}
