//! Guests for tests outside this crate, such as the end-to-end tests (feature `test-guests`).

/// The hostile test guest (`tests/guests/hostile`): `metadata.name` picks how it misbehaves
/// (`panic` traps, `policy-error` refuses, `loop` hits the deadline, ...).
pub fn hostile_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_HOSTILE_GUEST"))
}

/// The example guest `examples/guests/tiered`: the default mapping plus a tier label and
/// resource requests.
pub fn tiered_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_TIERED_GUEST"))
}

/// The example guest `examples/guests/conditions`, on contract 0.2.0: the objects plus an
/// `ImagePinned` condition and, for an image not pinned by digest, an `ImageNotPinned` Event.
pub fn conditions_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_CONDITIONS_GUEST"))
}
