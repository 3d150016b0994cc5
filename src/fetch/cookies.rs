//! The cookie jar: `Set-Cookie` kept and `Cookie` sent by RFC 6265's rules.
//!
//! [`CookieJar`] wraps the `cookie_store` crate (domain, path, `Secure`,
//! `Max-Age`/`Expires`; no public-suffix list, so a cookie for a public suffix
//! is not refused). The fetcher stores the cookies of every answer under the
//! URL that answered and sends the matching ones with every request, robots.txt
//! included. Session cookies (without an expiry) are kept across runs like
//! wget's `--keep-session-cookies`: the engine saves the jar in the state
//! ([`CookieJar::take_changed`]) and loads it at run start ([`CookieJar::load`]).
//! Cookie values are never logged: the jar's `Debug` shows a count.
//!
//! Depends on `cookie_store`, `serde_json` and `url` only.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cookie_store::CookieStore;
use http::{HeaderMap, HeaderValue};
use url::Url;

/// A shared cookie jar; clones share it.
#[derive(Clone, Default)]
pub struct CookieJar {
    store: Arc<Mutex<CookieStore>>,
    /// Set when a cookie was stored since the last [`CookieJar::take_changed`].
    changed: Arc<AtomicBool>,
}

impl fmt::Debug for CookieJar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.lock().iter_unexpired().count();
        write!(f, "CookieJar({count} cookies)")
    }
}

impl CookieJar {
    /// An empty jar.
    pub fn new() -> CookieJar {
        CookieJar::default()
    }

    fn lock(&self) -> MutexGuard<'_, CookieStore> {
        // A panic while holding the lock leaves a usable store.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the jar with `saved` (what [`CookieJar::take_changed`] gave);
    /// an error says why it cannot be read.
    pub fn load(&self, saved: &[u8]) -> Result<(), String> {
        let store = cookie_store::serde::json::load_all(saved).map_err(|e| e.to_string())?;
        *self.lock() = store;
        Ok(())
    }

    /// The jar as JSON when a cookie was stored since the last call.
    pub fn take_changed(&self) -> Option<Vec<u8>> {
        if !self.changed.swap(false, Ordering::AcqRel) {
            return None;
        }
        let mut out = Vec::new();
        let store = self.lock();
        match cookie_store::serde::json::save_incl_expired_and_nonpersistent(&store, &mut out) {
            Ok(()) => Some(out),
            Err(_) => None,
        }
    }

    /// Every cookie of the jar, expired ones too (a server's deletion), as
    /// (key, JSON) when a cookie was stored since the last call: the key
    /// (domain, path and name, tab-separated) names the cookie in a shared
    /// crawl's Redis hash, where each worker's cookies replace those of their
    /// keys (see [`crate::shared`]).
    pub fn take_changed_cookies(&self) -> Option<Vec<(String, String)>> {
        if !self.changed.swap(false, Ordering::AcqRel) {
            return None;
        }
        let store = self.lock();
        let cookies = store
            .iter_any()
            .filter_map(|cookie| {
                let json = serde_json::to_string(cookie).ok()?;
                let (domain, path) = (String::from(&cookie.domain), String::from(&cookie.path));
                Some((format!("{domain}\t{path}\t{}", cookie.name()), json))
            })
            .collect();
        Some(cookies)
    }

    /// Replaces the jar with `cookies`, JSON values of
    /// [`CookieJar::take_changed_cookies`]; an error says why one cannot be read.
    pub fn load_cookies(&self, cookies: &[Vec<u8>]) -> Result<(), String> {
        let store = CookieStore::from_cookies(
            cookies
                .iter()
                .map(|json| serde_json::from_slice::<cookie_store::Cookie<'static>>(json)),
            true,
        )
        .map_err(|e| e.to_string())?;
        *self.lock() = store;
        Ok(())
    }

    /// The `Cookie` header for a request to `url`, if any cookie matches.
    pub fn header_for(&self, url: &Url) -> Option<HeaderValue> {
        let store = self.lock();
        let pairs: Vec<String> = store
            .get_request_values(url)
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        if pairs.is_empty() {
            return None;
        }
        let mut value = HeaderValue::from_str(&pairs.join("; ")).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// Stores the `Set-Cookie` headers of an answer from `url`.
    pub fn store_from(&self, url: &Url, headers: &HeaderMap) {
        let mut set = headers
            .get_all(http::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .peekable();
        if set.peek().is_none() {
            return;
        }
        let mut store = self.lock();
        for cookie in set {
            // A cookie the rules refuse (another domain, bad syntax) is dropped.
            let _ = store.parse(cookie, url);
        }
        self.changed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cookies: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for cookie in cookies {
            headers.append(http::header::SET_COOKIE, cookie.parse().unwrap());
        }
        headers
    }

    #[test]
    fn cookies_follow_domain_path_and_secure_and_survive_a_save() {
        let jar = CookieJar::new();
        let url = Url::parse("http://a.example/login").unwrap();
        jar.store_from(
            &url,
            &set(&[
                "session=s1; Path=/",
                "tls=t; Secure",
                "other=o; Domain=b.example",
            ]),
        );
        let header = |u: &str| jar.header_for(&Url::parse(u).unwrap());
        assert_eq!(header("http://a.example/x").unwrap(), "session=s1");
        assert!(header("http://b.example/x").is_none());
        assert!(header("https://a.example/x").is_some());
        let saved = jar.take_changed().expect("changed");
        assert!(jar.take_changed().is_none());
        let again = CookieJar::new();
        again.load(&saved).expect("loads");
        assert_eq!(
            again
                .header_for(&Url::parse("http://a.example/").unwrap())
                .unwrap(),
            "session=s1"
        );
        assert!(format!("{again:?}").contains("cookies") && !format!("{again:?}").contains("s1"));
    }
}
