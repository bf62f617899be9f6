//! Bounded text for messages: lists cut after a number of items, the rest counted, and strings
//! cut at a byte length.

use std::fmt;

/// `s` cut to at most `max` bytes, at a character boundary.
pub fn truncate(mut s: String, max: usize) -> String {
    let cut = s.floor_char_boundary(max);
    s.truncate(cut);
    s
}

/// Displays the first `max` items joined by `; `, then `; and N more` for the rest.
pub struct Listed<'a, T> {
    /// The items, in the order shown.
    pub items: &'a [T],
    /// Items shown before the rest are counted.
    pub max: usize,
}

impl<T: fmt::Display> fmt::Display for Listed<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().take(self.max).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{item}")?;
        }
        match self.items.len().saturating_sub(self.max) {
            0 => Ok(()),
            more => write!(f, "; and {more} more"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Listed, truncate};

    #[test]
    fn truncates_at_a_character_boundary() {
        assert_eq!(truncate("abc".into(), 5), "abc");
        assert_eq!(truncate("abc".into(), 2), "ab");
        // NB: 'é' is two bytes; a cut inside it keeps the character out.
        assert_eq!(truncate("aé".into(), 2), "a");
    }

    #[test]
    fn lists_up_to_the_bound_and_counts_the_rest() {
        let shown = |items: &[u8], max| Listed { items, max }.to_string();
        assert_eq!(shown(&[], 2), "");
        assert_eq!(shown(&[1, 2], 2), "1; 2");
        assert_eq!(shown(&[1, 2, 3, 4], 2), "1; 2; and 2 more");
    }
}
