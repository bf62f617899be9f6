//! What `plan` found, per AppService and child, as JSON (`--output json`) and as text.

use std::fmt::Write as _;

use serde::Serialize;

/// The plan of a candidate guest for every AppService.
#[derive(Debug, Serialize)]
pub struct Plan {
    /// Digest of the candidate guest.
    pub guest: String,
    /// One entry per AppService, in the order listed.
    pub appservices: Vec<AppPlan>,
    /// The counts.
    pub summary: Summary,
}

/// The plan for one AppService.
#[derive(Debug, Serialize)]
pub struct AppPlan {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Why the guest renders nothing for it (nothing is then applied or deleted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the AppService itself fails its CRD's checks (the `error` says how): the guest
    /// is not called for it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub invalid: bool,
    /// Its children: those rendered, then those that would be deleted.
    pub children: Vec<ChildPlan>,
}

/// What would happen to one child.
#[derive(Debug, Serialize)]
pub struct ChildPlan {
    /// `Deployment`, `Service`, ...
    pub kind: String,
    /// Its name.
    pub name: String,
    /// What the controller would do.
    pub action: Action,
    /// For a creation or a change: a unified diff from the live child to the planned one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub diff: String,
    /// For a refusal or an error: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What the controller would do with a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Create it: it does not exist.
    Create,
    /// Change it.
    Change,
    /// Nothing: the apply would leave it as it is.
    Unchanged,
    /// Delete it: the AppService controls it and the guest no longer renders it.
    Delete,
    /// Nothing: the API server refuses it, or it exists under another controller.
    Refused,
    /// Unknown: the API server did not answer (transient); the message says why.
    Error,
}

/// The counts of a plan.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// AppServices planned.
    pub appservices: usize,
    /// Children to create.
    pub create: usize,
    /// Children to change.
    pub change: usize,
    /// Children to delete.
    pub delete: usize,
    /// Children refused, plus the AppServices the guest fails on.
    pub refused: usize,
    /// Children the API server gave no answer for.
    pub errors: usize,
}

impl Summary {
    /// The summary line: `N to create, M to change, K to delete, J refused`, and the errors if
    /// any.
    pub fn line(&self) -> String {
        let Summary {
            appservices,
            create,
            change,
            delete,
            refused,
            errors,
        } = self;
        let mut line = format!(
            "{appservices} AppServices: {create} to create, {change} to change, {delete} to \
             delete, {refused} refused"
        );
        if *errors > 0 {
            let _ = write!(line, ", {errors} errors");
        }
        line
    }
}

impl Plan {
    /// The plan of guest `guest` made of `appservices`, counted.
    pub fn new(guest: String, appservices: Vec<AppPlan>) -> Self {
        let mut summary = Summary {
            appservices: appservices.len(),
            ..Summary::default()
        };
        for app in &appservices {
            summary.refused += usize::from(app.error.is_some());
            for child in &app.children {
                match child.action {
                    Action::Create => summary.create += 1,
                    Action::Change => summary.change += 1,
                    Action::Delete => summary.delete += 1,
                    Action::Refused => summary.refused += 1,
                    Action::Error => summary.errors += 1,
                    Action::Unchanged => {}
                }
            }
        }
        Self {
            guest,
            appservices,
            summary,
        }
    }

    /// The AppServices that fail their CRD's checks.
    pub fn invalid(&self) -> usize {
        self.appservices.iter().filter(|a| a.invalid).count()
    }

    /// The plan as text: a diff per child created or changed, a line per child deleted,
    /// refused or in error and per AppService the guest fails on, then the summary line.
    pub fn text(&self) -> String {
        let mut out = format!("# plan for guest {}\n", self.guest);
        for app in &self.appservices {
            let (ns, name) = (&app.namespace, &app.name);
            match (&app.error, app.invalid) {
                (Some(error), true) => {
                    let _ = writeln!(out, "! invalid AppService {ns}/{name}: {error}");
                }
                (Some(error), false) => {
                    let _ = writeln!(out, "! refused AppService {ns}/{name}: {error}");
                }
                (None, _) => {}
            }
            for child in &app.children {
                let what = format!("{}/{} {ns} (AppService {name})", child.kind, child.name);
                let message = child.message.as_deref().unwrap_or_default();
                match child.action {
                    Action::Create | Action::Change => out.push_str(&child.diff),
                    Action::Unchanged => {}
                    Action::Delete => {
                        let _ = writeln!(out, "- delete {what}");
                    }
                    Action::Refused => {
                        let _ = writeln!(out, "! refused {what}: {message}");
                    }
                    Action::Error => {
                        let _ = writeln!(out, "! error {what}: {message}");
                    }
                }
            }
        }
        let _ = writeln!(out, "# {}", self.summary.line());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{Action, AppPlan, ChildPlan, Plan};

    fn child(kind: &str, action: Action) -> ChildPlan {
        ChildPlan {
            kind: kind.into(),
            name: "web".into(),
            action,
            diff: String::new(),
            message: (action == Action::Refused).then(|| "invalid".into()),
        }
    }

    fn app(name: &str, error: Option<&str>, children: Vec<ChildPlan>) -> AppPlan {
        AppPlan {
            namespace: "ns".into(),
            name: name.into(),
            error: error.map(Into::into),
            invalid: false,
            children,
        }
    }

    #[test]
    fn the_summary_counts_children_and_refused_appservices() {
        let plan = Plan::new(
            "sha256:a".into(),
            vec![
                app(
                    "web",
                    None,
                    vec![
                        child("Deployment", Action::Change),
                        child("Service", Action::Delete),
                    ],
                ),
                app("new", None, vec![child("Deployment", Action::Create)]),
                app("same", None, vec![child("Deployment", Action::Unchanged)]),
                app("bad", None, vec![child("Deployment", Action::Refused)]),
                app("panic", Some("guest trapped"), vec![]),
            ],
        );
        assert_eq!(
            plan.summary.line(),
            "5 AppServices: 1 to create, 1 to change, 1 to delete, 2 refused"
        );
        let text = plan.text();
        assert!(
            text.contains("- delete Service/web ns (AppService web)\n"),
            "{text}"
        );
        assert!(
            text.contains("! refused Deployment/web ns (AppService bad): invalid\n"),
            "{text}"
        );
        assert!(
            text.contains("! refused AppService ns/panic: guest trapped\n"),
            "{text}"
        );
        assert_eq!(plan.invalid(), 0);
        let mut invalid = app("odd", Some("spec.image: Required value"), vec![]);
        invalid.invalid = true;
        let invalid = Plan::new("sha256:a".into(), vec![invalid]);
        assert_eq!(invalid.invalid(), 1);
        assert!(
            invalid
                .text()
                .contains("! invalid AppService ns/odd: spec.image: Required value\n"),
            "{}",
            invalid.text()
        );
        let errors = Plan::new(
            "sha256:a".into(),
            vec![app("x", None, vec![child("Service", Action::Error)])],
        );
        assert!(errors.summary.line().ends_with(", 0 refused, 1 errors"));
        let json = serde_json::to_value(&plan).expect("a plan serializes");
        assert_eq!(json["appservices"][0]["children"][1]["action"], "delete");
        assert_eq!(json["summary"]["refused"], 2);
    }
}
