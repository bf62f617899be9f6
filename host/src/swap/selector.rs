//! Parsing of the canary's label selector: the equality-based subset of Kubernetes' syntax.

use kube::core::{Expression, Selector};

/// A selector that cannot be parsed.
#[derive(Debug, thiserror::Error)]
#[error("invalid label selector {text:?}: {reason}")]
pub struct Error {
    /// The selector as written.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parses `key=value`, `key==value`, `key!=value`, `key` and `!key` terms joined by commas, as
/// `kubectl -l` does. Set-based terms (`in`, `notin`) are not supported. An empty selector is
/// refused: a canary for everything is a plain swap.
pub fn parse(text: &str) -> Result<Selector, Error> {
    let err = |reason| Error {
        text: text.to_owned(),
        reason,
    };
    let mut expressions = Vec::new();
    for term in text.split(',').map(str::trim) {
        if term.is_empty() {
            return Err(err("empty term"));
        }
        let expression = if let Some((k, v)) = term.split_once("!=") {
            Expression::NotEqual(key(k).ok_or_else(|| err("bad key"))?, value(v, &err)?)
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            Expression::Equal(key(k).ok_or_else(|| err("bad key"))?, value(v, &err)?)
        } else if let Some(k) = term.strip_prefix('!') {
            Expression::DoesNotExist(key(k).ok_or_else(|| err("bad key"))?)
        } else if term.contains(' ') || term.contains('(') {
            return Err(err("set-based terms are not supported"));
        } else {
            Expression::Exists(key(term).ok_or_else(|| err("bad key"))?)
        };
        expressions.push(expression);
    }
    Ok(expressions.into_iter().collect())
}

fn key(k: &str) -> Option<String> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.len() <= 316
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    ok.then(|| k.to_owned())
}

fn value(v: &str, err: &dyn Fn(&'static str) -> Error) -> Result<String, Error> {
    let v = v.trim();
    let ok = v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    ok.then(|| v.to_owned()).ok_or_else(|| err("bad value"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::core::SelectorExt;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn equality_terms_match_like_kubectl() {
        let s = parse("track=canary, tier!=db,app.kubernetes.io/name,!legacy").unwrap();
        assert!(s.matches(&labels(&[
            ("track", "canary"),
            ("app.kubernetes.io/name", "web")
        ])));
        assert!(!s.matches(&labels(&[
            ("track", "stable"),
            ("app.kubernetes.io/name", "w")
        ])));
        assert!(!s.matches(&labels(&[
            ("track", "canary"),
            ("app.kubernetes.io/name", "web"),
            ("legacy", "")
        ])));
        assert!(
            parse("track==canary")
                .unwrap()
                .matches(&labels(&[("track", "canary")]))
        );
    }

    #[test]
    fn malformed_selectors_are_refused() {
        for bad in ["", "a=b,", "=x", "a in (b)", "a=b c", "a=(b)"] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
