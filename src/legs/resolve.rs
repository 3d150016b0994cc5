//! Resolving plain links against a plain base without the URL parser.
//!
//! Most links on a page are relative paths (`p/2.html`, `../a/`, `/b?page=3`) against
//! a base that [`canon::split`] can read. For those, [`join`] builds the result by
//! string operations: the base's scheme, host and port, then the merged path with
//! `.` and `..` segments removed as the URL standard does, then the link's query.
//! An absolute `http://` or `https://` link in that subset (once its fragment is cut
//! off) is its own result.
//! It gives up (`None`, the caller uses `Url::join`) on anything else: a `:` in the
//! link's or the base's path (a scheme, or a segment like a drive letter), a scheme-relative `//host` link, a
//! path or query with a byte outside the subset of [`canon::split`] (whitespace, which
//! the parser trims or drops, backslashes, non-ASCII, `%2e` and other bytes the parser
//! rewrites; the fragment, which is dropped, may hold anything). The result is then
//! itself in that subset.
//! The result equals `base.join(link)` with the fragment removed, byte for byte
//! (property-tested against the `url` crate in `resolve_tests.rs`). Depends on
//! [`crate::canon::split`] only.

use crate::canon::split::{self as canon, Parts};

/// `base` joined with `href`, fragment dropped, and the result's host, when both are
/// plain (see module doc).
pub(super) fn join<'a>(base: &Parts<'a>, href: &'a str) -> Option<(String, &'a str)> {
    let before_fragment = &href[..canon::find(href.as_bytes(), b'#').unwrap_or(href.len())];
    if before_fragment.starts_with("http://") || before_fragment.starts_with("https://") {
        // An absolute link: the base plays no part, and a URL in the subset of
        // `canon::split` is its own serialization (the fragment is parsed last, so
        // cutting it off first changes nothing before it).
        let parts = canon::split(before_fragment)?;
        return Some((before_fragment.to_owned(), parts.host));
    }
    let (path, query) = match canon::find(before_fragment.as_bytes(), b'?') {
        Some(q) => (&before_fragment[..q], Some(&before_fragment[q + 1..])),
        None => (before_fragment, None),
    };
    let plain = canon::is_plain_path_text(path) && query.is_none_or(canon::is_plain_query);
    // A `:` may start a scheme, and the parser will not pop a `..` segment over a
    // segment that looks like a Windows drive letter (`c:`).
    let colon = |path: &str| canon::find(path.as_bytes(), b':').is_some();
    let colon = colon(path) || colon(base.path);
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
    // Base and link were plain and every dot segment is resolved, so the result is in
    // the subset too (the tests check it).
    Some((out, base.host))
}

/// Appends the path of `href_path` resolved against `base_path` (both non-empty,
/// `base_path` starting with `/`). What `out` holds past its length on entry is the
/// list of segments, each written `/segment`, so popping one cuts at the last `/`.
fn merge(out: &mut String, base_path: &str, href_path: &str) {
    let root = out.len();
    let relative = match href_path.strip_prefix('/') {
        Some(absolute) => absolute,
        None => {
            // The base's segments without its last one (its file name, replaced).
            let dir = base_path.rfind('/').unwrap_or(0);
            out.push_str(&base_path[..dir]);
            href_path
        }
    };
    let mut pieces = relative.split(is_slash).peekable();
    while let Some(segment) = pieces.next() {
        let last = pieces.peek().is_none();
        match segment {
            ".." => {
                let popped = out[root..].rfind('/').map_or(root, |slash| root + slash);
                out.truncate(popped);
                if last {
                    out.push('/');
                }
            }
            "." if last => out.push('/'),
            "." => {}
            _ => {
                out.push('/');
                out.push_str(segment);
            }
        }
    }
}

/// `str::split` with a closure scans chars in place; with a `char` it calls `memchr`
/// and `memcmp` per piece, which costs more on strings this short.
fn is_slash(c: char) -> bool {
    c == '/'
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
