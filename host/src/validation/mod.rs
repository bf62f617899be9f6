//! Local checks are the cluster's checks: an object validated against its CRD as the API server
//! validates a create, from the generated CRD itself (`AppService::crd()`), so a rule added in
//! `crd.rs` holds here with no second edit.
//!
//! The steps follow the API server's: strict field validation (undeclared fields refuse the
//! object, and nothing else is checked), the status dropped (a status subresource), nulls in
//! non-nullable fields dropped and the schema's defaults applied, then the metadata, the
//! structural schema (`jsonschema`), the list-type invariants and the scale subresource; the CEL
//! rules (kube-cel) last, skipped, as the API server skips them, when an earlier failure leaves
//! the object without its schema's shape. What is not checked here: string `format`s, the CEL
//! cost limits (the rules are bounded by `maxItems`/`maxLength`; the API server checks their
//! estimated cost when the CRD is applied), and what other layers refuse (see
//! `docs/guest-authors.md`: a NodePort already allocated, or outside a cluster's own range).

mod cel;
mod field;
mod lists;
mod meta;
mod prune;
mod scale;
mod schema;

use std::sync::LazyLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

pub use self::field::{ErrorType, FieldError};
use crate::crd::AppService;

/// A CRD that cannot be checked against.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CRD's first version has no `openAPIV3Schema`.
    #[error("CRD {0} has no OpenAPI v3 schema")]
    NoSchema(String),
    /// The schema or a CEL rule does not compile.
    #[error("CRD {crd}: {what} does not compile: {message}")]
    Compile {
        /// The CRD.
        crd: String,
        /// The schema or the CEL rules.
        what: &'static str,
        /// Why.
        message: String,
    },
}

/// An object the API server would refuse, with every failure it would report.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}", self.errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Invalid {
    /// The failures, each naming its field.
    pub errors: Vec<FieldError>,
}

/// The checks of one CRD's served version, compiled once.
pub struct Validator {
    openapi: Value,
    status_subresource: bool,
    spec_replicas_path: Option<String>,
    structural: schema::Structural,
    rules: cel::Rules,
}

impl Validator {
    /// The checks of `crd`'s first version.
    pub fn for_crd(crd: &CustomResourceDefinition) -> Result<Self, Error> {
        let crd_name = crd.metadata.name.clone().unwrap_or_default();
        let version = crd.spec.versions.first();
        let openapi = version
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .ok_or_else(|| Error::NoSchema(crd_name.clone()))?;
        // NB: JSONSchemaProps always serializes.
        let openapi = serde_json::to_value(openapi).expect("a schema serializes to JSON");
        let compile = |what| {
            let crd = crd_name.clone();
            move |message| Error::Compile { crd, what, message }
        };
        let subresources = version.and_then(|v| v.subresources.as_ref());
        let root = kube::core::cel::RootContext {
            api_version: format!(
                "{}/{}",
                crd.spec.group,
                version.map(|v| v.name.as_str()).unwrap_or_default()
            ),
            api_group: crd.spec.group.clone(),
            kind: crd.spec.names.kind.clone(),
        };
        Ok(Self {
            structural: schema::Structural::new(&openapi).map_err(compile("the schema"))?,
            rules: cel::Rules::new(&openapi, root).map_err(compile("a CEL rule"))?,
            status_subresource: subresources.is_some_and(|s| s.status.is_some()),
            spec_replicas_path: subresources
                .and_then(|s| s.scale.as_ref())
                .map(|s| s.spec_replicas_path.clone()),
            openapi,
        })
    }

    /// The checks of the AppService CRD this binary generates.
    pub fn app_service() -> &'static Validator {
        static VALIDATOR: LazyLock<Validator> = LazyLock::new(|| {
            Validator::for_crd(&AppService::crd())
                .expect("the generated CRD has a schema whose rules compile (crd.rs tests)")
        });
        &VALIDATOR
    }

    /// `object` as the API server would store it on create (defaults applied, status dropped),
    /// or every failure for which it would refuse it.
    pub fn validate(&self, object: &Value) -> Result<Value, Invalid> {
        let unknown = prune::unknown_fields(&self.openapi, object);
        if !unknown.is_empty() {
            return Err(Invalid { errors: unknown });
        }
        let mut object = object.clone();
        if self.status_subresource
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        prune::drop_nulls(&self.openapi, &mut object);
        let object = kube::core::cel::apply_defaults(&self.openapi, &object);

        let mut errors = meta::check(&object);
        errors.extend(self.structural.check(&object));
        errors.extend(lists::duplicates(&self.openapi, &object));
        if let Some(path) = &self.spec_replicas_path {
            errors.extend(scale::check(path, &object));
        }
        if errors.iter().any(|e| e.kind.blocks_cel()) {
            errors.push(
                FieldError::new(
                    "",
                    ErrorType::Invalid,
                    "some validation rules were not checked because the object was invalid; \
                 correct the existing errors to complete validation",
                )
                .with_value(Value::Null),
            );
        } else {
            errors.extend(self.rules.check(&object));
        }
        match errors.is_empty() {
            true => Ok(object),
            false => Err(Invalid { errors }),
        }
    }
}

#[cfg(test)]
mod tests;
