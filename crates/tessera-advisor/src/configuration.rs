//! A subspace configuration: what the advisor chooses between.

use serde::{Deserialize, Serialize};
use tessera_types::{AttrIndex, SchemaError, SpaceSchema};

/// The subspaces of a space besides the key subspace, in declaration order, each with its
/// dimensions in declaration order. Both orders matter a little, as they do to Tessera: the
/// first `k` dimensions of a subspace get one interval more than the others when `R` has no
/// exact d-th root, and of two subspaces that a search finds equally cheap it uses the one
/// declared first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Configuration {
    subspaces: Vec<Vec<AttrIndex>>,
}

impl Configuration {
    /// The configuration with no subspace but the key's (Tessera as a plain key-value store).
    pub fn none() -> Configuration {
        Configuration::default()
    }

    /// `subspaces` for `schema`'s attributes, checked by the rules of a space description
    /// ([`SpaceSchema::new`]: attributes exist, are primitive, are not the key, appear once per
    /// subspace; limits on subspaces and dimensions).
    pub fn new(
        schema: &SpaceSchema,
        subspaces: Vec<Vec<AttrIndex>>,
    ) -> Result<Configuration, SchemaError> {
        let configuration = Configuration { subspaces };
        configuration.to_schema(schema)?;
        Ok(configuration)
    }

    /// A configuration built by the advisor from attributes it checked already.
    pub(crate) fn from_checked(subspaces: Vec<Vec<AttrIndex>>) -> Configuration {
        Configuration { subspaces }
    }

    /// The configuration `schema` has now.
    pub fn of_schema(schema: &SpaceSchema) -> Configuration {
        Configuration {
            subspaces: schema.subspaces[1..]
                .iter()
                .map(|s| s.dimensions.clone())
                .collect(),
        }
    }

    pub fn subspaces(&self) -> &[Vec<AttrIndex>] {
        &self.subspaces
    }

    /// Each subspace as its attributes' names.
    pub fn names(&self, schema: &SpaceSchema) -> Vec<Vec<String>> {
        self.subspaces
            .iter()
            .map(|dims| {
                dims.iter()
                    .map(|&a| schema.attribute(a).name.clone())
                    .collect()
            })
            .collect()
    }

    /// The configuration whose subspaces have these attributes' names ([`Configuration::names`]
    /// back), checked as [`Configuration::new`] checks.
    pub fn of_names(
        schema: &SpaceSchema,
        names: &[Vec<String>],
    ) -> Result<Configuration, SchemaError> {
        let subspaces = names
            .iter()
            .map(|n| schema.subspace_dimensions(n))
            .collect::<Result<Vec<_>, _>>()?;
        Configuration::new(schema, subspaces)
    }

    /// `base` with this configuration's subspaces instead of its own: the space to create (its
    /// `Display` is the space description).
    pub fn to_schema(&self, base: &SpaceSchema) -> Result<SpaceSchema, SchemaError> {
        let name = |a: AttrIndex| {
            base.attributes
                .get(a.get())
                .map(|attr| attr.name.clone())
                .ok_or_else(|| SchemaError::UnknownAttribute(format!("#{}", a.0)))
        };
        let subspaces = self
            .subspaces
            .iter()
            .map(|dims| dims.iter().map(|&a| name(a)).collect::<Result<Vec<_>, _>>())
            .collect::<Result<Vec<_>, _>>()?;
        SpaceSchema::new(
            &base.name,
            base.key().clone(),
            base.attributes[1..].to_vec(),
            subspaces,
            base.partitions,
            base.tolerate,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    fn hotels() -> SpaceSchema {
        parse_space(
            "space hotels key id attributes string city, int stars, int price, set(string) tags \
             subspace city, price subspace stars create 64 partitions tolerate 1 failure",
        )
        .expect("valid space")
    }

    #[test]
    fn current_round_trips_and_renders() {
        let s = hotels();
        let current = Configuration::of_schema(&s);
        assert_eq!(
            current.names(&s),
            vec![vec!["city", "price"], vec!["stars"]]
        );
        assert_eq!(current.to_schema(&s).expect("valid"), s);
        let none = Configuration::none().to_schema(&s).expect("valid");
        assert_eq!(none.subspaces.len(), 1);
        assert!(!none.to_string().contains("subspace"));
    }

    #[test]
    fn invalid_subspaces_are_refused_by_the_schema_rules() {
        let s = hotels();
        assert_eq!(
            Configuration::new(&s, vec![vec![AttrIndex(0)]]),
            Err(SchemaError::KeyInSubspace("id".into()))
        );
        assert_eq!(
            Configuration::new(&s, vec![vec![AttrIndex(4)]]),
            Err(SchemaError::DimensionNotPrimitive {
                name: "tags".into(),
                ty: tessera_types::AttributeType::Set(tessera_types::PrimitiveType::String)
            })
        );
        assert_eq!(
            Configuration::new(&s, vec![vec![]]),
            Err(SchemaError::EmptySubspace)
        );
        assert_eq!(
            Configuration::new(&s, vec![vec![AttrIndex(9)]]),
            Err(SchemaError::UnknownAttribute("#9".into()))
        );
        assert_eq!(
            Configuration::new(&s, vec![vec![AttrIndex(1), AttrIndex(1)]]),
            Err(SchemaError::DuplicateDimension("city".into()))
        );
        assert!(Configuration::new(
            &s,
            vec![vec![AttrIndex(3), AttrIndex(1)], vec![AttrIndex(2)]]
        )
        .is_ok());
    }

    #[test]
    fn names_read_back_into_the_same_configuration() {
        let s = hotels();
        let c = Configuration::new(
            &s,
            vec![vec![AttrIndex(3), AttrIndex(1)], vec![AttrIndex(2)]],
        )
        .expect("valid");
        assert_eq!(Configuration::of_names(&s, &c.names(&s)), Ok(c));
        assert_eq!(
            Configuration::of_names(&s, &[vec!["id".into()]]),
            Err(SchemaError::KeyInSubspace("id".into()))
        );
        assert!(Configuration::of_names(&s, &[vec!["town".into()]]).is_err());
    }
}
