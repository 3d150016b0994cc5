//! TEMPORARY stub (replaced by the real module at merge).
#![allow(missing_docs)]
pub fn canonicalize(url: &url::Url) -> url::Url {
    let mut u = url.clone();
    u.set_fragment(None);
    u
}
pub fn canonicalize_str(input: &str) -> Result<String, url::ParseError> {
    Ok(canonicalize(&url::Url::parse(input)?).to_string())
}
