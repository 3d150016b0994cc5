//! Issue 27, logins and cookies: `[hosts."HOST:PORT"]` headers and Basic
//! credentials (the password from `password_env`), sent only to that origin
//! and never after a redirect to another one; cookies kept in the state across
//! runs; `--no-cookies`; secrets never printed. Issue 43: never to another
//! port of the same host (another service, and its robots.txt), and
//! `[hosts."HOST"]` is the default ports only.
//!
//! The site is in-process on 127.0.0.1: `/private` needs Basic credentials,
//! `/login` sets a session cookie, `/members` needs it, `/away` redirects to a
//! second site on 127.0.0.2 that records every header it receives.

use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::cli::{self, run, stderr};
use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);
const USER: &str = "ann";
const PASSWORD: &str = "l0gin-s3cret-pw";
const PASSWORD_VAR: &str = "LEGCRAWL_TEST_INTRANET_PASSWORD";
const SESSION: &str = "session=sess-7f3a9c";

/// What a server saw: (path, the headers that matter as `name: value`).
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

fn record(seen: &Seen, path: &str, headers: &http::HeaderMap) {
    let kept = ["authorization", "cookie", "x-team", "proxy-authorization"]
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some(format!("{name}: {value}"))
        })
        .collect();
    if let Ok(mut seen) = seen.lock() {
        seen.push((path.to_owned(), kept));
    }
}

/// The intranet on 127.0.0.1 and the other host on 127.0.0.2.
fn sites() -> (TestServer, TestServer, Seen, Seen) {
    let (intranet_seen, other_seen): (Seen, Seen) = Default::default();
    let other_log = other_seen.clone();
    let other = TestServer::start_on(
        "127.0.0.2",
        handler(move |req| {
            record(&other_log, req.path(), &req.headers);
            match req.path() {
                "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
                _ => TestResponse::html("<title>landing</title>"),
            }
        }),
    );
    let landing = other.url("/landing");
    let log = intranet_seen.clone();
    let basic = format!(
        "Basic {}",
        data_encoding::BASE64.encode(format!("{USER}:{PASSWORD}").as_bytes())
    );
    let intranet = TestServer::start(handler(move |req| {
        record(&log, req.path(), &req.headers);
        let cookie = req.header("cookie").unwrap_or_default();
        match req.path() {
            "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
            "/" => TestResponse::html(
                "<title>home</title><a href=/private>p</a><a href=/login>l</a><a href=/away>a</a>",
            ),
            "/private" if req.header("authorization") == Some(basic.as_str()) => {
                TestResponse::html("<title>private</title>")
            }
            "/private" => TestResponse::status(401).header("WWW-Authenticate", "Basic realm=x"),
            "/login" => TestResponse::html("<title>login</title><a href=/members>m</a>")
                .header("Set-Cookie", &format!("{SESSION}; Path=/; HttpOnly")),
            "/members" if cookie.contains(SESSION) => TestResponse::html("<title>members</title>"),
            "/members" => TestResponse::status(403),
            "/away" => TestResponse::redirect(302, &landing),
            _ => TestResponse::not_found(),
        }
    }));
    (intranet, other, intranet_seen, other_seen)
}

/// A crawl file with the host rule for the seed's origin (127.0.0.1 and its
/// port).
fn crawl_file(dir: &Path, seed: &str) -> std::path::PathBuf {
    let url = url::Url::parse(seed).unwrap();
    let origin = format!("127.0.0.1:{}", url.port().unwrap());
    crawl_file_for(dir, seed, &origin)
}

/// A crawl file whose host rule is `[hosts."ORIGIN"]`.
fn crawl_file_for(dir: &Path, seed: &str, origin: &str) -> std::path::PathBuf {
    let path = dir.join("crawl.toml");
    let text = format!(
        "seeds = [\"{seed}\"]\n[scope]\nallowed_hosts = [\"127.0.0.1\", \"127.0.0.2\"]\n\
         [limits]\nconcurrency = 1\nmax_retries = 0\n[politeness]\nper_host = 1\n\
         [hosts.\"{origin}\"]\nheaders = {{ \"X-Team\" = \"docs\" }}\nuser = \"{USER}\"\n\
         password_env = \"{PASSWORD_VAR}\"\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `crawl ARGS` logging at `info`, with the password variable set to
/// `password` (removed when `None`).
fn crawl(data: &Path, password: Option<&str>, args: &[&str]) -> Output {
    cli::crawl_env(
        data,
        args,
        &[("RUST_LOG", Some("info")), (PASSWORD_VAR, password)],
    )
}

/// The headers `path` was requested with, each time.
fn requests_of(seen: &Seen, path: &str) -> Vec<Vec<String>> {
    let seen = seen.lock().expect("seen lock");
    seen.iter()
        .filter(|(p, _)| p == path)
        .map(|(_, headers)| headers.clone())
        .collect()
}

#[test]
fn credentials_go_to_their_host_only_and_cookies_survive_the_run_embedded() {
    credentials_go_to_their_host_only_and_cookies_survive_the_run(Mode::Embedded);
}

#[test]
fn credentials_go_to_their_host_only_and_cookies_survive_the_run_shared() {
    credentials_go_to_their_host_only_and_cookies_survive_the_run(Mode::Shared);
}

/// In a shared crawl the cookies live in Redis, so the next run's worker (a
/// new process) sends the session cookie an earlier one received.
fn credentials_go_to_their_host_only_and_cookies_survive_the_run(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "credentials_go_to_their_host_only") else {
        return;
    };
    let crawl = |args: &[&str]| {
        let mut cmd = crawler.command(args);
        cmd.env("RUST_LOG", "info").env(PASSWORD_VAR, PASSWORD);
        run(cmd, LIMIT)
    };
    let (intranet, _other, seen, other_seen) = sites();
    let file = crawl_file(crawler.dir(), &intranet.url("/"));
    let config = file.to_str().unwrap();
    let out = crawl(&["--config", config]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut said = stderr(&out);
    // Basic credentials and the host's header reached the intranet.
    let private = requests_of(&seen, "/private");
    assert_eq!(private.len(), 1, "{private:?}");
    assert!(
        private[0]
            .iter()
            .any(|h| h.starts_with("authorization: Basic "))
    );
    assert!(private[0].iter().any(|h| h == "x-team: docs"));
    // The cookie /login set went with /members.
    let members = requests_of(&seen, "/members");
    assert_eq!(members.len(), 1, "{members:?}");
    assert!(
        members[0].iter().any(|h| h.contains(SESSION)),
        "{members:?}"
    );
    // The other host, reached by a redirect, got none of it.
    let landing = requests_of(&other_seen, "/landing");
    assert_eq!(landing.len(), 1, "{:?}", other_seen.lock().unwrap());
    for (path, headers) in other_seen.lock().unwrap().iter() {
        assert!(headers.is_empty(), "{path}: {headers:?}");
    }
    // The next run on the same state uses the stored session cookie.
    let next = intranet.url("/members?run=2");
    if let (Some(redis), Some(shared)) = (crawler.redis(), crawler.shared()) {
        let stored = redis.keys(&format!("{}cookies", shared.prefix()));
        assert_eq!(stored.len(), 1, "the crawl's cookie hash: {stored:?}");
    }
    let out = crawl(&[&next]);
    assert!(out.status.success(), "{}", stderr(&out));
    said.push_str(&stderr(&out));
    let members = requests_of(&seen, "/members");
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(
        members[1].iter().any(|h| h.contains(SESSION)),
        "{members:?}"
    );
    // --no-cookies is stored with the job: no cookie is sent from then on.
    let out = crawl(&["--no-cookies", &intranet.url("/members?run=3")]);
    assert!(out.status.success(), "{}", stderr(&out));
    said.push_str(&stderr(&out));
    assert!(said.contains("cookies: (default) -> false"), "{said}");
    // (The seed of run 2 is fetched again with run 3's.)
    let members = requests_of(&seen, "/members");
    assert_eq!(members.len(), 4, "{members:?}");
    for headers in &members[2..] {
        assert!(
            !headers.iter().any(|h| h.starts_with("cookie")),
            "{members:?}"
        );
    }
    // Nothing printed or stored for users holds the password or the cookie.
    let job = String::from_utf8_lossy(&crawler.dump(&["job"])).into_owned();
    assert!(
        job.contains(PASSWORD_VAR) && job.contains("cookies = false"),
        "{job}"
    );
    let items = String::from_utf8_lossy(&crawler.dump(&["items"])).into_owned();
    let summary = String::from_utf8_lossy(&crawler.dump(&["summary"])).into_owned();
    assert!(items.contains("members"), "{items}");
    let basic = data_encoding::BASE64.encode(format!("{USER}:{PASSWORD}").as_bytes());
    for text in [&said, &job, &items, &summary] {
        assert!(!text.contains(PASSWORD) && !text.contains(&basic), "{text}");
        assert!(!text.contains("sess-7f3a9c"), "{text}");
    }
}

#[test]
fn a_missing_password_variable_stops_the_run_before_any_fetch() {
    let (intranet, _other, seen, _) = sites();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let file = crawl_file(dir.path(), &intranet.url("/"));
    let out = crawl(&data, None, &["--config", file.to_str().unwrap()]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(said.contains(PASSWORD_VAR), "{said}");
    assert_eq!(intranet.requests(), 0);
    assert!(seen.lock().unwrap().is_empty());
    // A stored job with the rule needs the variable on every run, too.
    let out = crawl(&data, Some(PASSWORD), &["--config", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = intranet.requests();
    let out = crawl(&data, None, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(intranet.requests(), before);
}

#[test]
fn a_changed_host_header_shows_as_stars() {
    let (intranet, _other, _, _) = sites();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let file = crawl_file(dir.path(), &intranet.url("/"));
    let text = std::fs::read_to_string(&file).unwrap();
    let with = |token: &str| {
        text.replace(
            "\"X-Team\" = \"docs\"",
            &format!("Authorization = \"Bearer {token}\""),
        )
    };
    std::fs::write(&file, with("t0ken-one")).unwrap();
    let out = crawl(&data, Some(PASSWORD), &["--config", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(&file, with("t0ken-two")).unwrap();
    let out = crawl(&data, Some(PASSWORD), &["--config", file.to_str().unwrap()]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("headers.Authorization: *** -> ***"), "{said}");
    assert!(!said.contains("t0ken"), "{said}");
}

#[test]
fn credentials_never_reach_another_port_of_the_host_embedded() {
    credentials_never_reach_another_port_of_the_host(Mode::Embedded);
}

#[test]
fn credentials_never_reach_another_port_of_the_host_shared() {
    credentials_never_reach_another_port_of_the_host(Mode::Shared);
}

/// Two services on 127.0.0.1, on two ports: the intranet's rule
/// (`[hosts."127.0.0.1:PORT"]`) goes to its port only, robots.txt included;
/// the other service, a seed of the same crawl, never gets the credentials
/// or the header, its robots.txt neither. `[hosts."127.0.0.1"]` is ports 80
/// and 443 only, and its change line says so.
fn credentials_never_reach_another_port_of_the_host(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "credentials_never_reach_another_port") else {
        return;
    };
    let crawl = |args: &[&str]| {
        let mut cmd = crawler.command(args);
        cmd.env(PASSWORD_VAR, PASSWORD);
        run(cmd, LIMIT)
    };
    let second_seen: Seen = Default::default();
    let log = second_seen.clone();
    let second = TestServer::start(handler(move |req| {
        record(&log, req.path(), &req.headers);
        match req.path() {
            "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
            _ => TestResponse::html("<title>second service</title>"),
        }
    }));
    let (intranet, _other, seen, _) = sites();
    assert_ne!(intranet.addr().port(), second.addr().port());
    let seeds = [intranet.url("/"), second.url("/other")];
    let origin = format!("127.0.0.1:{}", intranet.addr().port());
    let file = crawl_file_for(crawler.dir(), &seeds[0], &origin);
    let text = std::fs::read_to_string(&file).unwrap().replace(
        &format!("seeds = [\"{}\"]", seeds[0]),
        &format!("seeds = [\"{}\", \"{}\"]", seeds[0], seeds[1]),
    );
    std::fs::write(&file, text).unwrap();
    let out = crawl(&["--config", file.to_str().unwrap()]);
    assert!(out.status.success(), "{mode:?}: {}", stderr(&out));
    // The intranet got them, its robots.txt too (same origin).
    let private = requests_of(&seen, "/private");
    assert_eq!(private.len(), 1, "{mode:?}: {private:?}");
    assert!(
        private[0]
            .iter()
            .any(|h| h.starts_with("authorization: Basic "))
    );
    let robots = requests_of(&seen, "/robots.txt");
    assert!(!robots.is_empty() && robots.iter().all(|h| h.iter().any(|h| h == "x-team: docs")));
    // The second service was crawled and got none of it.
    let second_requests = second_seen.lock().unwrap().clone();
    let paths: Vec<&str> = second_requests.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        paths.contains(&"/robots.txt") && paths.contains(&"/other"),
        "{paths:?}"
    );
    // (Cookies are the host's on every port, by RFC 6265: not checked.)
    let credentials = |headers: &[String]| {
        headers
            .iter()
            .filter(|h| h.starts_with("authorization") || h.starts_with("x-team"))
            .cloned()
            .collect::<Vec<_>>()
    };
    for (path, headers) in &second_requests {
        assert!(
            credentials(headers).is_empty(),
            "{mode:?}: {path} got {headers:?}"
        );
    }
    // `[hosts."127.0.0.1"]`: ports 80 and 443 only, as the change line says;
    // neither service gets anything from then on.
    let file = crawl_file_for(crawler.dir(), &seeds[0], "127.0.0.1");
    let before = requests_of(&seen, "/").len();
    let out = crawl(&["--config", file.to_str().unwrap()]);
    let said = stderr(&out);
    assert!(out.status.success(), "{mode:?}: {said}");
    assert!(
        said.contains("hosts.\"127.0.0.1\".user: (default) -> ann (127.0.0.1 on ports 80 (http) and 443 (https) only"),
        "{mode:?}: {said}"
    );
    assert!(
        said.contains(&format!(
            "hosts.\"{origin}\".user: ann -> (default) ({origin} only)"
        )),
        "{mode:?}: {said}"
    );
    let home = requests_of(&seen, "/");
    assert!(home.len() > before, "{mode:?}: the seed is fetched again");
    for headers in &home[before..] {
        assert!(credentials(headers).is_empty(), "{mode:?}: {headers:?}");
    }
    let second_requests = second_seen.lock().unwrap().clone();
    for (path, headers) in &second_requests {
        assert!(
            credentials(headers).is_empty(),
            "{mode:?}: {path} got {headers:?}"
        );
    }
}
