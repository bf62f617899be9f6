//! The output policy flags shared by `run`, `render` and `plan`, so a policy author tests a
//! guest locally under the same rules the operator enforces.

use crate::guest::admission::{self, Level};

/// What a guest's output may contain (see `docs/security.md`).
#[derive(Clone, Debug, clap::Args)]
pub struct PolicyArgs {
    /// Pod Security Standard every pod template must meet; a namespace's
    /// `pod-security.kubernetes.io/enforce` label applies instead when it is stricter.
    #[arg(long, env = "APP_OPERATOR_POD_SECURITY", default_value = "baseline")]
    pub pod_security: Level,
    /// Service types a guest may emit (repeatable or comma-separated); `ExternalName` is never
    /// allowed. Add `LoadBalancer` to opt in.
    #[arg(
        long = "allow-service-type",
        env = "APP_OPERATOR_ALLOW_SERVICE_TYPES",
        value_delimiter = ',',
        default_values_t = [String::from("ClusterIP"), String::from("NodePort")]
    )]
    pub service_types: Vec<String>,
    /// ServiceAccounts pod templates may name (repeatable or comma-separated), besides the
    /// namespace's `default`.
    #[arg(
        long = "allow-service-account",
        env = "APP_OPERATOR_ALLOW_SERVICE_ACCOUNTS",
        value_delimiter = ','
    )]
    pub service_accounts: Vec<String>,
    /// Most objects one AppService may render into.
    #[arg(long, env = "APP_OPERATOR_MAX_OBJECTS", default_value_t = admission::Config::default().max_objects)]
    pub max_objects: usize,
}

impl PolicyArgs {
    /// The output policy these flags describe.
    pub fn config(&self) -> admission::Config {
        admission::Config {
            pod_security: self.pod_security,
            service_types: self.service_types.clone(),
            service_accounts: self.service_accounts.clone(),
            max_objects: self.max_objects,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        policy: PolicyArgs,
    }

    #[test]
    fn defaults_match_the_runtime_defaults() {
        let cli = Cli::try_parse_from(["x"]).expect("no flags parse");
        assert_eq!(cli.policy.config(), admission::Config::default());
    }

    #[test]
    fn flags_parse() {
        let cli = Cli::try_parse_from([
            "x",
            "--pod-security",
            "restricted",
            "--allow-service-type",
            "ClusterIP,LoadBalancer",
            "--allow-service-account",
            "builder",
            "--max-objects",
            "3",
        ])
        .expect("the flags parse");
        let config = cli.policy.config();
        assert_eq!(config.pod_security, Level::Restricted);
        assert_eq!(config.service_types, ["ClusterIP", "LoadBalancer"]);
        assert_eq!(config.service_accounts, ["builder"]);
        assert_eq!(config.max_objects, 3);
        assert!(Cli::try_parse_from(["x", "--pod-security", "strict"]).is_err());
    }
}
