//! The control plane's own CPU: what each of its processes (etcd, kube-apiserver, the
//! controller-manager, the scheduler, kwok) used between two samples, so that a round shows
//! what a contender's requests cost the cluster besides the operator itself.

use std::collections::BTreeMap;

use app_operator_e2e::cluster::component_pids;
use app_operator_e2e::process::cpu_seconds;

/// CPU seconds used so far by each control-plane component, by name.
#[derive(Clone, Default)]
pub(crate) struct Sample(BTreeMap<String, f64>);

impl Sample {
    /// Reads each recorded component's CPU seconds from `/proc`; fails when one is gone (a
    /// control plane that restarted mid-round would make the difference meaningless).
    pub(crate) fn take() -> anyhow::Result<Self> {
        component_pids()?
            .into_iter()
            .map(|(name, pid)| Ok((name, cpu_seconds(pid)?)))
            .collect::<anyhow::Result<_>>()
            .map(Self)
    }

    /// The CPU seconds each component used from `earlier` to this sample.
    pub(crate) fn since(&self, earlier: &Sample) -> Self {
        Self(
            self.0
                .iter()
                .map(|(name, secs)| {
                    let before = earlier.0.get(name).copied().unwrap_or(0.0);
                    (name.clone(), secs - before)
                })
                .collect(),
        )
    }

    /// The CPU seconds of all the components together.
    pub(crate) fn total(&self) -> f64 {
        self.0.values().sum()
    }

    /// The CPU seconds of component `name`, if it was sampled.
    pub(crate) fn of(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }

    /// The names of the components sampled.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Each component's name and CPU seconds, by name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(name, secs)| (name.as_str(), *secs))
    }
}

#[cfg(test)]
mod tests {
    use super::Sample;

    #[test]
    fn a_difference_is_per_component_and_sums_to_the_total() {
        let before = Sample([("etcd".into(), 1.0), ("kwok".into(), 2.0)].into());
        let after = Sample([("etcd".into(), 1.5), ("kwok".into(), 4.0)].into());
        let used = after.since(&before);
        assert_eq!(used.of("etcd"), Some(0.5));
        assert_eq!(used.of("kwok"), Some(2.0));
        assert_eq!(used.total(), 2.5);
        assert_eq!(used.names().collect::<Vec<_>>(), ["etcd", "kwok"]);
        assert_eq!(
            used.iter().collect::<Vec<_>>(),
            [("etcd", 0.5), ("kwok", 2.0)]
        );
    }
}
