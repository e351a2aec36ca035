//! The commands that write and read a space's objects: `put`, `put-many`, `get`, `get-many`,
//! `get-range`, `get-by-tags`, `del`, `search` and `count`. Objects are printed one JSON line
//! each (json.rs); keys and predicates are read as the command line writes them
//! (predicates.rs).

use std::path::Path;

use tessera_client::{Client, Predicate, Record, SpaceSchema};

use crate::failure::Failure;
use crate::stdio::{print_line, read_text};
use crate::target::{connect, Target};
use crate::{json, predicates};

// `tessera put` (its help: `Command::Put`).
#[derive(clap::Args)]
pub struct PutArgs {
    /// The space's name.
    space: String,
    /// The object's key, read as the space's key type.
    key: String,
    /// The attributes, as one JSON object; `-` reads it from stdin and `@FILE` from a file
    /// (for objects too large for a command line, up to the 1 MiB limit).
    json: String,
    /// A dynamic space's document: place it by this registered compression formula
    /// (`alter-space SPACE add-formula`); `''` for the default, the unispace. Without it
    /// the document keeps the formula it has (a new one gets the default).
    #[arg(long)]
    formula: Option<String>,
}

// `tessera get` (its help: `Command::Get`).
#[derive(clap::Args)]
pub struct GetArgs {
    /// The space's name.
    space: String,
    /// The object's key, read as the space's key type.
    key: String,
}

// `tessera get-many` (its help: `Command::GetMany`).
#[derive(clap::Args)]
pub struct GetManyArgs {
    space: String,
    #[arg(required = true)]
    keys: Vec<String>,
}

// `tessera get-range` (its help: `Command::GetRange`).
#[derive(clap::Args)]
pub struct GetRangeArgs {
    space: String,
    /// The first key of the range (included).
    #[arg(long, allow_hyphen_values = true)]
    from: String,
    /// The end of the range (excluded).
    #[arg(long, allow_hyphen_values = true)]
    to: String,
    /// At most this many objects, the smallest keys first.
    #[arg(long)]
    limit: Option<u32>,
    /// Print how the read would run (regions and servers, with and without minimizing
    /// the servers) instead of running it.
    #[arg(long)]
    explain: bool,
}

// `tessera get-by-tags` (its help: `Command::GetByTags`).
#[derive(clap::Args)]
pub struct GetByTagsArgs {
    space: String,
    #[arg(required = true)]
    tags: Vec<String>,
    /// Print how the read would run instead of running it.
    #[arg(long)]
    explain: bool,
}

// `tessera put-many` (its help: `Command::PutMany`).
#[derive(clap::Args)]
pub struct PutManyArgs {
    space: String,
    /// A dynamic space's documents: place them all by this registered compression formula.
    #[arg(long)]
    formula: Option<String>,
}

// `tessera del` (its help: `Command::Del`).
#[derive(clap::Args)]
pub struct DelArgs {
    space: String,
    key: String,
}

// `tessera search` (its help: `Command::Search`).
#[derive(clap::Args)]
pub struct SearchArgs {
    /// The space's name.
    space: String,
    /// Predicates that must all hold: attr=value, attr<value, attr<=value, attr>value,
    /// attr>=value, attr~regex (values read as the attribute's type; quote them for the
    /// shell). In a dynamic space, dotted paths and exists(path), missing(path). None: every
    /// object.
    predicates: Vec<String>,
}

// `tessera count` (its help: `Command::Count`).
#[derive(clap::Args)]
pub struct CountArgs {
    /// The space's name.
    space: String,
    /// Predicates that must all hold: attr=value, attr<value, attr<=value, attr>value,
    /// attr>=value, attr~regex (values read as the attribute's type; quote them for the
    /// shell). In a dynamic space, dotted paths and exists(path), missing(path). None: every
    /// object.
    predicates: Vec<String>,
}

/// `tessera put`: one object (a typed space's attributes, or a dynamic space's document).
pub async fn put(args: PutArgs, target: &Target) -> Result<(), Failure> {
    let PutArgs {
        space,
        key,
        json: text,
        formula,
    } = args;
    let text = match text.strip_prefix('@') {
        Some(file) => read_text(Path::new(file))?,
        None if text == "-" => read_text(Path::new("-"))?,
        None => text,
    };
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    let key = predicates::parse_key(&schema, &key)?;
    if schema.is_dynamic() {
        let patch = json::document_from_json(&text)?;
        match formula {
            Some(f) => {
                client
                    .put_document_with_formula(&space, key, patch, &f)
                    .await?
            }
            None => client.put_document(&space, key, patch).await?,
        }
        return Ok(());
    }
    if formula.is_some() {
        return Err(Failure::Error(format!(
            "--formula places documents of dynamic spaces; {space:?} is typed"
        )));
    }
    let attributes = json::attributes_from_json(&schema, &text)?;
    client.put(&space, key, attributes).await?;
    Ok(())
}

/// `tessera put-many`: the objects of stdin's JSON lines, each put as `put` puts one.
pub async fn put_many(args: PutManyArgs, target: &Target) -> Result<(), Failure> {
    let PutManyArgs { space, formula } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    if formula.is_some() && !schema.is_dynamic() {
        return Err(Failure::Error(format!(
            "--formula places documents of dynamic spaces; {space:?} is typed"
        )));
    }
    let mut shown = Vec::new();
    let mut items = Vec::new();
    for (n, line) in std::io::stdin().lines().enumerate() {
        let line = line.map_err(|e| Failure::Error(format!("reading standard input: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let at = |e: String| Failure::Error(format!("line {}: {e}", n + 1));
        let (key_json, key, funcalls) =
            json::put_from_json_line(&schema, &line, formula.as_deref()).map_err(at)?;
        shown.push(key_json);
        items.push((key, funcalls));
    }
    let outcomes = client.multi_put(&space, items).await;
    let total = outcomes.len();
    let mut failed = 0;
    for (key, outcome) in shown.into_iter().zip(outcomes) {
        let line = match outcome {
            Ok(()) => serde_json::json!({"key": key, "ok": true}),
            Err(e) => {
                failed += 1;
                serde_json::json!({"key": key, "error": e.to_string()})
            }
        };
        print_line(&line)?;
    }
    if failed > 0 {
        return Err(Failure::Error(format!(
            "{failed} of {total} puts failed; the others are stored (put-many is not a transaction)"
        )));
    }
    Ok(())
}

/// `tessera get`: one object, or exit 1.
pub async fn get(args: GetArgs, target: &Target) -> Result<(), Failure> {
    let GetArgs { space, key } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    let key = predicates::parse_key(&schema, &key)?;
    match client.get(&space, key.clone()).await? {
        Some(record) => print_line(&json::object_to_json(
            &schema,
            &record.key,
            &record.attributes,
        )),
        None => Err(Failure::Negative(format!(
            "not found: no object with key {key} in {space:?}"
        ))),
    }
}

/// `tessera get-many`: the objects of several keys, `null` for a key with none.
pub async fn get_many(args: GetManyArgs, target: &Target) -> Result<(), Failure> {
    let GetManyArgs { space, keys } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    let keys = keys
        .iter()
        .map(|k| predicates::parse_key(&schema, k))
        .collect::<Result<Vec<_>, _>>()?;
    for found in client.multi_get(&space, keys).await? {
        match found {
            Some(record) => print_line(&json::object_to_json(
                &schema,
                &record.key,
                &record.attributes,
            ))?,
            None => print_line(&serde_json::Value::Null)?,
        }
    }
    Ok(())
}

/// `tessera get-range`: the objects whose keys lie in [FROM, TO), or how that read would run.
pub async fn get_range(args: GetRangeArgs, target: &Target) -> Result<(), Failure> {
    let GetRangeArgs {
        space,
        from,
        to,
        limit,
        explain,
    } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    let (from, to) = (
        predicates::parse_key(&schema, &from)?,
        predicates::parse_key(&schema, &to)?,
    );
    if explain {
        let preds = tessera_client::range_predicates(&schema, from, to);
        return explain_read(&client, &schema, &space, preds).await;
    }
    print_records(
        &schema,
        &client.get_by_range(&space, from, to, limit).await?,
    )
}

/// `tessera get-by-tags`: the objects tagged with every tag given, or how that read would run.
pub async fn get_by_tags(args: GetByTagsArgs, target: &Target) -> Result<(), Failure> {
    let GetByTagsArgs {
        space,
        tags,
        explain,
    } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    if explain {
        let preds = tessera_client::tags_predicates(&schema, tags)?;
        return explain_read(&client, &schema, &space, preds).await;
    }
    print_records(&schema, &client.get_by_tags(&space, tags).await?)
}

/// `tessera del`: one object, or exit 1.
pub async fn del(args: DelArgs, target: &Target) -> Result<(), Failure> {
    let DelArgs { space, key } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    client
        .del(&space, predicates::parse_key(&schema, &key)?)
        .await?;
    Ok(())
}

/// `tessera search`: every object matching all predicates, printed as they arrive.
pub async fn search(args: SearchArgs, target: &Target) -> Result<(), Failure> {
    let SearchArgs {
        space,
        predicates: texts,
    } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    let preds = predicates::parse_predicates(&schema, &texts)?;
    let mut stream = client.search_stream(&space, preds).await?;
    while let Some(record) = stream.next().await? {
        print_line(&json::object_to_json(
            &schema,
            &record.key,
            &record.attributes,
        ))?;
    }
    Ok(())
}

/// `tessera count`: how many objects match all predicates.
pub async fn count(args: CountArgs, target: &Target) -> Result<(), Failure> {
    let CountArgs {
        space,
        predicates: texts,
    } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    let preds = predicates::parse_predicates(&schema, &texts)?;
    println!("{}", client.count(&space, preds).await?);
    Ok(())
}

/// Prints objects one JSON line each, as `get` prints one.
fn print_records(schema: &SpaceSchema, records: &[Record]) -> Result<(), Failure> {
    for record in records {
        print_line(&json::object_to_json(
            schema,
            &record.key,
            &record.attributes,
        ))?;
    }
    Ok(())
}

/// Prints how a multi-item read (its search's predicates) would run, whom it asks included.
async fn explain_read(
    client: &Client,
    schema: &SpaceSchema,
    space: &str,
    predicates: Vec<Predicate>,
) -> Result<(), Failure> {
    let e = client.explain(space, predicates).await?;
    print_line(&crate::explanation::typed_explanation(schema, &e, true))
}
