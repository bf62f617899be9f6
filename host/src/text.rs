//! Bounded text for messages: lists cut after a number of items, the rest counted, and strings
//! cut at a byte length, with or without a `…` marking the cut.

use std::fmt;

/// `s` cut to at most `max` bytes, at a character boundary.
pub fn truncate(mut s: String, max: usize) -> String {
    let cut = s.floor_char_boundary(max);
    s.truncate(cut);
    s
}

/// What marks a cut in [`truncate_marked`] and [`truncate_then_mark`].
pub const MARK: char = '…';

/// `s` cut to at most `max` bytes, the marker included: when `s` is longer, it is cut at a
/// character boundary to leave room for [`MARK`], which ends it. A `max` too small for the
/// marker cuts without it.
pub fn truncate_marked(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    match max.checked_sub(MARK.len_utf8()) {
        Some(room) => {
            let mut s = truncate(s, room);
            s.push(MARK);
            s
        }
        None => truncate(s, max),
    }
}

/// `s` cut to at most `max` bytes at a character boundary, then [`MARK`] appended if anything
/// was cut: the result may exceed `max` by the marker's 3 bytes.
pub fn truncate_then_mark(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut s = truncate(s, max);
    s.push(MARK);
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
    use super::{Listed, MARK, truncate, truncate_marked, truncate_then_mark};

    #[test]
    fn truncates_at_a_character_boundary() {
        assert_eq!(truncate("abc".into(), 5), "abc");
        assert_eq!(truncate("abc".into(), 2), "ab");
        // NB: 'é' is two bytes; a cut inside it keeps the character out.
        assert_eq!(truncate("aé".into(), 2), "a");
    }

    #[test]
    fn marks_the_cut_within_the_bound() {
        assert_eq!(truncate_marked("abcdef".into(), 6), "abcdef");
        assert_eq!(truncate_marked("abcdefg".into(), 6), "abc…");
        assert_eq!(truncate_marked("abcdefg".into(), 6).len(), 6);
        // NB: 'é' is two bytes; the room before the marker (2 bytes) ends inside it.
        assert_eq!(truncate_marked("aébcdef".into(), 5), "a…");
        assert_eq!(truncate_marked("abc".into(), 2), "ab");
        assert_eq!(truncate_marked("abcd".into(), 3), "…");
    }

    #[test]
    fn marks_the_cut_past_the_bound() {
        assert_eq!(truncate_then_mark("abc".into(), 3), "abc");
        assert_eq!(truncate_then_mark("abcd".into(), 3), "abc…");
        assert_eq!(
            truncate_then_mark("abcd".into(), 3).len(),
            3 + MARK.len_utf8()
        );
        assert_eq!(truncate_then_mark("aé".into(), 2), "a…");
        assert_eq!(truncate_then_mark("a".into(), 0), "…");
    }

    #[test]
    fn lists_up_to_the_bound_and_counts_the_rest() {
        let shown = |items: &[u8], max| Listed { items, max }.to_string();
        assert_eq!(shown(&[], 2), "");
        assert_eq!(shown(&[1, 2], 2), "1; 2");
        assert_eq!(shown(&[1, 2, 3, 4], 2), "1; 2; and 2 more");
    }
}
