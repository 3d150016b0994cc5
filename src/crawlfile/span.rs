//! Byte spans of the parsed document → `line:column` and dotted key paths.
//!
//! toml's errors carry byte ranges into the file; this module turns them into what a
//! person reads: a 1-based line and column (columns count characters) and the path of
//! the key at that place (`limits.timeout`, `legs[2].rules[0].pattern`). Depends only
//! on `toml`'s spanned document tree.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One key or array element of the document, with where it is written.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Dotted path (`legs[1].allow[0]`).
    pub path: String,
    /// The key's span (the element's own span for array elements).
    pub key: Range<usize>,
    /// The value's span.
    pub value: Range<usize>,
    /// The value, when it is a string.
    pub text: Option<String>,
}

/// Every key and array element of `root`, depth-first in document order.
pub fn entries(root: &DeTable<'_>) -> Vec<Entry> {
    let mut out = Vec::new();
    walk_table(root, "", &mut out);
    out
}

fn walk_table(table: &DeTable<'_>, prefix: &str, out: &mut Vec<Entry>) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        walk_value(value, path, key.span(), out);
    }
}

fn walk_value(value: &Spanned<DeValue<'_>>, path: String, key: Range<usize>, out: &mut Vec<Entry>) {
    out.push(Entry {
        path: path.clone(),
        key,
        value: value.span(),
        text: value.get_ref().as_str().map(str::to_owned),
    });
    match value.get_ref() {
        DeValue::Table(table) => walk_table(table, &path, out),
        DeValue::Array(array) => {
            for (i, element) in array.into_iter().enumerate() {
                walk_value(element, format!("{path}[{i}]"), element.span(), out);
            }
        }
        _ => {}
    }
}

/// The path of the innermost entry whose key or value contains `at` (byte offset); on
/// equal spans the deeper entry (later in `entries`) wins.
pub fn key_at(entries: &[Entry], at: usize) -> Option<&str> {
    entries
        .iter()
        .rev()
        .flat_map(|entry| [(entry, &entry.key), (entry, &entry.value)])
        .filter(|(_, span)| span.start <= at && at < span.end.max(span.start + 1))
        .min_by_key(|(_, span)| span.end - span.start)
        .map(|(entry, _)| entry.path.as_str())
}

/// 1-based line and column (in characters) of byte offset `at` in `text`.
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        assert_eq!(line_column(text, 10), (2, 4), "é is one column");
        assert_eq!(line_column(text, 999), (3, 1));
    }

    #[test]
    fn innermost_key_wins() {
        let text =
            "[limits]\ntimeout = \"x\"\n[[legs]]\nkind = \"links\"\nallow = [\"a\", \"(\"]\n";
        let root = DeTable::parse(text).unwrap();
        let all = entries(root.get_ref());
        let at = |needle: &str| text.find(needle).unwrap();
        assert_eq!(key_at(&all, at("timeout")), Some("limits.timeout"));
        assert_eq!(key_at(&all, at("\"x\"")), Some("limits.timeout"));
        assert_eq!(key_at(&all, at("\"(\"")), Some("legs[0].allow[1]"));
        assert_eq!(key_at(&all, at("kind")), Some("legs[0].kind"));
    }
}
