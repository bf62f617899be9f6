//! Contract versions side by side in one runtime: 0.1.0 guests (the default one) render as
//! before with nothing to report, and a 0.2.0 guest (`examples/guests/conditions`) reports its
//! condition and Event, within the host's bounds.

use std::sync::LazyLock;

mod common;

use app_operator::crd::{AppService, AppServiceSpec};
use app_operator::guest::{self, ConditionStatus, EventType, report};
use common::{example_guest, guests_dir};

const TIERED: &[u8] = include_bytes!(env!("APP_OPERATOR_TIERED_GUEST"));
const CONDITIONS: &[u8] = include_bytes!(env!("APP_OPERATOR_CONDITIONS_GUEST"));

static RUNTIME: LazyLock<guest::Runtime> = LazyLock::new(|| {
    let config = guest::Config {
        cache_dir: Some(guests_dir().join("precompiled")),
        ..guest::Config::default()
    };
    guest::Runtime::new(config).expect("the config is valid")
});

fn app(image: &str) -> AppService {
    let mut app = AppService::new(
        "web",
        AppServiceSpec {
            replicas: Some(2),
            image: image.into(),
            ports: vec![],
        },
    );
    app.metadata.namespace = Some("shop".into());
    app
}

#[tokio::test(flavor = "multi_thread")]
async fn a_0_1_0_guest_renders_as_before_and_reports_nothing() {
    for wasm in [guest::default_guest(), TIERED] {
        let policy = RUNTIME.load(wasm).await.expect("the 0.1.0 guest loads");
        assert_eq!(
            policy.inspect().world.as_deref(),
            Some("kudevops:appservice/appservice-policy@0.1.0")
        );
        let objects = policy
            .render(&app("nginx:1.27"), None)
            .await
            .expect("renders");
        let rendering = policy
            .render_reported(&app("nginx:1.27"), None)
            .await
            .expect("renders");
        assert_eq!(rendering.objects, objects);
        assert_eq!(rendering.report, guest::Report::default());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_0_2_0_guest_reports_a_condition_and_an_event() {
    let policy = RUNTIME
        .load(CONDITIONS)
        .await
        .expect("the 0.2.0 guest loads");
    assert_eq!(
        policy.inspect().world.as_deref(),
        Some("kudevops:appservice/appservice-policy@0.2.0")
    );
    let rendering = policy
        .render_reported(&app("nginx:1.27"), None)
        .await
        .expect("renders");
    assert_eq!(
        rendering.objects.len(),
        1,
        "a Deployment (no ports, no Service)"
    );
    assert_eq!(rendering.objects[0].kind, "Deployment");
    let [condition] = rendering.report.conditions.as_slice() else {
        panic!("one condition: {:?}", rendering.report);
    };
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status,
            condition.reason.as_str()
        ),
        ("ImagePinned", ConditionStatus::False, "NotPinned")
    );
    let [event] = rendering.report.events.as_slice() else {
        panic!("one Event: {:?}", rendering.report);
    };
    assert_eq!(
        (event.type_, event.reason.as_str()),
        (EventType::Warning, "ImageNotPinned")
    );
    // What `render` prints on stderr for it.
    let lines = app_operator::cli::render::report_lines(&rendering.report);
    assert!(
        lines[0].starts_with("# condition ImagePinned=False NotPinned: ")
            && lines[1].starts_with("# event Warning ImageNotPinned: ")
            && lines.len() == 2,
        "{lines:?}"
    );

    let pinned = format!("nginx@sha256:{}", "a".repeat(64));
    let rendering = policy
        .render_reported(&app(&pinned), None)
        .await
        .expect("renders");
    assert_eq!(rendering.report.conditions[0].status, ConditionStatus::True);
    assert!(rendering.report.events.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_and_javascript_0_2_0_guests_report_like_the_rust_one() {
    let rust = RUNTIME
        .load(CONDITIONS)
        .await
        .expect("the Rust 0.2.0 guest loads");
    let expected = rust
        .render_reported(&app("nginx:1.27"), None)
        .await
        .expect("renders")
        .report;
    for name in ["python-conditions", "javascript-conditions"] {
        let policy = RUNTIME
            .load(example_guest(name))
            .await
            .expect("the guest loads");
        assert_eq!(
            policy.inspect().world.as_deref(),
            Some("kudevops:appservice/appservice-policy@0.2.0"),
            "{name}"
        );
        let rendering = policy
            .render_reported(&app("nginx:1.27"), None)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(rendering.report, expected, "{name}");
        assert_eq!(rendering.objects[0].kind, "Deployment", "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_0_2_0_guests_free_text_is_cut_in_the_render_path() {
    // The guest puts the image in its condition message and Event note.
    let image = format!("registry.example/{}:1", "x".repeat(40_000));
    let policy = RUNTIME
        .load(CONDITIONS)
        .await
        .expect("the 0.2.0 guest loads");
    let rendering = policy
        .render_reported(&app(&image), None)
        .await
        .expect("renders");
    let message = &rendering.report.conditions[0].message;
    assert!(
        message.len() <= report::MAX_CONDITION_MESSAGE && message.ends_with('…'),
        "{} bytes",
        message.len()
    );
    let note = &rendering.report.events[0].note;
    assert!(note.len() <= report::MAX_EVENT_NOTE && note.ends_with('…'));
}
