//! Reading an operator's Prometheus text output (`/metrics`): its samples, and sums of them.

/// `(label text, value)` of each sample of metric `name` in the Prometheus text `text`; the
/// label text is empty for an unlabelled sample.
pub fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(name)?;
        let (labels, value) = match rest.strip_prefix('{') {
            Some(rest) => {
                let (labels, value) = rest.split_once("} ")?;
                (labels, value)
            }
            None => ("", rest.strip_prefix(' ')?),
        };
        Some((labels, value.split_whitespace().next()?.parse().ok()?))
    })
}

/// The sum of the samples of the metric family `name` in `text` whose label text contains
/// `label` (`""`: every sample), if any.
pub fn sum_matching(text: &str, name: &str, label: &str) -> Option<f64> {
    samples(text, name)
        .filter(|(labels, _)| labels.contains(label))
        .map(|(_, value)| value)
        .reduce(|total, value| total + value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sums_add_the_samples_whose_labels_match_from_one_text() {
        let metrics = "# TYPE r counter\n\
                       r{method=\"GET\",resource=\"pods\"} 3\n\
                       r{method=\"PATCH\",resource=\"pods\"} 5\n\
                       r_other 7\n\
                       u 2\n";
        assert_eq!(sum_matching(metrics, "r", ""), Some(8.0));
        assert_eq!(sum_matching(metrics, "r", r#"method="GET""#), Some(3.0));
        assert_eq!(sum_matching(metrics, "r", r#"method="PUT""#), None);
        assert_eq!(sum_matching(metrics, "u", ""), Some(2.0));
        assert_eq!(sum_matching(metrics, "u", "x"), None);
    }

    #[test]
    fn a_name_with_its_labels_finds_that_one_sample_as_unlabelled() {
        let metrics = "r{kind=\"guest\"} 3\nr{kind=\"apply\"} 5\nr 9\n";
        let first = |name| samples(metrics, name).find_map(|(l, v)| l.is_empty().then_some(v));
        assert_eq!(first(r#"r{kind="apply"}"#), Some(5.0));
        assert_eq!(first("r"), Some(9.0));
        assert_eq!(first(r#"r{kind="none"}"#), None);
    }
}
