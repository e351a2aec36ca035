//! The space description language (HyperDex-compatible):
//!
//! ```text
//! space hotels                      # comments run to the end of the line
//! key id                            # untyped means string
//! attributes string city, int stars, int price in 0 to 100000, set(string) tags,
//!            map(string, int) rooms # (`attribute` too, as HyperDex accepts)
//! subspace city, price
//! subspace stars
//! create 64 partitions              # optional, default 64
//! tolerate 1 failure                # optional, default 1
//! placement random                  # optional, default random: where keys go (below)
//! adapt on                          # optional, default off: Tessera picks the subspaces
//! ```
//!
//! `placement` (seed 003's placements) is `random` (keys hashed), `ordered [from A to B]`
//! (the key axis keeps the keys' order, regions slice the domain A..B of int keys or the key
//! type's whole range) or `tagged ATTR [axes N] [spread N]` (objects also placed by the tags of
//! set(string) attribute ATTR on a Hilbert curve through up to N tags, each stretch of the
//! curve spread over N regions).
//!
//! A dynamic space (documents of any properties, docs/design.md §9) says `dynamic` after its name
//! and declares no attributes or subspaces:
//!
//! ```text
//! space papers dynamic
//! key id
//! dimensions 8                      # optional, default 8: axes property names hash onto
//! create 64 partitions
//! tolerate 1 failure
//! ```
//!
//! `in LOW to HIGH` after an int or float attribute declares its domain: the values it usually
//! takes, where its axes are first cut (equal slices of the domain instead of the whole type;
//! values outside it are accepted and fall in the first or last slice). Without one, the data
//! decides where axes are cut (see tessera-geometry's tessellation).
//!
//! Every error names the line and column where it was found.

use std::fmt;

use crate::constants::{
    DYNAMIC_DIMENSIONS_DEFAULT, PARTITIONS_DEFAULT, TAG_AXES_DEFAULT, TAG_SPREAD_DEFAULT,
    TOLERATE_DEFAULT,
};
use crate::schema::{Attribute, Placement, SchemaError, SpaceSchema, TagCurve};
use crate::value::{AttributeType, PrimitiveType, Value};

/// A description that could not be parsed, or that parsed into an invalid space.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Number(u64),
    LParen,
    RParen,
    Comma,
    Minus,
    /// A number with a decimal point.
    Decimal(f64),
    End,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => write!(f, "{w:?}"),
            Token::Number(n) => write!(f, "{n}"),
            Token::Decimal(x) => write!(f, "{x}"),
            Token::LParen => f.write_str("'('"),
            Token::RParen => f.write_str("')'"),
            Token::Comma => f.write_str("','"),
            Token::Minus => f.write_str("'-'"),
            Token::End => f.write_str("end of input"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Pos {
    line: u32,
    column: u32,
}

fn tokenize(text: &str) -> Result<Vec<(Token, Pos)>, ParseError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    let (mut line, mut column) = (1u32, 1u32);
    while let Some(&c) = chars.peek() {
        let pos = Pos { line, column };
        if c == '\n' {
            chars.next();
            line += 1;
            column = 1;
        } else if c.is_whitespace() {
            chars.next();
            column += 1;
        } else if c == '#' {
            while let Some(&c) = chars.peek() {
                if c == '\n' {
                    break;
                }
                chars.next();
                column += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    word.push(c);
                    chars.next();
                    column += 1;
                } else {
                    break;
                }
            }
            tokens.push((Token::Word(word), pos));
        } else if c.is_ascii_digit() {
            let mut digits = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_ascii_digit() {
                    digits.push(c);
                    chars.next();
                    column += 1;
                } else {
                    break;
                }
            }
            // A decimal (a float domain's end): digits '.' digits.
            if chars.peek() == Some(&'.') {
                digits.push('.');
                chars.next();
                column += 1;
                while let Some(&c) = chars.peek().filter(|c| c.is_ascii_digit()) {
                    digits.push(c);
                    chars.next();
                    column += 1;
                }
                let x = digits.parse::<f64>().map_err(|_| ParseError {
                    line: pos.line,
                    column: pos.column,
                    message: format!("number {digits} is not a decimal"),
                })?;
                tokens.push((Token::Decimal(x), pos));
                continue;
            }
            let n = digits.parse::<u64>().map_err(|_| ParseError {
                line: pos.line,
                column: pos.column,
                message: format!("number {digits} is too large"),
            })?;
            tokens.push((Token::Number(n), pos));
        } else {
            let token = match c {
                '(' => Token::LParen,
                ')' => Token::RParen,
                ',' => Token::Comma,
                '-' => Token::Minus,
                other => {
                    return Err(ParseError {
                        line,
                        column,
                        message: format!("unexpected character {other:?}"),
                    })
                }
            };
            chars.next();
            column += 1;
            tokens.push((token, pos));
        }
    }
    tokens.push((Token::End, Pos { line, column }));
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(Token, Pos)>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.at].0
    }

    fn pos(&self) -> Pos {
        self.tokens[self.at].1
    }

    fn next(&mut self) -> (Token, Pos) {
        let t = self.tokens[self.at].clone();
        if self.at + 1 < self.tokens.len() {
            self.at += 1;
        }
        t
    }

    fn error_at(&self, pos: Pos, message: String) -> ParseError {
        ParseError {
            line: pos.line,
            column: pos.column,
            message,
        }
    }

    fn expect_word(&mut self, what: &str) -> Result<(String, Pos), ParseError> {
        match self.next() {
            (Token::Word(w), pos) => Ok((w, pos)),
            (other, pos) => Err(self.error_at(pos, format!("expected {what}, found {other}"))),
        }
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<(), ParseError> {
        match self.next() {
            (Token::Word(w), _) if w == keyword => Ok(()),
            (other, pos) => Err(self.error_at(pos, format!("expected {keyword:?}, found {other}"))),
        }
    }

    fn expect(&mut self, token: Token) -> Result<(), ParseError> {
        let (t, pos) = self.next();
        if t == token {
            Ok(())
        } else {
            Err(self.error_at(pos, format!("expected {token}, found {t}")))
        }
    }

    /// `create N partitions`, optional: the count and where it was (or would have been).
    fn partitions(&mut self) -> Result<(u32, Pos), ParseError> {
        let mut pos = self.pos();
        if !self.at_keyword("create") {
            return Ok((PARTITIONS_DEFAULT, pos));
        }
        self.next();
        pos = self.pos();
        let partitions = match self.next() {
            (Token::Number(n), _) => u32::try_from(n).unwrap_or(u32::MAX),
            (other, at) => {
                return Err(self.error_at(at, format!("expected a partition count, found {other}")))
            }
        };
        self.expect_keyword("partitions")?;
        Ok((partitions, pos))
    }

    /// `tolerate N failures`, optional.
    fn tolerate(&mut self, default: u32) -> Result<(u32, Pos), ParseError> {
        let mut pos = self.pos();
        if !self.at_keyword("tolerate") {
            return Ok((default, pos));
        }
        self.next();
        pos = self.pos();
        let tolerate = match self.next() {
            (Token::Number(n), _) => u32::try_from(n).unwrap_or(u32::MAX),
            (other, at) => {
                return Err(self.error_at(at, format!("expected a failure count, found {other}")))
            }
        };
        match self.next() {
            (Token::Word(w), _) if w == "failure" || w == "failures" => Ok((tolerate, pos)),
            (other, at) => Err(self.error_at(at, format!("expected \"failures\", found {other}"))),
        }
    }

    /// `placement random | ordered [from A to B] | tagged ATTR [axes N] [spread N]`,
    /// optional: the placement (tags named, not yet resolved) and where it was.
    fn placement(&mut self) -> Result<(ParsedPlacement, Pos), ParseError> {
        let pos = self.pos();
        if !self.at_keyword("placement") {
            return Ok((ParsedPlacement::Random, pos));
        }
        self.next();
        let pos = self.pos();
        let placement = match self.next() {
            (Token::Word(w), _) if w == "random" => ParsedPlacement::Random,
            (Token::Word(w), _) if w == "ordered" => {
                let mut domain = None;
                if self.at_keyword("from") {
                    self.next();
                    let from = self.integer("the domain's first key")?;
                    self.expect_keyword("to")?;
                    let to = self.integer("the domain's last key")?;
                    domain = Some((Value::Int(from), Value::Int(to)));
                }
                ParsedPlacement::Ordered(domain)
            }
            (Token::Word(w), _) if w == "tagged" => {
                let (tags, _) = self.expect_word("the tags attribute")?;
                let mut axes = TAG_AXES_DEFAULT;
                if self.at_keyword("axes") {
                    self.next();
                    let n = self.integer("a tag axes count")?;
                    axes = u8::try_from(n).unwrap_or(u8::MAX);
                }
                let mut spread = TAG_SPREAD_DEFAULT;
                if self.at_keyword("spread") {
                    self.next();
                    let n = self.integer("a spread")?;
                    spread = u32::try_from(n).unwrap_or(u32::MAX);
                }
                ParsedPlacement::Tagged { tags, axes, spread }
            }
            (other, at) => {
                return Err(self.error_at(
                    at,
                    format!("expected \"random\", \"ordered\" or \"tagged\", found {other}"),
                ))
            }
        };
        Ok((placement, pos))
    }

    /// An integer, maybe negative.
    fn integer(&mut self, what: &str) -> Result<i64, ParseError> {
        let negative = *self.peek() == Token::Minus;
        if negative {
            self.next();
        }
        match self.next() {
            (Token::Number(n), at) => {
                let n = i128::from(n);
                i64::try_from(if negative { -n } else { n })
                    .map_err(|_| self.error_at(at, format!("{what} is out of range")))
            }
            (other, at) => Err(self.error_at(at, format!("expected {what}, found {other}"))),
        }
    }

    /// `in LOW to HIGH` after an attribute's name, if there: its domain. The values are
    /// numbers as written (ints, or decimals); the attribute's type decides what they mean.
    fn domain(&mut self) -> Result<Option<(Value, Value)>, ParseError> {
        if !self.at_keyword("in") {
            return Ok(None);
        }
        self.next();
        let low = self.number("the domain's lowest value")?;
        self.expect_keyword("to")?;
        let high = self.number("the domain's highest value")?;
        Ok(Some((low, high)))
    }

    /// A number, maybe negative: an int, or a float if written with a decimal point.
    fn number(&mut self, what: &str) -> Result<Value, ParseError> {
        let negative = *self.peek() == Token::Minus;
        let sign = if negative { -1.0 } else { 1.0 };
        match self.tokens.get(self.at + usize::from(negative)) {
            Some((Token::Decimal(x), _)) => {
                let x = *x;
                self.at += 1 + usize::from(negative);
                Ok(Value::Float(sign * x))
            }
            _ => self.integer(what).map(Value::Int),
        }
    }

    fn expect_end(&mut self) -> Result<(), ParseError> {
        match self.next() {
            (Token::End, _) => Ok(()),
            (other, pos) => Err(self.error_at(
                pos,
                format!("unexpected {other} after the space description"),
            )),
        }
    }

    fn at_keyword(&self, keyword: &str) -> bool {
        matches!(self.peek(), Token::Word(w) if w == keyword)
    }

    fn primitive(&mut self) -> Result<PrimitiveType, ParseError> {
        let (w, pos) = self.expect_word("a type (string, int or float)")?;
        primitive_named(&w).ok_or_else(|| {
            self.error_at(
                pos,
                format!("unknown type {w:?}: expected string, int or float"),
            )
        })
    }

    /// `[type] name`, where a type is a primitive or `list(T)`, `set(T)`, `map(K, V)`.
    fn typed_name(&mut self, what: &str) -> Result<(Attribute, Pos), ParseError> {
        let (first, first_pos) = self.expect_word(what)?;
        let container = matches!(first.as_str(), "list" | "set" | "map");
        let ty = if container && *self.peek() == Token::LParen {
            self.next();
            let ty = match first.as_str() {
                "list" => AttributeType::List(self.primitive()?),
                "set" => AttributeType::Set(self.primitive()?),
                _ => {
                    let k = self.primitive()?;
                    self.expect(Token::Comma)?;
                    AttributeType::Map(k, self.primitive()?)
                }
            };
            self.expect(Token::RParen)?;
            Some(ty)
        } else if let Some(p) = primitive_named(&first) {
            // `int stars` is a typed name; a lone `int` followed by ',' or a keyword is an
            // attribute called "int" (as in HyperDex, untyped names are strings).
            match self.peek() {
                Token::Word(w) if !is_keyword(w) => Some(AttributeType::Primitive(p)),
                _ => None,
            }
        } else if matches!(self.peek(), Token::Word(w) if !is_keyword(w)) {
            // `strng city`: a word then a name can only be a type and a name.
            return Err(self.error_at(
                first_pos,
                format!(
                    "unknown type {first:?} (the types are string, int, float, list(T), set(T) \
                     and map(K, V))"
                ),
            ));
        } else {
            None
        };
        match ty {
            Some(ty) => {
                let (name, pos) = self.expect_word(what)?;
                Ok((Attribute::new(name, ty), pos))
            }
            None => Ok((Attribute::new(first, AttributeType::STRING), first_pos)),
        }
    }
}

/// A domain written `in 1 to 5` for a float attribute means 1.0 to 5.0; other types keep
/// the values as written (and are refused if they do not fit, by the schema's check).
fn as_type_of(attribute: &Attribute, (low, high): (Value, Value)) -> (Value, Value) {
    let float = |v: Value| match v {
        Value::Int(i) => Value::Float(i as f64),
        v => v,
    };
    if attribute.ty == AttributeType::Primitive(PrimitiveType::Float) {
        (float(low), float(high))
    } else {
        (low, high)
    }
}

fn primitive_named(word: &str) -> Option<PrimitiveType> {
    match word {
        "string" => Some(PrimitiveType::String),
        "int" | "int64" => Some(PrimitiveType::Int),
        "float" => Some(PrimitiveType::Float),
        _ => None,
    }
}

fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "space"
            | "key"
            | "attributes"
            | "attribute"
            | "subspace"
            | "create"
            | "tolerate"
            | "placement"
            | "adapt"
            | "dimensions"
    )
}

/// Parses a space description. See the module documentation for the grammar.
pub fn parse_space(text: &str) -> Result<SpaceSchema, ParseError> {
    parse_space_tolerating(text, TOLERATE_DEFAULT)
}

/// [`parse_space`], with `tolerate` as the failures tolerated when the description does not
/// say (a cluster's default: `tessera dev --replicas K` makes it K - 1).
pub fn parse_space_tolerating(
    text: &str,
    default_tolerate: u32,
) -> Result<SpaceSchema, ParseError> {
    let mut p = Parser {
        tokens: tokenize(text)?,
        at: 0,
    };
    p.expect_keyword("space")?;
    let (name, name_pos) = p.expect_word("the space name")?;
    let dynamic = p.at_keyword("dynamic");
    if dynamic {
        p.next();
    }
    p.expect_keyword("key")?;
    let (key, key_pos) = p.typed_name("the key name")?;
    if dynamic {
        return parse_dynamic_rest(&mut p, &name, name_pos, key, key_pos, default_tolerate);
    }

    let mut attributes: Vec<(Attribute, Pos)> = Vec::new();
    // HyperDex accepts the singular too.
    if p.at_keyword("attributes") || p.at_keyword("attribute") {
        p.next();
        loop {
            let (mut attribute, pos) = p.typed_name("an attribute name")?;
            attribute.domain = p.domain()?.map(|d| as_type_of(&attribute, d));
            attributes.push((attribute, pos));
            if *p.peek() == Token::Comma {
                p.next();
            } else {
                break;
            }
        }
    }

    let mut subspaces: Vec<(Vec<String>, Vec<Pos>)> = Vec::new();
    while p.at_keyword("subspace") {
        p.next();
        let (mut names, mut positions) = (Vec::new(), Vec::new());
        loop {
            let (n, pos) = p.expect_word("an attribute name")?;
            names.push(n);
            positions.push(pos);
            if *p.peek() == Token::Comma {
                p.next();
            } else {
                break;
            }
        }
        subspaces.push((names, positions));
    }

    let (partitions, partitions_pos) = p.partitions()?;
    let (tolerate, tolerate_pos) = p.tolerate(default_tolerate)?;
    let (placement, placement_pos) = p.placement()?;

    let mut adapt = false;
    if p.at_keyword("adapt") {
        p.next();
        adapt = match p.next() {
            (Token::Word(w), _) if w == "on" => true,
            (Token::Word(w), _) if w == "off" => false,
            (other, pos) => {
                return Err(p.error_at(pos, format!("expected \"on\" or \"off\", found {other}")))
            }
        };
    }

    p.expect_end()?;

    let attr_positions: Vec<Pos> = attributes.iter().map(|(_, pos)| *pos).collect();
    let subspace_names: Vec<Vec<String>> = subspaces.iter().map(|(n, _)| n.clone()).collect();
    SpaceSchema::new(
        &name,
        key,
        attributes.into_iter().map(|(a, _)| a).collect(),
        subspace_names,
        partitions,
        tolerate,
    )
    .and_then(|schema| {
        let placement = placement.resolve(&schema)?;
        let schema = schema.with_placement(placement)?;
        schema.check_adapt(adapt)?;
        Ok(schema.with_adapt(adapt))
    })
    .map_err(|e| {
        // Point at the most specific place the error concerns.
        let pos = match &e {
            SchemaError::InvalidName(n) if *n == name => name_pos,
            SchemaError::KeyNotPrimitive { .. } => key_pos,
            SchemaError::InvalidName(n)
            | SchemaError::DuplicateAttribute(n)
            | SchemaError::DomainNotOrdered { name: n, .. }
            | SchemaError::BadAttributeDomain { name: n, .. } => attr_positions
                .iter()
                .zip(text_names(text, &attr_positions))
                .filter(|(_, name)| name == n)
                .map(|(pos, _)| *pos)
                .next_back()
                .unwrap_or(key_pos),
            SchemaError::UnknownAttribute(n)
            | SchemaError::KeyInSubspace(n)
            | SchemaError::DuplicateDimension(n)
            | SchemaError::DimensionNotPrimitive { name: n, .. } => subspaces
                .iter()
                .flat_map(|(names, positions)| names.iter().zip(positions))
                .filter(|(name, _)| *name == n)
                .map(|(_, pos)| *pos)
                .next_back()
                .unwrap_or(name_pos),
            SchemaError::TooManyDimensions { .. } | SchemaError::TooManySubspaces { .. } => {
                subspaces
                    .last()
                    .and_then(|(_, p)| p.first().copied())
                    .unwrap_or(name_pos)
            }
            SchemaError::BadPartitions(_) => partitions_pos,
            SchemaError::BadTolerate(_) => tolerate_pos,
            SchemaError::NotTags { .. }
            | SchemaError::UnknownTags(_)
            | SchemaError::BadSpread { .. }
            | SchemaError::BadTagAxes(_)
            | SchemaError::BadDomain { .. } => placement_pos,
            _ => name_pos,
        };
        ParseError {
            line: pos.line,
            column: pos.column,
            message: e.to_string(),
        }
    })
}

/// A placement as the description gives it: the tags attribute by name.
enum ParsedPlacement {
    Random,
    Ordered(Option<(Value, Value)>),
    Tagged { tags: String, axes: u8, spread: u32 },
}

impl ParsedPlacement {
    fn resolve(self, schema: &SpaceSchema) -> Result<Placement, SchemaError> {
        Ok(match self {
            ParsedPlacement::Random => Placement::Random,
            ParsedPlacement::Ordered(domain) => Placement::Ordered { domain },
            ParsedPlacement::Tagged { tags, axes, spread } => Placement::Tagged {
                attribute: schema
                    .attribute_index(&tags)
                    .ok_or(SchemaError::UnknownTags(tags))?,
                curve: TagCurve { axes, spread },
            },
        })
    }
}

/// The rest of a dynamic space's description, after its key.
fn parse_dynamic_rest(
    p: &mut Parser,
    name: &str,
    name_pos: Pos,
    key: Attribute,
    key_pos: Pos,
    default_tolerate: u32,
) -> Result<SpaceSchema, ParseError> {
    let mut dimensions = u32::from(DYNAMIC_DIMENSIONS_DEFAULT);
    let mut dimensions_pos = p.pos();
    if p.at_keyword("dimensions") {
        p.next();
        dimensions_pos = p.pos();
        dimensions = match p.next() {
            (Token::Number(n), _) => u32::try_from(n).unwrap_or(u32::MAX),
            (other, pos) => {
                return Err(p.error_at(pos, format!("expected a dimension count, found {other}")))
            }
        };
    }
    if ["attributes", "attribute", "subspace", "adapt"]
        .iter()
        .any(|k| p.at_keyword(k))
    {
        return Err(p.error_at(
            p.pos(),
            format!(
                "a dynamic space declares no {}: its documents have any properties, and their names pick their dimensions",
                match p.peek() {
                    Token::Word(w) => w.clone(),
                    _ => String::new(),
                }
            ),
        ));
    }
    let (partitions, partitions_pos) = p.partitions()?;
    let (tolerate, tolerate_pos) = p.tolerate(default_tolerate)?;
    p.expect_end()?;
    SpaceSchema::dynamic(name, key, dimensions, partitions, tolerate).map_err(|e| {
        let pos = match &e {
            SchemaError::KeyNotPrimitive { .. } | SchemaError::DuplicateAttribute(_) => key_pos,
            SchemaError::BadDimensions(_) => dimensions_pos,
            SchemaError::BadPartitions(_) => partitions_pos,
            SchemaError::BadTolerate(_) => tolerate_pos,
            SchemaError::InvalidName(n) if n != name => key_pos,
            _ => name_pos,
        };
        p.error_at(pos, e.to_string())
    })
}

/// The identifier found at each position of `text` (used to map schema errors back to places).
fn text_names(text: &str, positions: &[Pos]) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    positions
        .iter()
        .map(|pos| {
            lines
                .get(pos.line as usize - 1)
                .map(|l| {
                    l.chars()
                        .skip(pos.column as usize - 1)
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_spaces_round_trip_and_refuse_declarations() {
        let s = parse_space("space papers dynamic key id dimensions 6 create 16 partitions")
            .expect("valid dynamic space");
        assert_eq!(s.kind, crate::SpaceKind::Dynamic { dimensions: 6 });
        // The key, the document and its formula.
        assert_eq!(s.attributes.len(), 3);
        assert_eq!(s.subspaces.len(), 2);
        assert_eq!(s.subspaces[1].dimensions.len(), 6);
        assert_eq!(parse_space(&s.to_string()), Ok(s.clone()));
        let d = parse_space("space papers dynamic key int id").expect("defaults");
        assert_eq!(d.kind, crate::SpaceKind::Dynamic { dimensions: 8 });
        assert_eq!(d.partitions, 64);
        for (text, wanted) in [
            ("space p dynamic key id dimensions 0", "1:35"),
            ("space p dynamic key id dimensions 17", "1:35"),
            ("space p dynamic key id attributes int x", "1:24"),
            ("space p dynamic key id subspace x", "1:24"),
            ("space p dynamic key document", "1:21"),
            ("space p dynamic key formula", "1:21"),
            ("space p dynamic key list(int) k", "1:31"),
        ] {
            let e = parse_space(text).expect_err(text);
            assert_eq!(format!("{}:{}", e.line, e.column), wanted, "{text}: {e}");
        }
        assert!(matches!(
            s.subspace_dimensions(&["x".into()]),
            Err(SchemaError::DynamicSubspaces(_))
        ));
    }
    use crate::schema::AttrIndex;

    const HOTELS: &str = "space hotels
key id
attributes string city, int stars, int price, string address, string postcode, string tel,
           set(string) tags, map(string, int) rooms
subspace city, price
subspace stars
create 64 partitions
tolerate 1 failure
";

    #[test]
    fn parses_the_hotel_space() {
        let s = parse_space(HOTELS).unwrap();
        assert_eq!(s.name, "hotels");
        assert_eq!(s.key().name, "id");
        assert_eq!(s.key().ty, AttributeType::STRING);
        assert_eq!(s.attributes.len(), 9);
        assert_eq!(
            s.attribute(AttrIndex(7)).ty,
            AttributeType::Set(PrimitiveType::String)
        );
        assert_eq!(
            s.attribute(AttrIndex(8)).ty,
            AttributeType::Map(PrimitiveType::String, PrimitiveType::Int)
        );
        assert_eq!(s.subspaces.len(), 3);
        assert_eq!(s.subspaces[1].dimensions, vec![AttrIndex(1), AttrIndex(3)]);
        assert_eq!(s.subspaces[2].dimensions, vec![AttrIndex(2)]);
        assert_eq!((s.partitions, s.tolerate), (64, 1));
    }

    #[test]
    fn adapt_is_off_unless_the_description_turns_it_on() {
        assert!(!parse_space(HOTELS).unwrap().adapt);
        let on = parse_space(&format!("{HOTELS}adapt on\n")).unwrap();
        assert!(on.adapt);
        assert!(on.to_string().ends_with("adapt on\n"), "{on}");
        assert!(!parse_space(&format!("{HOTELS}adapt off")).unwrap().adapt);
        let (line, column, m) = err(&format!("{HOTELS}adapt maybe"));
        assert_eq!((line, column), (9, 7), "{m}");
        assert!(m.contains("expected \"on\" or \"off\""), "{m}");
        // `adapt` comes last, after `tolerate`.
        let (_, _, m) = err("space t key k adapt on tolerate 1 failure");
        assert!(m.contains("unexpected"), "{m}");
    }

    #[test]
    fn defaults_and_comments() {
        let s = parse_space("# a comment\nspace kv key int k # trailing\n").unwrap();
        assert_eq!(s.key().ty, AttributeType::INT);
        assert_eq!(
            (s.partitions, s.tolerate),
            (PARTITIONS_DEFAULT, TOLERATE_DEFAULT)
        );
        assert_eq!(s.subspaces.len(), 1);
    }

    #[test]
    fn untyped_attributes_are_strings_even_when_named_like_types() {
        let s = parse_space("space t key k attributes a, int, float b").unwrap();
        assert_eq!(s.attributes[2].name, "int");
        assert_eq!(s.attributes[2].ty, AttributeType::STRING);
        assert_eq!(s.attributes[3].ty, AttributeType::FLOAT);
    }

    #[test]
    fn placements_parse_print_and_refuse() {
        use crate::ids::SubspaceId;
        let s = parse_space("space t key int k placement ordered from -5 to 1000").unwrap();
        assert_eq!(
            s.placement,
            Placement::Ordered {
                domain: Some((Value::Int(-5), Value::Int(1000)))
            }
        );
        assert!(s.keys_ordered() && s.tag_subspace().is_none());
        assert_eq!(parse_space(&s.to_string()).unwrap(), s);
        let s = parse_space(
            "space tweets key int id attributes string text, set(string) tags subspace text \
             create 16 partitions placement tagged tags spread 4",
        )
        .unwrap();
        assert_eq!(
            s.placement,
            Placement::Tagged {
                attribute: crate::schema::AttrIndex(2),
                curve: TagCurve {
                    axes: TAG_AXES_DEFAULT,
                    spread: 4
                }
            }
        );
        // The tag subspace comes after the declared ones and is not declared when printed.
        assert_eq!(s.tag_subspace(), Some(SubspaceId(2)));
        assert_eq!(s.subspaces.len(), 3);
        assert_eq!(parse_space(&s.to_string()).unwrap(), s);
        let (_, _, m) = err("space t key k attributes set(string) g placement tagged g adapt on");
        assert!(m.contains("adapt stays off"), "{m}");
        assert_eq!(
            parse_space("space t key k placement random").unwrap(),
            parse_space("space t key k").unwrap()
        );
        let (l, c, m) = err("space t key k attributes tags\nplacement tagged tags");
        assert_eq!((l, c), (2, 11), "{m}");
        assert!(m.contains("set(string)"), "{m}");
        let (_, _, m) = err("space t key k placement tagged nope");
        assert!(m.contains("unknown attribute \"nope\""), "{m}");
        let (_, _, m) =
            err("space t key k attributes set(string) g create 8 partitions placement tagged g spread 9");
        assert!(m.contains("spread 9"), "{m}");
        let (_, _, m) = err("space t key k attributes set(string) g placement tagged g axes 5");
        assert!(m.contains("5 tag axes"), "{m}");
        let (_, _, m) = err("space t key int k placement ordered from 9 to 2");
        assert!(m.contains("the first below the second"), "{m}");
        let (_, _, m) = err("space t key k placement ordered from 1 to 2");
        assert!(m.contains("type string"), "{m}");
        let (_, _, m) = err("space t key k placement sideways");
        assert!(m.contains("\"random\", \"ordered\" or \"tagged\""), "{m}");
    }

    #[test]
    fn display_round_trips() {
        let s = parse_space(HOTELS).unwrap();
        assert_eq!(parse_space(&s.to_string()).unwrap(), s);
    }

    fn err(text: &str) -> (u32, u32, String) {
        let e = parse_space(text).unwrap_err();
        (e.line, e.column, e.message)
    }

    #[test]
    fn the_singular_attribute_reads_as_hyperdex_reads_it() {
        let plural = parse_space("space t key k attributes int a, b subspace a").unwrap();
        let singular = parse_space("space t key k attribute int a, b subspace a").unwrap();
        assert_eq!(singular, plural);
        let (_, _, m) = err("space d dynamic key k attribute a");
        assert!(m.contains("declares no attribute"), "{m}");
    }

    #[test]
    fn a_misspelt_type_is_named() {
        let (l, c, m) = err("space t key k\nattributes strng city, int price");
        assert_eq!((l, c), (2, 12), "{m}");
        assert!(m.contains("unknown type \"strng\""), "{m}");
        let (_, _, m) = err("space t key integer k");
        assert!(m.contains("unknown type \"integer\""), "{m}");
        // An untyped name before a keyword or a comma is still a string attribute.
        let s = parse_space("space t key k attributes city subspace city").unwrap();
        assert_eq!(s.attributes.len(), 2);
        let d = parse_space("space d dynamic key k dimensions 4").unwrap();
        assert!(d.is_dynamic());
    }

    #[test]
    fn domains_parse_print_and_refuse() {
        let s = parse_space(
            "space t key k attributes int price in 0 to 100000, float rating in 1 to 5.5, \
             float t in -2.5 to 0.25, city subspace price",
        )
        .unwrap();
        let domain = |i: usize| s.attributes[i].domain.clone();
        assert_eq!(domain(1), Some((Value::Int(0), Value::Int(100_000))));
        assert_eq!(domain(2), Some((Value::Float(1.0), Value::Float(5.5))));
        assert_eq!(domain(3), Some((Value::Float(-2.5), Value::Float(0.25))));
        assert_eq!(domain(4), None);
        assert_eq!(parse_space(&s.to_string()).unwrap(), s);
        let (l, c, m) = err("space t key k attributes int a in 5 to 5");
        assert_eq!((l, c), (1, 30), "{m}");
        assert!(m.contains("the first below the second"), "{m}");
        let (_, _, m) = err("space t key k attributes int a in 1.5 to 5");
        assert!(m.contains("the first below the second"), "{m}");
        let (l, c, m) = err("space t key k attributes string a in 1 to 5");
        assert_eq!((l, c), (1, 33), "{m}");
        assert!(m.contains("only int and float"), "{m}");
        let (_, _, m) = err("space t key k attributes int a in 1 5");
        assert!(m.contains("expected \"to\""), "{m}");
        let (_, _, m) = err("space t key k attributes int a in x to 5");
        assert!(m.contains("lowest value"), "{m}");
    }

    #[test]
    fn errors_name_line_and_column() {
        let (l, c, m) = err("space t\nkey k\nattributes int a,\n  bogus(int) b");
        assert_eq!((l, c), (4, 8), "{m}");
        let (l, c, m) = err("space t key k attributes a\nsubspace b");
        assert_eq!((l, c), (2, 10));
        assert!(m.contains("unknown attribute \"b\""), "{m}");
        let (l, c, _) = err("space t key k attributes a, a");
        assert_eq!((l, c), (1, 29));
        let (l, c, m) = err("space t key k create 0 partitions");
        assert_eq!((l, c), (1, 22));
        assert!(m.contains("partitions"), "{m}");
        let (l, c, m) = err("space t key k attributes list(int) l subspace l");
        assert_eq!((l, c), (1, 47));
        assert!(m.contains("dimensions"), "{m}");
        let (_, _, m) = err("space t key list(int) k");
        assert!(m.contains("keys must be"), "{m}");
        let (l, c, m) = err("space t key k $");
        assert_eq!((l, c), (1, 15));
        assert!(m.contains("unexpected character"), "{m}");
        let (_, _, m) = err("space t key k tolerate 1 failure extra");
        assert!(m.contains("unexpected"), "{m}");
        let (_, _, m) = err("");
        assert!(m.contains("expected \"space\""), "{m}");
        let (_, _, m) = err("space t key k subspace k");
        assert!(m.contains("key"), "{m}");
        let (_, _, m) = err("space t key k tolerate 99 failures");
        assert!(m.contains("tolerate"), "{m}");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::value::{AttributeType, PrimitiveType, Value};
    use proptest::prelude::*;

    fn primitive() -> impl Strategy<Value = PrimitiveType> {
        prop_oneof![
            Just(PrimitiveType::String),
            Just(PrimitiveType::Int),
            Just(PrimitiveType::Float)
        ]
    }

    fn attribute_type() -> impl Strategy<Value = AttributeType> {
        prop_oneof![
            primitive().prop_map(AttributeType::Primitive),
            primitive().prop_map(AttributeType::List),
            primitive().prop_map(AttributeType::Set),
            (primitive(), primitive()).prop_map(|(k, v)| AttributeType::Map(k, v)),
        ]
    }

    /// Random valid schemas: a primitive key, up to 8 attributes, subspaces over primitives.
    fn schema() -> impl Strategy<Value = SpaceSchema> {
        (
            primitive(),
            proptest::collection::vec(attribute_type(), 0..8),
            1u32..5000,
            0u32..4,
            any::<u64>(),
        )
            .prop_map(|(key, types, partitions, tolerate, seed)| {
                let attributes: Vec<Attribute> = types
                    .iter()
                    .enumerate()
                    .map(|(i, &ty)| Attribute {
                        name: format!("a{i}"),
                        ty,
                        // Some ordered attributes declare a domain (`in LOW to HIGH`).
                        domain: match (ty, (seed >> (48 + i)) & 1) {
                            (AttributeType::Primitive(PrimitiveType::Int), 1) => Some((
                                Value::Int(-((seed % 89) as i64)),
                                Value::Int((seed % 100_000) as i64),
                            )),
                            (AttributeType::Primitive(PrimitiveType::Float), 1) => Some((
                                Value::Float(-((seed % 89) as f64) / 4.0),
                                Value::Float((seed % 1000) as f64 / 8.0 + 0.5),
                            )),
                            _ => None,
                        },
                    })
                    .collect();
                let dims: Vec<String> = attributes
                    .iter()
                    .filter(|a| a.ty.is_primitive())
                    .map(|a| a.name.clone())
                    .collect();
                let mut subspaces = Vec::new();
                for s in 0..(seed % 3) as usize {
                    let chosen: Vec<String> = dims
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| (seed >> (s * 8 + i)) & 1 == 1)
                        .map(|(_, n)| n.clone())
                        .collect();
                    if !chosen.is_empty() {
                        subspaces.push(chosen);
                    }
                }
                let schema = SpaceSchema::new(
                    "s",
                    Attribute::new("k", AttributeType::Primitive(key)),
                    attributes,
                    subspaces,
                    partitions,
                    tolerate,
                )
                .expect("generated schemas are valid");
                let tags = schema
                    .attributes
                    .iter()
                    .position(|a| a.ty == AttributeType::Set(PrimitiveType::String));
                let placement = match ((seed >> 40) % 3, tags) {
                    (1, _) if key == PrimitiveType::Int => Placement::Ordered {
                        domain: Some((
                            Value::Int(-((seed % 97) as i64)),
                            Value::Int(1 + (seed % 1000) as i64),
                        )),
                    },
                    (1, _) => Placement::Ordered { domain: None },
                    (2, Some(t)) => Placement::Tagged {
                        attribute: crate::schema::AttrIndex(t as u16),
                        curve: TagCurve {
                            axes: 1 + (seed >> 50) as u8 % 4,
                            spread: 1 + (seed >> 52) as u32 % partitions,
                        },
                    },
                    _ => Placement::Random,
                };
                let schema = schema
                    .with_placement(placement)
                    .expect("generated placements are valid");
                let adapt = seed >> 63 == 1 && schema.check_adapt(true).is_ok();
                schema.with_adapt(adapt)
            })
    }

    proptest! {
        #[test]
        fn printed_descriptions_parse_back(s in schema()) {
            prop_assert_eq!(parse_space(&s.to_string()).unwrap(), s);
        }

        /// No input makes the parser panic; every error points inside the text.
        #[test]
        fn parser_never_panics(text in "[a-z0-9(), #\n]{0,80}") {
            if let Err(e) = parse_space(&text) {
                prop_assert!(e.line >= 1 && e.column >= 1);
                prop_assert!(e.line as usize <= text.lines().count().max(1) + 1);
            }
        }
    }
}
