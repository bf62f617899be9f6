//! Reading the operator's Prometheus text output: counters and histogram quantiles.

use std::collections::BTreeMap;

use app_operator_e2e::prom::{samples, sum_matching};

/// The value of every sample of `name` (summed over labels) whose label text contains `filter`;
/// 0 when there is none.
pub(crate) fn sum(text: &str, name: &str, filter: &str) -> f64 {
    sum_matching(text, name, filter).unwrap_or(0.0)
}

/// The HTTP methods [`by_method`] counts, in its order.
pub(crate) const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Counter `name` summed per label `method="..."`, in the order of [`METHODS`].
pub(crate) fn by_method(text: &str, name: &str) -> [u64; 5] {
    METHODS.map(|m| sum(text, name, &format!("method=\"{m}\"")) as u64)
}

/// Counter `name`'s writes (every method but GET) by method and resource, keyed
/// `"PATCH deployments"`, from samples labelled with both; empty for a counter without a
/// `resource` label (the Go seed's).
pub(crate) fn writes_by_resource(text: &str, name: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (labels, value) in samples(text, name) {
        let (Some(method), Some(resource)) = (label(labels, "method"), label(labels, "resource"))
        else {
            continue;
        };
        if method != "GET" && value > 0.0 {
            *out.entry(format!("{method} {resource}")).or_default() += value as u64;
        }
    }
    out
}

/// Counter `name` per value of its label `key`, e.g. the objects each watch delivered by
/// `kind`; samples without the label are left out.
pub(crate) fn by_label(text: &str, name: &str, key: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (labels, value) in samples(text, name) {
        if let Some(v) = label(labels, key) {
            *out.entry(v.to_owned()).or_default() += value as u64;
        }
    }
    out
}

/// The value of label `key` in the label text `labels` (`method="GET",resource="x"`).
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| v.trim_matches('"'))
    })
}

/// `q`-quantile of histogram `name`, interpolated linearly inside the bucket like PromQL's
/// `histogram_quantile`. `None` without observations.
pub(crate) fn quantile(text: &str, name: &str, q: f64) -> Option<f64> {
    let bucket = format!("{name}_bucket");
    let mut buckets: Vec<(f64, f64)> = samples(text, &bucket)
        .filter_map(|(labels, count)| {
            let le = labels.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total == 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for (le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let share = if count > below {
                (rank - below) / (count - below)
            } else {
                1.0
            };
            return Some(lower + (le - lower) * share);
        }
        (lower, below) = (le, count);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# TYPE x_seconds histogram
x_seconds_sum 3.0
x_seconds_count 10
x_seconds_bucket{le=\"0.1\"} 0
x_seconds_bucket{le=\"1.0\"} 5
x_seconds_bucket{le=\"2.0\"} 10
x_seconds_bucket{le=\"+Inf\"} 10
req_total{method=\"GET\"} 7
req_total{method=\"PATCH\"} 3
res_total{method=\"GET\",resource=\"deployments\"} 2
res_total{method=\"PATCH\",resource=\"deployments\"} 5
res_total{method=\"PATCH\",resource=\"appservices/status\"} 4
res_total{method=\"POST\",resource=\"events\"} 0
plain 4
";

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        assert_eq!(quantile(TEXT, "x_seconds", 0.5), Some(1.0));
        assert_eq!(quantile(TEXT, "x_seconds", 0.25), Some(0.55));
        assert_eq!(quantile(TEXT, "x_seconds", 0.99), Some(1.98));
        assert_eq!(quantile(TEXT, "nothing", 0.5), None);
    }

    #[test]
    fn counters_sum_over_matching_labels() {
        assert_eq!(sum(TEXT, "req_total", ""), 10.0);
        assert_eq!(sum(TEXT, "req_total", "PATCH"), 3.0);
        assert_eq!(sum(TEXT, "plain", ""), 4.0);
        assert_eq!(by_method(TEXT, "req_total"), [7, 0, 0, 3, 0]);
    }

    #[test]
    fn writes_are_broken_down_by_resource() {
        let writes = writes_by_resource(TEXT, "res_total");
        assert_eq!(
            writes.into_iter().collect::<Vec<_>>(),
            [
                ("PATCH appservices/status".to_owned(), 4),
                ("PATCH deployments".to_owned(), 5)
            ]
        );
        assert!(writes_by_resource(TEXT, "req_total").is_empty());
    }

    #[test]
    fn counters_are_broken_down_by_a_label() {
        let by_resource = by_label(TEXT, "res_total", "resource");
        assert_eq!(
            by_resource.into_iter().collect::<Vec<_>>(),
            [
                ("appservices/status".to_owned(), 4),
                ("deployments".to_owned(), 7),
                ("events".to_owned(), 0)
            ]
        );
        assert!(by_label(TEXT, "req_total", "resource").is_empty());
    }
}
