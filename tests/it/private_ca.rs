//! Private CAs (issue 43): an https site whose certificate a CA made in the
//! test signed is refused with one line in words, and crawled once the CA is
//! given with `--cacert` (stored with the job: a later run, and in shared
//! mode the worker that takes the job from Redis, still trusts it) or
//! `SSL_CERT_FILE`. `legcrawl fetch` reads the same. A CA file that is
//! missing or holds no certificate is one line naming it, exit 2.

use std::process::{Command, Output};

use crate::support::cli::{self, LIMIT, run, stderr};
use crate::support::mode::{Crawler, Mode};
use crate::support::tls::Pki;
use crate::support::{TestResponse, TestServer, handler};

/// What a refused certificate of an unknown CA reads as.
const UNKNOWN_CA: &str =
    "the server's certificate is not signed by a trusted CA (give it with --cacert FILE)";

/// Two pages on https, the server's certificate signed by `pki`'s CA.
fn site(pki: &Pki) -> TestServer {
    TestServer::start_https(
        handler(|req| match req.path() {
            "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
            "/" => TestResponse::html("<title>home</title><a href=/a>a</a>"),
            "/a" => TestResponse::html("<title>a</title>"),
            _ => TestResponse::not_found(),
        }),
        pki.server_config(),
    )
}

/// `cmd` with no CA of the environment (the tests' own may have one).
fn without_env_cas(mut cmd: Command) -> Command {
    cmd.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
    cmd
}

/// `cmd` run, logging warnings (where a failed fetch is said).
fn run_warn(mut cmd: Command) -> Output {
    cmd.env("RUST_LOG", "warn");
    run(cmd, LIMIT)
}

fn path(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

#[test]
fn a_private_ca_is_trusted_through_cacert_and_ssl_cert_file_embedded() {
    a_private_ca_is_trusted_through_cacert_and_ssl_cert_file(Mode::Embedded);
}

#[test]
fn a_private_ca_is_trusted_through_cacert_and_ssl_cert_file_shared() {
    a_private_ca_is_trusted_through_cacert_and_ssl_cert_file(Mode::Shared);
}

fn a_private_ca_is_trusted_through_cacert_and_ssl_cert_file(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "a_private_ca_is_trusted") else {
        return;
    };
    let pki = Pki::make();
    let site = site(&pki);
    let seed = site.url("/");

    // Without the CA: every handshake fails (exit 4), said in words.
    let out = run_warn(without_env_cas(crawler.another("none").command(&[&seed])));
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{mode:?}: {said}");
    assert!(said.contains(UNKNOWN_CA), "{mode:?}: {said}");
    for raw in ["UnknownIssuer", "InvalidCertificate", "Other("] {
        assert!(!said.contains(raw), "{mode:?}: {said}");
    }
    assert_eq!(site.requests(), 0, "no request without a handshake");

    // --cacert: the crawl goes through, and the CA is stored with the job.
    let ca = pki.ca();
    let out = run(
        without_env_cas(crawler.command(&[&seed, "--cacert", path(&ca)])),
        LIMIT,
    );
    cli::assert_ok(&format!("{mode:?} --cacert"), &out);
    let mut paths = crawler.item_paths();
    paths.sort();
    assert_eq!(paths, ["/", "/a"], "{mode:?}");
    let job = String::from_utf8_lossy(&crawler.dump(&["job"])).into_owned();
    assert!(job.contains(&format!("cacert = {:?}", path(&ca))), "{job}");
    // The next run takes the CA from the stored job (in shared mode a new
    // worker, from Redis): the seed is fetched again over TLS.
    let before = site.hits("/");
    let out = run(without_env_cas(crawler.command(&[])), LIMIT);
    cli::assert_ok(&format!("{mode:?} the stored job"), &out);
    assert_eq!(site.hits("/"), before + 1, "{mode:?}");

    // SSL_CERT_FILE instead of --cacert.
    let by_env = crawler.another("env");
    let mut cmd = without_env_cas(by_env.command(&[&seed]));
    cmd.env("SSL_CERT_FILE", &ca);
    cli::assert_ok(&format!("{mode:?} SSL_CERT_FILE"), &run(cmd, LIMIT));
    assert_eq!(by_env.item_paths().len(), 2, "{mode:?}");

    // A CA file that cannot be used: one line naming it, exit 2, nothing
    // fetched and no state made.
    let junk = crawler.dir().join("junk.pem");
    std::fs::write(&junk, "no certificate here\n").expect("write junk.pem");
    let missing = crawler.dir().join("missing.pem");
    let requests = site.requests();
    for (file, why) in [
        (&missing, "cannot be read"),
        (&junk, "holds no certificate"),
    ] {
        let bad = crawler.another("bad");
        let out = run(bad.command(&[&seed, "--cacert", path(file)]), LIMIT);
        let line = cli::one_line("--cacert", &out, 2);
        assert!(line.contains(path(file)) && line.contains(why), "{line}");
        let mut cmd = bad.command(&[&seed]);
        cmd.env("SSL_CERT_FILE", file);
        let line = cli::one_line("SSL_CERT_FILE", &run(cmd, LIMIT), 2);
        assert!(
            line.contains("SSL_CERT_FILE") && line.contains(path(file)),
            "{line}"
        );
        assert!(!bad.exists(), "{mode:?}: a state was made");
    }
    assert_eq!(site.requests(), requests);
}

#[test]
fn fetch_trusts_the_same_cas() {
    let pki = Pki::make();
    let site = site(&pki);
    let url = site.url("/a");
    let fetch = |args: &[&str], ca_file: Option<&std::path::Path>| {
        let mut cmd = Command::new(cli::bin());
        cmd.arg("fetch")
            .args(args)
            .arg(&url)
            .env("RUST_LOG", "error");
        let mut cmd = without_env_cas(cmd);
        if let Some(file) = ca_file {
            cmd.env("SSL_CERT_FILE", file);
        }
        run(cmd, LIMIT)
    };
    let out = fetch(&[], None);
    let line = cli::one_line("fetch without the CA", &out, 3);
    assert!(line.contains(UNKNOWN_CA) && line.contains(&url), "{line}");
    let ca = pki.ca();
    for out in [fetch(&["--cacert", path(&ca)], None), fetch(&[], Some(&ca))] {
        cli::assert_ok("fetch with the CA", &out);
        assert!(String::from_utf8_lossy(&out.stdout).contains("<title>a</title>"));
    }
    // Another CA does not do.
    let out = fetch(&["--cacert", path(&pki.other_ca())], None);
    cli::one_line("fetch with another CA", &out, 3);
    let missing = pki.dir().join("missing.pem");
    let line = cli::one_line(
        "fetch --cacert missing",
        &fetch(&["--cacert", path(&missing)], None),
        2,
    );
    assert!(line.contains(path(&missing)), "{line}");
}
