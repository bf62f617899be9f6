//! The object name formats the host checks a guest's output against: DNS-1123 subdomains and
//! labels, and DNS-1035 labels (Service names).

/// A DNS-1123 subdomain: at most 253 characters of dot-separated DNS-1123 labels.
pub(super) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// A DNS-1123 label: 1 to 63 lowercase letters, digits or `-`, alphanumeric at both ends.
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&b.len())
        && b.iter().all(|c| alnum(c) || *c == b'-')
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
}

/// A DNS-1035 label: a DNS-1123 label that starts with a letter (Service names).
pub(super) fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(is_dns1035_label("web-1"));
        assert!(!is_dns1035_label("1web"));
        assert!(!is_dns1035_label(&"a".repeat(64)));
    }
}
