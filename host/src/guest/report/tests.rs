//! Each bound of a guest's report, one test each: a report just inside passes, just outside is
//! refused or cut.

use super::*;

fn condition(type_: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: ConditionStatus::True,
        reason: "AsExpected".into(),
        message: "fine".into(),
    }
}

fn event(reason: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: "something happened".into(),
    }
}

fn conditions(types: &[&str]) -> Result<Report, Violation> {
    check(types.iter().map(|t| condition(t)).collect(), Vec::new())
}

#[test]
fn at_most_eight_conditions() {
    let types: Vec<String> = (0..=MAX_CONDITIONS).map(|i| format!("Check{i}")).collect();
    let refs: Vec<&str> = types.iter().map(String::as_str).collect();
    assert!(conditions(&refs[..MAX_CONDITIONS]).is_ok());
    assert_eq!(
        conditions(&refs),
        Err(Violation::TooManyConditions(MAX_CONDITIONS + 1))
    );
}

#[test]
fn at_most_four_events() {
    let events: Vec<Event> = (0..=MAX_EVENTS).map(|i| event(&format!("R{i}"))).collect();
    assert!(check(Vec::new(), events[..MAX_EVENTS].to_vec()).is_ok());
    assert_eq!(
        check(Vec::new(), events),
        Err(Violation::TooManyEvents(MAX_EVENTS + 1))
    );
}

#[test]
fn condition_types_are_qualified_names_of_at_most_316() {
    // A 252-character DNS subdomain prefix: three labels of 63 and one of 60.
    let prefix = |last: usize| {
        let label = "a".repeat(63);
        format!("{label}.{label}.{label}.{}", "a".repeat(last))
    };
    let longest = format!("{}/{}", prefix(60), "B".repeat(63));
    assert_eq!(longest.len(), MAX_CONDITION_TYPE);
    for ok in [
        "ImagePinned",
        "example.com/ImagePinned",
        "a-b_c.d",
        longest.as_str(),
    ] {
        assert!(conditions(&[ok]).is_ok(), "{ok}");
    }
    let too_long = format!("{}/{}", prefix(61), "B".repeat(63));
    for bad in [
        "",
        "Image Pinned",
        "-Pinned",
        "Pinned.",
        "a/b/c",
        "/Pinned",
        "Example.com/Pinned",
        too_long.as_str(),
    ] {
        assert!(
            matches!(conditions(&[bad]), Err(Violation::ConditionType(_))),
            "{bad:?} passed"
        );
    }
}

#[test]
fn host_owned_condition_types_are_refused_in_any_case() {
    for owned in [
        "Ready",
        "ready",
        "GuestError",
        "Degraded",
        "Available",
        "apps.kudevops.io/Anything",
    ] {
        assert_eq!(
            conditions(&[owned]),
            Err(Violation::HostOwned(owned.into())),
            "{owned}"
        );
    }
    assert!(conditions(&["ReadyForTraffic", "example.io/Ready"]).is_ok());
}

#[test]
fn a_condition_type_is_returned_once() {
    assert_eq!(
        conditions(&["A", "B", "A"]),
        Err(Violation::DuplicateCondition("A".into()))
    );
}

#[test]
fn reasons_are_camel_case_within_their_length() {
    let reason = |r: &str| {
        let mut c = condition("Checked");
        c.reason = r.into();
        check(vec![c], Vec::new())
    };
    let longest = "R".repeat(MAX_CONDITION_REASON);
    for ok in ["A", "ImageNotPinned", "a_b,c:d", "Done_", longest.as_str()] {
        assert!(reason(ok).is_ok(), "{ok}");
    }
    let too_long = "R".repeat(MAX_CONDITION_REASON + 1);
    for bad in [
        "",
        "1st",
        "Not pinned",
        "Trailing:",
        "Trailing,",
        "Dash-ed",
        too_long.as_str(),
    ] {
        assert!(
            matches!(reason(bad), Err(Violation::ConditionReason { .. })),
            "{bad:?} passed"
        );
    }
    let mut long = "R".repeat(MAX_EVENT_REASON);
    assert!(check(Vec::new(), vec![event(&long)]).is_ok());
    long.push('R');
    assert!(matches!(
        check(Vec::new(), vec![event(&long)]),
        Err(Violation::EventReason(_))
    ));
    assert!(matches!(
        check(Vec::new(), vec![event("not pinned")]),
        Err(Violation::EventReason(_))
    ));
}

#[test]
fn messages_and_notes_are_cut_at_the_api_limits() {
    let mut c = condition("Checked");
    c.message = "é".repeat(MAX_CONDITION_MESSAGE);
    let mut e = event("Noted");
    e.note = "x".repeat(4096);
    let report = check(vec![c], vec![e]).expect("free text is cut, not refused");
    let message = &report.conditions[0].message;
    assert!(message.len() <= MAX_CONDITION_MESSAGE, "{}", message.len());
    assert!(message.ends_with('…'));
    let note = &report.events[0].note;
    assert!(
        note.len() <= MAX_EVENT_NOTE && note.ends_with('…'),
        "{}",
        note.len()
    );
    let mut within = condition("Checked");
    within.message = "x".repeat(MAX_CONDITION_MESSAGE);
    let report = check(vec![within], Vec::new()).expect("within bounds");
    assert_eq!(report.conditions[0].message.len(), MAX_CONDITION_MESSAGE);
}

#[test]
fn conditions_are_sorted_and_events_deduplicated() {
    let report = check(
        vec![condition("B"), condition("A")],
        vec![event("Same"), event("Other"), event("Same")],
    )
    .expect("within bounds");
    let types: Vec<&str> = report.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["A", "B"]);
    let reasons: Vec<&str> = report.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["Same", "Other"]);
}
