//! Requests for calling the shared crawl's scripts directly
//! (`legcrawl::shared::Shared`), without a worker process.

use std::time::Duration;

use legcrawl::request::Request;
use legcrawl::shared::client::NewRequest;

/// A GET of `url` to queue, its host taken from the URL, due `delay` after
/// its host's last start.
pub fn request(url: &str, delay: Duration) -> NewRequest {
    let request = Request::get(url);
    NewRequest {
        host: url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        fingerprint: legcrawl::fingerprint::fingerprint(&request, &[]),
        request,
        delay,
    }
}

/// A seed: [`request`] with no delay that bypasses the seen set
/// (`dont_filter`).
pub fn seed(url: &str) -> NewRequest {
    let mut seed = request(url, Duration::ZERO);
    seed.request.dont_filter = true;
    seed
}
