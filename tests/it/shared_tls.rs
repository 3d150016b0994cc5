//! Issue 25, TLS: `rediss://` works, through rustls, with the server's CA
//! given by `--shared-cacert FILE`. Before, `rediss://` was accepted but the
//! redis crate was built without TLS.
//!
//! Against a real `redis-server` speaking TLS only (`--port 0 --tls-port P`,
//! `support::redis`) with a CA and a server certificate the test makes
//! (`support::tls`): a worker and `dump --shared` given the CA crawl the site
//! exactly; a worker given another CA, or none (the system's roots do not
//! know the test's CA), is one line and exit 1 and writes nothing; a CA file
//! that cannot be read, or given with a `redis://` URL, is one line and exit 2.
//! With mutual TLS (`--tls-auth-clients yes`), the client certificate of
//! `--shared-cert`/`--shared-key` is what lets a worker in. A certificate for
//! another name, and a scheme the port does not speak, are each one clear
//! line.

use std::time::{Duration, Instant};

use crate::support::cli::{one_line, parse_lines, run};
use crate::support::hosts::{self, MultiSite, args, item_key};
use crate::support::redis::RedisServer;
use crate::support::tls::Pki;
use crate::support::workers::{Crawl, assert_fetched_once, serial};
use crate::support::{assert_each_once, strs};

/// Longest any one run may take.
const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn rediss_with_the_servers_ca_crawls_and_another_ca_is_one_line() {
    let _serial = serial();
    let pki = Pki::make();
    let Some(redis) = RedisServer::start_tls(
        "shared_tls",
        &pki.server_cert(),
        &pki.server_key(),
        &pki.ca(),
    ) else {
        return;
    };
    assert!(redis.url().starts_with("rediss://"), "{}", redis.url());
    let site = MultiSite::start(60, 2, 13, hosts::no_delay());
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);
    let ca = pki.ca().to_str().expect("utf-8 path").to_owned();
    let other = pki.other_ca().to_str().expect("utf-8 path").to_owned();
    let mut crawl = Crawl::new(&redis.url(), "tls");

    // Another CA, or the system's roots: refused before anything is written.
    let out = run(
        crawl.crawl_command(&[argv.as_slice(), &["--shared-cacert", &other]].concat()),
        LIMIT,
    );
    let err = one_line("another CA", &out, 1);
    assert!(err.contains("rediss://127.0.0.1"), "{err}");
    assert!(
        err.contains("certificate") && err.contains("--shared-cacert"),
        "{err}"
    );
    let err = one_line("no CA", &run(crawl.crawl_command(&argv), LIMIT), 1);
    assert!(err.contains("rediss://127.0.0.1"), "{err}");
    let err = one_line("dump with no CA", &crawl.dump_output(&["summary"]), 1);
    assert!(err.contains("rediss://127.0.0.1"), "{err}");

    // A CA file that is not there, or one given for a plain redis:// URL.
    let missing = pki.dir().join("missing.pem");
    let missing = missing.to_str().expect("utf-8 path");
    let out = run(
        crawl.crawl_command(&[argv.as_slice(), &["--shared-cacert", missing]].concat()),
        LIMIT,
    );
    let err = one_line("a missing CA file", &out, 2);
    assert!(err.contains("missing.pem"), "{err}");
    let plain = Crawl::new("redis://127.0.0.1:1/0", "tls");
    let out = run(
        plain.crawl_command(&[argv.as_slice(), &["--shared-cacert", &ca]].concat()),
        LIMIT,
    );
    let err = one_line("a CA for redis://", &out, 2);
    assert!(err.contains("rediss://"), "{err}");

    // The server's CA: the worker crawls the site, dump reads it back.
    crawl.spawn(&[argv.as_slice(), &["--shared-cacert", &ca]].concat());
    crawl.wait_all_ok(LIMIT);
    let items = parse_lines(&crawl.dump(&["items", "--shared-cacert", &ca]));
    let keys: Vec<String> = items.iter().map(item_key).collect();
    assert_each_once(&keys, &site.expected(), "dump --shared items over TLS");
    assert_fetched_once(&site);
    let summary: serde_json::Value =
        serde_json::from_slice(&crawl.dump(&["summary", "--json", "--shared-cacert", &ca]))
            .expect("summary JSON");
    assert_eq!(summary["frontier"], 0, "{summary}");
}

/// Mutual TLS: a server that asks every client for a certificate its CA
/// signed (`--tls-auth-clients yes`). Without one, or with one another CA
/// signed, a worker is one line and exit 1; a certificate without its key is
/// one line and exit 2; with both, a worker crawls the site and `dump` reads
/// it back. The key never shows.
#[test]
fn mutual_tls_needs_a_client_certificate_the_ca_signed() {
    let _serial = serial();
    let pki = Pki::make();
    let Some(redis) = RedisServer::start_mutual_tls(
        "shared_mutual_tls",
        &pki.server_cert(),
        &pki.server_key(),
        &pki.ca(),
    ) else {
        return;
    };
    let site = MultiSite::start(40, 2, 17, hosts::no_delay());
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);
    let path = |p: std::path::PathBuf| p.to_str().expect("utf-8 path").to_owned();
    let ca = path(pki.ca());
    let (cert, key) = pki.client();
    let (cert, key) = (path(cert), path(key));
    let (other_cert, other_key) = pki.other_client();
    let (other_cert, other_key) = (path(other_cert), path(other_key));
    let mut crawl = Crawl::new(&redis.url(), "mtls");
    let with = |extra: &[&str]| -> Vec<String> {
        let ca = ["--shared-cacert", ca.as_str()];
        [argv.as_slice(), &ca, extra]
            .concat()
            .into_iter()
            .map(str::to_owned)
            .collect()
    };

    let err = one_line(
        "no client certificate",
        &run(crawl.crawl_command(&strs(&with(&[]))), LIMIT),
        1,
    );
    assert!(
        err.contains("--shared-cert FILE --shared-key FILE"),
        "{err}"
    );
    assert!(err.contains("rediss://127.0.0.1"), "{err}");
    let out = run(
        crawl.crawl_command(&strs(&with(&[
            "--shared-cert",
            &other_cert,
            "--shared-key",
            &other_key,
        ]))),
        LIMIT,
    );
    let err = one_line("a client certificate of another CA", &out, 1);
    assert!(err.contains("turned down the client certificate"), "{err}");
    assert!(err.contains("rediss://127.0.0.1"), "{err}");
    let out = run(
        crawl.crawl_command(&strs(&with(&["--shared-cert", &cert]))),
        LIMIT,
    );
    let err = one_line("a certificate without its key", &out, 2);
    assert!(err.contains("--shared-key"), "{err}");

    crawl.spawn(&strs(&with(&[
        "--shared-cert",
        &cert,
        "--shared-key",
        &key,
    ])));
    crawl.wait_all_ok(LIMIT);
    let tls = [
        "--shared-cacert",
        &ca,
        "--shared-cert",
        &cert,
        "--shared-key",
        &key,
    ];
    let items = parse_lines(&crawl.dump(&[&["items"], tls.as_slice()].concat()));
    let keys: Vec<String> = items.iter().map(item_key).collect();
    assert_each_once(
        &keys,
        &site.expected(),
        "dump --shared items over mutual TLS",
    );
    assert_fetched_once(&site);
    let key_pem = std::fs::read_to_string(&key).expect("the key");
    let key_body = key_pem.lines().nth(1).expect("a key line");
    assert!(!crawl.logs_tail().contains(key_body), "the key was shown");
}

/// Issue 46, item 8: each mistake in reaching a TLS server is one clear
/// line, exit 1, from a worker and from `dump`: a certificate for another
/// name says so (and not the hint to give `--shared-cacert`, which was
/// given); `rediss://` to a plain port says within seconds that the port does
/// not speak TLS (before: "timed out" after 9.6 s); `redis://` to a TLS port
/// says it seems to want TLS (before: "Connection reset by peer").
#[test]
fn tls_mistakes_are_each_one_clear_line() {
    let _serial = serial();
    let pki = Pki::make();
    let (cert, key) = pki.wrong_name();
    let Some(wrong_name) = RedisServer::start_tls("shared_tls_lines", &cert, &key, &pki.ca())
    else {
        return;
    };
    let Some(plain) = RedisServer::start("shared_tls_lines") else {
        return;
    };
    let ca = pki.ca().to_str().expect("utf-8 path").to_owned();
    let argv = ["http://127.0.0.2:9/", "--shared-cacert", ca.as_str()];

    // A certificate of the right CA for another name.
    let crawl = Crawl::new(&wrong_name.url(), "lines");
    let err = one_line(
        "a certificate for another name",
        &run(crawl.crawl_command(&argv), LIMIT),
        1,
    );
    eprintln!("{err}");
    assert!(err.contains("rediss://127.0.0.1"), "{err}");
    assert!(err.contains("does not name the URL's host"), "{err}");
    assert!(!err.contains("--shared-cacert"), "{err}");

    // rediss:// to a plain port, quickly.
    let tls_url = plain.url().replacen("redis://", "rediss://", 1);
    let crawl = Crawl::new(&tls_url, "lines");
    let started = Instant::now();
    let out = run(crawl.crawl_command(&argv), LIMIT);
    let took = started.elapsed();
    let err = one_line("rediss:// to a plain port", &out, 1);
    eprintln!("{err}");
    assert!(err.contains("does not speak TLS"), "{err}");
    assert!(err.contains("use redis://"), "{err}");
    assert!(!err.contains("timed out"), "{err}");
    eprintln!("rediss:// to a plain port: {took:?}");
    assert!(took < Duration::from_secs(6), "{took:?}: {err}");
    let err = one_line(
        "dump with rediss:// to a plain port",
        &crawl.dump_output(&["summary"]),
        1,
    );
    eprintln!("{err}");
    assert!(err.contains("does not speak TLS"), "{err}");

    // redis:// to a TLS port.
    let plain_url = wrong_name.url().replacen("rediss://", "redis://", 1);
    let crawl = Crawl::new(&plain_url, "lines");
    let out = run(crawl.crawl_command(&["http://127.0.0.2:9/"]), LIMIT);
    let err = one_line("redis:// to a TLS port", &out, 1);
    eprintln!("{err}");
    assert!(err.contains("seems to want TLS"), "{err}");
    assert!(err.contains("use rediss://"), "{err}");
    assert!(!err.contains("reset by peer"), "{err}");
    let err = one_line(
        "dump with redis:// to a TLS port",
        &crawl.dump_output(&["summary"]),
        1,
    );
    eprintln!("{err}");
    assert!(err.contains("seems to want TLS"), "{err}");
}
