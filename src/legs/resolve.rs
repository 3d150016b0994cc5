//! Resolving plain links against a plain base without the URL parser.
//!
//! Most links on a page are relative paths (`p/2.html`, `../a/`, `/b?page=3`) against
//! a base that [`canon::split`] can read. For those, [`join`] builds the result by
//! string operations: the base's scheme, host and port, then the merged path with
//! `.` and `..` segments removed as the URL standard does, then the link's query.
//! It gives up (`None`, the caller uses `Url::join`) on anything else: a `:` in the
//! link's or the base's path (a scheme, or a segment like a drive letter), a scheme-relative `//host` link, a
//! path or query with a byte outside the subset of [`canon::split`] (whitespace, which
//! the parser trims or drops, backslashes, non-ASCII, `%2e` and other bytes the parser
//! rewrites; the fragment, which is dropped, may hold anything), and any result that
//! is not itself in that subset.
//! The result equals `base.join(link)` with the fragment removed, byte for byte
//! (property-tested against the `url` crate in `resolve_tests.rs`). Depends on
//! [`crate::canon::split`] only.

use crate::canon::split::{self as canon, Parts};

/// `base` joined with `href`, fragment dropped, when both are plain (see module doc).
pub(super) fn join(base: &Parts<'_>, href: &str) -> Option<String> {
    let before_fragment = href.split('#').next().unwrap_or_default();
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };
    let plain = canon::is_plain_path_text(path) && query.is_none_or(canon::is_plain_query);
    // A `:` may start a scheme, and the parser will not pop a `..` segment over a
    // segment that looks like a Windows drive letter (`c:`).
    let colon = path.contains(':') || base.path.contains(':');
    if !plain || colon || path.starts_with("//") {
        return None;
    }
    let text = base.text;
    let mut out = String::with_capacity(base.path_start + base.path.len() + href.len());
    out.push_str(&text[..base.path_start]);
    if path.is_empty() {
        out.push_str(base.path);
        match (query, base.query) {
            (Some(query), _) | (None, Some(query)) => {
                out.push('?');
                out.push_str(query);
            }
            (None, None) => {}
        }
    } else {
        merge(&mut out, base.path, path);
        if let Some(query) = query {
            out.push('?');
            out.push_str(query);
        }
    }
    canon::split(&out).is_some().then_some(out)
}

/// Appends the path of `href_path` resolved against `base_path` (both non-empty,
/// `base_path` starting with `/`).
fn merge(out: &mut String, base_path: &str, href_path: &str) {
    let (mut segments, relative): (Vec<&str>, &str) = match href_path.strip_prefix('/') {
        Some(absolute) => (Vec::new(), absolute),
        None => {
            let mut base: Vec<&str> = base_path[1..].split('/').collect();
            // The base's last segment (its file name) is replaced.
            base.pop();
            (base, href_path)
        }
    };
    let mut pieces = relative.split('/').peekable();
    while let Some(segment) = pieces.next() {
        let last = pieces.peek().is_none();
        match segment {
            ".." => {
                segments.pop();
                if last {
                    segments.push("");
                }
            }
            "." if last => segments.push(""),
            "." => {}
            _ => segments.push(segment),
        }
    }
    for segment in segments {
        out.push('/');
        out.push_str(segment);
    }
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
