//! Guests for tests outside this crate, such as the end-to-end tests (feature `test-guests`).

/// The hostile test guest (`tests/guests/hostile`): `metadata.name` picks how it misbehaves
/// (`panic` traps, `policy-error` refuses, `loop` hits the deadline, ...).
pub fn hostile_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_HOSTILE_GUEST"))
}
