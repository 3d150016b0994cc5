//! Benchmarks of request fingerprints and URL canonicalization on a typical link: an
//! 80-byte https URL with a three-argument query that is not yet in key order, so the
//! canonicalizer has to rewrite it.
//!
//! Run: `cargo bench --bench fingerprint -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use legcrawl::{canon, fingerprint, request::Request};
use url::Url;

/// 80 bytes; the query needs sorting.
const LINK: &str =
    "https://www.example.com/catalog/books/item-12345.html?sort=price&page=2&ref=home";
/// The same link already canonical: the fast path without a re-parse.
const CANONICAL: &str =
    "https://www.example.com/catalog/books/item-12345.html?page=2&ref=home&sort=price";

fn benches(c: &mut Criterion) {
    let request = Request::get(LINK);
    c.bench_function("fingerprint/80B_3_args", |b| {
        b.iter(|| fingerprint::fingerprint(black_box(&request), &[]))
    });
    c.bench_function("canonicalize_str/80B_3_args", |b| {
        b.iter(|| canon::canonicalize_str(black_box(LINK)))
    });
    let parsed = Url::parse(LINK).expect("valid bench URL");
    c.bench_function("canonicalize/80B_3_args_unsorted", |b| {
        b.iter(|| canon::canonicalize(black_box(&parsed)))
    });
    let canonical = Url::parse(CANONICAL).expect("valid bench URL");
    c.bench_function("canonicalize/80B_3_args_already_canonical", |b| {
        b.iter(|| canon::canonicalize(black_box(&canonical)))
    });
    c.bench_function("baseline/url_parse_80B", |b| {
        b.iter(|| Url::parse(black_box(LINK)))
    });
}

criterion_group!(fingerprint_benches, benches);
criterion_main!(fingerprint_benches);
