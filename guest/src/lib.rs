//! Placeholder: the default guest (issue 2).
