//! `legcrawl fetch URL`: one polite fetch, with the seed user agent's exit codes.
//!
//! Exit codes: 0 success; 2 HTTP error status (the error document goes to
//! stderr); 3 connection or URL error; 4 forbidden by robots.txt (also while its
//! robots.txt answers 5xx or cannot be reached); 5 read error (including
//! timeouts while reading and a body that cannot be decoded); 6 `Content-Length`
//! mismatch; 7 the body was longer than the 10 MiB limit and was cut (what was
//! kept is written, and stderr says so).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use legcrawl::config::CrawlConfig;
use legcrawl::crawlfile::units::positive_duration_arg;
use legcrawl::fetch::{FetchError, FetchSettings, Fetcher};
use legcrawl::request::Request;
use legcrawl::response::Response;
use legcrawl::robots::{RobotsCache, RobotsSettings, Verdict};

use super::BadInput;
use super::stderr::say;

/// Redirect hops `fetch` follows.
const MAX_REDIRECTS: usize = 10;
/// Exit code of a body cut at the size limit.
const EXIT_TRUNCATED: u8 = 7;

/// Arguments of `fetch`.
#[derive(Debug, clap::Args)]
pub struct FetchArgs {
    /// The URL to fetch.
    url: String,
    /// Write the body to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Print only the status line and headers.
    #[arg(short = 'I', long = "head")]
    head: bool,
    /// User-Agent header (also the robots.txt product token).
    #[arg(long, value_name = "UA")]
    user_agent: Option<String>,
    /// Send a From header with this e-mail address.
    #[arg(long, value_name = "EMAIL")]
    from: Option<String>,
    /// How long a body read may stall before the fetch fails (exit 5): "10s",
    /// "500ms", or plain seconds.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    read_timeout: String,
    /// Do not fetch or obey robots.txt.
    #[arg(long)]
    ignore_robots: bool,
    /// Total time allowed for the request: "30s", "500ms", "1m", or plain seconds.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    timeout: String,
    #[command(flatten)]
    proxy: super::access::ProxyArgs,
    #[command(flatten)]
    trust: super::access::TrustArgs,
}

pub fn run(args: FetchArgs) -> anyhow::Result<ExitCode> {
    let mut config = CrawlConfig::default();
    if let Some(ua) = &args.user_agent {
        config.user_agent = ua.clone();
    }
    config.request_timeout = timeout("--timeout", &args.timeout)?;
    config.read_timeout = timeout("--read-timeout", &args.read_timeout)?;
    if let Some(choice) = args.proxy.choice()? {
        config.proxy = choice;
    }
    config.cacert = args.trust.cacert.clone();
    super::access::check_trust(config.cacert.as_deref())?;
    let mut settings = FetchSettings::from_config(&config);
    settings.from = args.from.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    if !args.ignore_robots
        && let Some(refusal) = runtime.block_on(robots_refusal(&settings, &config, &args.url))?
    {
        say!("legcrawl: {refusal}");
        return Ok(ExitCode::from(4));
    }
    let fetched = runtime.block_on(fetch_following(&settings, &args.url));
    let response = match fetched {
        Ok(response) => response,
        Err(error) => {
            say!("legcrawl: {error}");
            return Ok(ExitCode::from(fetch_exit_code(&error)));
        }
    };
    super::finish(write_response(&args, &response))?;
    if response.status >= 400 {
        return Ok(ExitCode::from(2));
    }
    if response.truncated {
        say!(
            "legcrawl: the body of {} is longer than {} bytes and was cut there (exit {EXIT_TRUNCATED})",
            response.url,
            settings.max_body_bytes
        );
        return Ok(ExitCode::from(EXIT_TRUNCATED));
    }
    Ok(ExitCode::SUCCESS)
}

/// A timeout flag, read by the parser of every duration ("500ms", "2", "1m30s"),
/// or one line of bad input naming the flag (exit 2). Zero is refused: it would
/// fail every fetch before it starts.
///
/// Parsed here rather than by clap, whose errors take three lines.
fn timeout(flag: &str, value: &str) -> anyhow::Result<Duration> {
    positive_duration_arg(value).map_err(|message| BadInput(format!("{flag}: {message}")).into())
}

/// Why robots.txt forbids fetching `url` now, if it does. A URL that does not
/// parse is left to the fetch, which reports it (exit 3).
async fn robots_refusal(
    settings: &FetchSettings,
    config: &CrawlConfig,
    url: &str,
) -> anyhow::Result<Option<String>> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Ok(None);
    };
    let fetcher = Fetcher::new(settings.clone())?;
    let robots = RobotsCache::new(fetcher, RobotsSettings::from_config(config));
    Ok(match robots.check(&parsed).await {
        Verdict::Allowed { .. } => None,
        Verdict::Disallowed => Some(format!(
            "robots.txt forbids {url} for {}",
            config.user_agent
        )),
        // An unreachable host is the fetch's error to report (exit 3), not robots'.
        Verdict::Unavailable { .. } if robots.take_new_records().iter().all(|r| r.status == 0) => {
            None
        }
        Verdict::Unavailable { .. } => Some(format!(
            "robots.txt of {url} answers with a server error: not fetching for now"
        )),
    })
}

async fn fetch_following(settings: &FetchSettings, url: &str) -> Result<Response, FetchError> {
    let fetcher = Fetcher::new(settings.clone())?;
    let mut request = Request::get(url);
    for _ in 0..=MAX_REDIRECTS {
        let response = fetcher.fetch(&request).await?;
        let location = response
            .headers
            .get(http::header::LOCATION)
            .and_then(|l| l.to_str().ok());
        let target = match location {
            Some(location) if (300..400).contains(&response.status) => {
                response.url.join(location).ok()
            }
            _ => None,
        };
        let Some(target) = target else {
            return Ok(response);
        };
        request.redirects.push(request.url.clone());
        request.url = target.to_string();
    }
    Err(FetchError::InvalidUrl {
        url: request.url,
        reason: format!("more than {MAX_REDIRECTS} redirects"),
    })
}

fn fetch_exit_code(error: &FetchError) -> u8 {
    match error {
        FetchError::ReadTimeout { .. } | FetchError::Read { .. } | FetchError::Decode { .. } => 5,
        FetchError::LengthMismatch { .. } => 6,
        _ => 3,
    }
}

fn write_response(args: &FetchArgs, response: &Response) -> anyhow::Result<()> {
    let error_doc = response.status >= 400;
    let mut out: Box<dyn Write> = if error_doc {
        Box::new(std::io::stderr().lock())
    } else if let Some(path) = &args.output {
        Box::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )
    } else {
        Box::new(std::io::stdout().lock())
    };
    if args.head {
        let mut head = std::io::stdout().lock();
        writeln!(head, "HTTP {}", response.status)?;
        // After redirects, the URL the status and headers belong to (curl -w %{url_effective}).
        if !response.request.redirects.is_empty() {
            writeln!(head, "URL: {}", response.url)?;
        }
        for (name, value) in &response.headers {
            writeln!(
                head,
                "{}: {}",
                name,
                String::from_utf8_lossy(value.as_bytes())
            )?;
        }
        return Ok(());
    }
    out.write_all(&response.body)?;
    out.flush()?;
    Ok(())
}
