//! A deterministic generated site for crawl tests.
//!
//! [`Site::generate`] builds `n` pages `/p/{i}.html`; page `i` links to page
//! `i + 1` (so every page is reachable from `/` through page 0) and to seven
//! pseudo-random others, each link spelled one of [`SPELLINGS`] ways (relative,
//! `./`, `../`, absolute with the real `host:port` filled in at serve time from
//! the request, scheme-relative, with fragments, empty queries, dot segments,
//! surrounding blanks, upper-case scheme). Every page also links to
//! [`OFFSITE`], which a crawler must never fetch. The index `/` links to page 0
//! (as `p/0.html`) and to [`OFFSITE`]. Anything else is a 404.
//!
//! The same `(n, seed)` always gives the same site; serving depends only on the
//! path (the query is ignored) and the request's host.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

use super::server::{Handler, TestRequest, TestResponse};

/// The one off-site link on every page.
pub const OFFSITE: &str = "http://offsite.invalid/x";
/// Number of link spellings used (see [`spell`]).
pub const SPELLINGS: usize = 12;
/// Links per page besides [`OFFSITE`].
pub const LINKS_PER_PAGE: usize = 8;

/// A generated site: link targets per page.
#[derive(Clone, Debug)]
pub struct Site {
    links: Arc<Vec<Vec<usize>>>,
}

impl Site {
    /// `n_pages` pages (at least 1) with links drawn from `seed`.
    pub fn generate(n_pages: usize, seed: u64) -> Site {
        let n = n_pages.max(1);
        let mut state = seed;
        let links = (0..n)
            .map(|i| {
                let mut targets = vec![(i + 1) % n];
                targets.extend(
                    (1..LINKS_PER_PAGE).map(|_| (splitmix64(&mut state) % n as u64) as usize),
                );
                targets
            })
            .collect();
        Site {
            links: Arc::new(links),
        }
    }

    /// Number of pages (not counting the index).
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// The page indices page `i` links to, in document order (may repeat).
    pub fn links(&self, i: usize) -> &[usize] {
        &self.links[i]
    }

    /// Every path a correct crawl from `/` fetches: `/` and each `/p/{i}.html`.
    pub fn reachable(&self) -> BTreeSet<String> {
        std::iter::once("/".to_owned())
            .chain((0..self.len()).map(page_path))
            .collect()
    }

    /// The HTML served at `path` when addressed as `host` (`127.0.0.1:PORT`), or
    /// `None` for a path that is not on the site.
    pub fn render(&self, path: &str, host: &str) -> Option<String> {
        if path == "/" {
            return Some(format!(
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index</title></head>\n\
                 <body><h1>Index</h1><a href=\"p/0.html\">start</a> <a href=\"{OFFSITE}\">elsewhere</a></body></html>\n"
            ));
        }
        let i: usize = path
            .strip_prefix("/p/")?
            .strip_suffix(".html")?
            .parse()
            .ok()?;
        if i >= self.len() || path != page_path(i) {
            return None;
        }
        let mut html = format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Page {i}</title></head>\n<body><h1>Page {i}</h1><ul>\n"
        );
        for (k, &target) in self.links[i].iter().enumerate() {
            let href = spell(target, (i + k) % SPELLINGS, host);
            let _ = writeln!(html, "<li><a href=\"{href}\">page {target}</a></li>");
        }
        let _ = writeln!(
            html,
            "</ul><p><a href=\"{OFFSITE}\">elsewhere</a></p></body></html>"
        );
        Some(html)
    }

    /// A [`Handler`] serving this site (`text/html`), 404 elsewhere.
    pub fn handler(&self) -> Handler {
        let site = self.clone();
        Arc::new(
            move |request: &TestRequest| match site.render(request.path(), &request.host) {
                Some(html) => TestResponse::html(html),
                None => TestResponse::not_found(),
            },
        )
    }
}

/// `/p/{i}.html`.
pub fn page_path(i: usize) -> String {
    format!("/p/{i}.html")
}

/// Link to page `target` from a page under `/p/`, spelled the `way`-th way.
pub fn spell(target: usize, way: usize, host: &str) -> String {
    match way % SPELLINGS {
        0 => format!("{target}.html"),
        1 => format!("./{target}.html"),
        2 => format!("http://{host}/p/{target}.html"),
        3 => format!("../p/{target}.html"),
        4 => format!("/p/{target}.html#frag"),
        5 => format!("/p/{target}.html?"),
        6 => format!("//{host}/p/{target}.html"),
        7 => format!("/p/./{target}.html"),
        8 => format!("HTTP://{host}/p/{target}.html"),
        9 => format!("  /p/{target}.html "),
        10 => format!("/p/../p/{target}.html"),
        _ => format!("http://{host}/p/{target}.html#top"),
    }
}

/// One step of SplitMix64 (deterministic, good enough to scatter links).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use url::Url;

    /// Every href on `html`, resolved against `base` with the fragment dropped.
    fn resolved_links(base: &Url, html: &str) -> Vec<Url> {
        html.split("href=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .map(|href| {
                let mut url = base.join(href).unwrap();
                url.set_fragment(None);
                url
            })
            .collect()
    }

    #[test]
    fn generation_is_deterministic() {
        let a = Site::generate(50, 7);
        let b = Site::generate(50, 7);
        assert_eq!(a.links, b.links);
        assert_ne!(a.links, Site::generate(50, 8).links);
        assert_eq!(a.reachable().len(), 51);
    }

    #[test]
    fn every_link_resolves_on_site_and_everything_is_reachable() {
        let site = Site::generate(200, 42);
        let host = "127.0.0.1:9";
        let mut seen = BTreeSet::from(["/".to_owned()]);
        let mut queue = vec!["/".to_owned()];
        while let Some(path) = queue.pop() {
            let html = site.render(&path, host).expect("reachable path renders");
            let base = Url::parse(&format!("http://{host}{path}")).unwrap();
            for url in resolved_links(&base, &html) {
                if url.as_str() == OFFSITE {
                    continue;
                }
                assert_eq!(url.host_str(), Some("127.0.0.1"), "{url} from {path}");
                assert!(url.query().is_none_or(str::is_empty), "{url}");
                assert!(
                    site.render(url.path(), host).is_some(),
                    "{url} from {path} is not on the site"
                );
                if seen.insert(url.path().to_owned()) {
                    queue.push(url.path().to_owned());
                }
            }
        }
        assert_eq!(seen, site.reachable());
        assert!(site.render("/p/200.html", host).is_none());
        assert!(site.render("/p/01.html", host).is_none());
    }
}
