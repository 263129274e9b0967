//! Lists in messages for people: errors and warnings name a few files or functions, not hundreds.

/// At most this many items are named.
const SHOWN: usize = 8;

/// "a, b, c and 7 more"; "none" for an empty list.
pub fn some_of(items: &[impl AsRef<str>]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    let shown = items
        .iter()
        .take(SHOWN)
        .map(AsRef::as_ref)
        .collect::<Vec<&str>>()
        .join(", ");
    match items.len().saturating_sub(SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_eight_then_counts_the_rest() {
        let items: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
        assert_eq!(some_of(&items), "f0, f1, f2, f3, f4, f5, f6, f7 and 2 more");
        assert_eq!(some_of(&items[..2]), "f0, f1");
        assert_eq!(some_of(&Vec::<String>::new()), "none");
    }
}
