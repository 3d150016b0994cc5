//! Which of a page's new requests a crawl may queue, written once for both
//! loops: credentials stripped, a sitemap entry whose `lastmod` makes its
//! known page due made a revisit, a redirect to a page fetched in this cycle
//! anyway dropped, and the scope checked.
//!
//! Two of those rules need page records, which the two frontiers read in
//! their own way (the embedded state one by one, Redis in one `HMGET`), so
//! accepting is two steps: [`Accept::lookups`] names the records it needs,
//! the loop reads them, and [`Accept::apply`] decides. Depends on
//! [`super::scope`], [`crate::revisit`]'s rules and [`crate::fingerprint`].

use crate::fingerprint::{Fingerprint, fingerprint};
use crate::request::Request;
use crate::revisit::{lastmod_makes_due, lastmod_of, redirect_is_redundant};
use crate::store::PageRecord;
use crate::store::records::unix_now;

use super::parts::Counters;
use super::scope::{Scope, strip_credentials};

/// The rules a loop accepts new requests by, for one run.
pub struct Accept<'a> {
    /// The crawl's scope.
    pub scope: &'a Scope,
    /// The headers request fingerprints include (the key of a page record).
    pub fingerprint_headers: &'a [String],
    /// Unix seconds when this run started: a redirect to a page fetched
    /// since is not followed again.
    pub run_started: u64,
}

/// The page records [`Accept::apply`] needs: the place of each request that
/// needs one, and its fingerprint, in request order.
pub type Lookups = Vec<(usize, Fingerprint)>;

impl Accept<'_> {
    /// Step one: strips credentials from every request (counting them) and
    /// names the requests whose page record decides whether they are queued:
    /// a sitemap entry with a `lastmod` that would otherwise be deduplicated,
    /// and, in the requests of a redirect (`redirect`), a follow that bypasses
    /// the seen set. Empty, and free, when there are none.
    pub fn lookups(
        &self,
        requests: &mut [Request],
        redirect: bool,
        counters: &mut Counters,
    ) -> Lookups {
        let mut lookups = Vec::new();
        for (place, request) in requests.iter_mut().enumerate() {
            strip_credentials(request, counters);
            let lastmod = !request.dont_filter && lastmod_of(&request.meta).is_some();
            if lastmod || (redirect && request.dont_filter) {
                lookups.push((place, fingerprint(request, self.fingerprint_headers)));
            }
        }
        lookups
    }

    /// Step two, with the page records of `lookups` (`records[k]` is the
    /// record of `lookups[k]`): keeps, in place, the requests the crawl may
    /// queue, and counts what it drops. A sitemap entry whose `lastmod` is no
    /// older than its known page's last fetch is made a revisit
    /// (`dont_filter`), unless the page is fetched in this cycle anyway (see
    /// [`crate::revisit::lastmod_makes_due`]); a redirect's follow to a page
    /// fetched in this cycle anyway is dropped (see
    /// [`crate::revisit::redirect_is_redundant`]); then the scope decides.
    pub fn apply(
        &self,
        requests: &mut Vec<Request>,
        redirect: bool,
        lookups: &Lookups,
        records: &[Option<PageRecord>],
        counters: &mut Counters,
    ) {
        debug_assert_eq!(lookups.len(), records.len());
        let now = unix_now();
        let mut place = 0;
        let mut next = lookups.iter().zip(records).peekable();
        requests.retain_mut(|request| {
            let here = place;
            place += 1;
            let record = match next.peek() {
                Some(((at, _), record)) if *at == here => {
                    let record = record.as_ref();
                    next.next();
                    Some(record)
                }
                _ => None,
            };
            if let Some(record) = record {
                let redundant = redirect_is_redundant(record, now, self.run_started);
                if !request.dont_filter && lastmod_makes_due(record, request) && !redundant {
                    // Queued past the seen set, as a revisit.
                    request.dont_filter = true;
                    counters.push(("sitemap/lastmod_due", 1));
                }
                if redirect && request.dont_filter && redundant {
                    counters.push(("redirect/already_queued", 1));
                    return false;
                }
            }
            match self.scope.check(request) {
                Ok(()) => true,
                Err(rejected) => {
                    counters.push((rejected.counter(), 1));
                    false
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record of one fetch of a page at `last_fetched`, due at `next_due`.
    fn record(last_fetched: u64, next_due: Option<u64>) -> PageRecord {
        let schedule = crate::revisit::Schedule::new(&crate::config::CrawlConfig::default())
            .expect("the default revisit policy");
        let request = Request::get("http://a.example/p".to_owned());
        let seen = crate::revisit::Observation {
            status: 200,
            final_url: request.url.clone(),
            etag: None,
            last_modified: None,
            content_hash: "0".repeat(40),
            fetched_at: last_fetched,
            error: false,
            fresh_for: None,
        };
        let (mut record, _) = schedule.record(None, &request, &seen, last_fetched);
        record.next_due = next_due;
        record
    }

    fn accept(scope: &Scope) -> Accept<'_> {
        Accept {
            scope,
            fingerprint_headers: &[],
            run_started: 1_000,
        }
    }

    #[test]
    fn plain_links_need_no_record_and_pass_the_scope() {
        let scope = Scope::new(["a.example".to_owned()], None);
        let mut requests = vec![
            Request::get("http://user:pw@a.example/x".to_owned()),
            Request::get("http://b.example/y".to_owned()),
        ];
        let mut counters = Vec::new();
        let lookups = accept(&scope).lookups(&mut requests, false, &mut counters);
        assert!(lookups.is_empty());
        accept(&scope).apply(&mut requests, false, &lookups, &[], &mut counters);
        let urls: Vec<&str> = requests.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["http://a.example/x"]);
        assert!(counters.iter().any(|(name, _)| name.starts_with("scope/")));
    }

    #[test]
    fn a_redirect_to_a_page_fetched_this_run_is_dropped() {
        let scope = Scope::new(["a.example".to_owned()], None);
        let mut follow = Request::get("http://a.example/moved".to_owned());
        follow.dont_filter = true;
        let mut other = Request::get("http://a.example/fresh".to_owned());
        other.dont_filter = true;
        let mut requests = vec![follow, other];
        let mut counters = Vec::new();
        let rules = accept(&scope);
        let lookups = rules.lookups(&mut requests, true, &mut counters);
        assert_eq!(lookups.iter().map(|l| l.0).collect::<Vec<_>>(), [0, 1]);
        // The first was fetched after the run started; the second long ago
        // and not due: a hub behind a redirect is looked at again.
        let records = [Some(record(2_000, None)), Some(record(10, Some(u64::MAX)))];
        rules.apply(&mut requests, true, &lookups, &records, &mut counters);
        let urls: Vec<&str> = requests.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["http://a.example/fresh"]);
        assert!(counters.contains(&("redirect/already_queued", 1)));
    }

    #[test]
    fn a_newer_lastmod_makes_a_known_page_a_revisit() {
        let scope = Scope::new(["a.example".to_owned()], None);
        let mut entry = Request::get("http://a.example/p".to_owned());
        entry
            .meta
            .insert(crate::legs::LASTMOD_META.to_owned(), "500".to_owned());
        let mut unknown = entry.clone();
        unknown.url = "http://a.example/q".to_owned();
        let mut requests = vec![entry, unknown];
        let mut counters = Vec::new();
        let rules = accept(&scope);
        let lookups = rules.lookups(&mut requests, false, &mut counters);
        assert_eq!(lookups.len(), 2);
        rules.apply(
            &mut requests,
            false,
            &lookups,
            &[Some(record(400, Some(u64::MAX))), None],
            &mut counters,
        );
        assert_eq!(requests.len(), 2);
        assert!(requests[0].dont_filter, "lastmod 500 after a fetch at 400");
        assert!(!requests[1].dont_filter, "an unknown page is a plain link");
        assert_eq!(counters, [("sitemap/lastmod_due", 1)]);
    }
}
