//! The CRD's CEL rules (`x-kubernetes-validations`), evaluated by kube-cel (kube's `cel`
//! feature), the Kubernetes CEL libraries on the `cel` crate.

use kube::core::cel::{self as kube_cel, CompiledSchema, ErrorKind, RootContext};
use serde_json::Value;

use super::field::{ErrorType, FieldError};

/// The compiled rules of one CRD version.
pub(super) struct Rules {
    compiled: CompiledSchema,
    root: RootContext,
}

impl Rules {
    /// Compiles every rule of `openapi`; a rule that does not compile is an error, as it is when
    /// the API server registers the CRD.
    pub(super) fn new(openapi: &Value, root: RootContext) -> Result<Self, String> {
        let compiled = kube_cel::compile_schema(openapi);
        if let Some(first) = compiled.compilation_errors().first() {
            return Err(first.to_string());
        }
        Ok(Self { compiled, root })
    }

    /// Every rule `object` breaks, by field path. A rule kube-cel cannot evaluate counts as broken (it fails
    /// closed), with kube-cel's reason.
    pub(super) fn check(&self, object: &Value) -> Vec<FieldError> {
        let validator = kube_cel::Validator::new();
        let Err(errors) = validator.validate_compiled_with_context(
            &self.compiled,
            object,
            None,
            Some(&self.root),
        ) else {
            return Vec::new();
        };
        // NB: kube-cel's order of the schema's properties varies from run to run; by field
        // path, the output is stable (and in the API server's order for sibling fields).
        let mut errors = errors.into_vec();
        errors.sort_by(|a, b| a.field_path.cmp(&b.field_path));
        errors
            .iter()
            .map(|e| {
                let detail = match e.kind {
                    ErrorKind::ValidationFailure => e.message.clone(),
                    _ => format!("{} (not evaluated locally: {:?})", e.message, e.kind),
                };
                FieldError::new(e.field_path.clone(), ErrorType::Invalid, detail)
            })
            .collect()
    }
}
