//! `/metrics`: the snapshot in the Prometheus text format (0.0.4), encoded by
//! the Prometheus org's `prometheus-client`.
//!
//! A fresh registry is filled from the snapshot on each scrape (the snapshot
//! is the only source; nothing is counted here). The `_total` series count
//! the current run (or the last one, once it ended): they start again from
//! zero with each run, which Prometheus reads as a counter reset. Per-host
//! series are bounded to the [`METRIC_HOSTS`] busiest hosts.
//!
//! For alerts on a nightly crawl, `legcrawl_last_run_end_timestamp_seconds`
//! and `legcrawl_last_run_outcome` describe the newest run that ended (a run
//! killed never ended: the previous one stays), while `legcrawl_run_info`
//! names the current or last run, `stale` when its record says running but
//! nothing runs it ([`crate::view::watch::STALE`]): only
//! `legcrawl_crawl_running 1` says a crawl runs. Depends on the source's
//! view only.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::view::watch::{Phase, Watched};

/// Hosts with per-host series at most (the busiest, by queued + in flight).
pub const METRIC_HOSTS: usize = 50;

/// The `Content-Type` of the answer.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndedLabel {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    run: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabel {
    host: String,
}

/// The text of `/metrics` for `view`.
pub fn render(view: &Watched) -> String {
    let mut registry = Registry::default();
    let published = Gauge::<i64>::default();
    registry.register(
        "legcrawl_snapshot_published",
        "1 when a crawl has published a snapshot here (0: no crawl yet, or unreadable)",
        published.clone(),
    );
    let live = Gauge::<i64>::default();
    registry.register(
        "legcrawl_crawl_running",
        "1 while a crawl runs and publishes",
        live.clone(),
    );
    live.set(i64::from(view.phase == Phase::Running));
    if let Some(s) = &view.snapshot {
        published.set(1);
        let pages = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "legcrawl_pages_fetched",
            "Pages of the run that finished, by outcome",
            pages.clone(),
        );
        for (outcome, n) in [
            ("new", s.pages.new),
            ("changed", s.pages.changed),
            ("unchanged", s.pages.unchanged),
            ("gone", s.pages.gone),
            ("failed", s.pages.failed),
            ("blocked", s.pages.blocked),
        ] {
            pages.get_or_create(&OutcomeLabel { outcome }).inc_by(n);
        }
        counter(
            &mut registry,
            "legcrawl_items_stored",
            "Items stored by the run",
            s.items_stored,
        );
        gauge(
            &mut registry,
            "legcrawl_frontier_queued",
            "Requests queued",
            s.queued,
        );
        gauge(
            &mut registry,
            "legcrawl_in_flight",
            "Requests in flight",
            s.in_flight,
        );
        let errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "legcrawl_errors",
            "Errors of the run, by kind",
            errors.clone(),
        );
        for (kind, n) in &s.errors {
            errors
                .get_or_create(&KindLabel { kind: kind.clone() })
                .inc_by(*n);
        }
        counter(
            &mut registry,
            "legcrawl_bytes",
            "Body bytes fetched by the run",
            s.bytes,
        );
        let info = Family::<RunLabels, Gauge>::default();
        registry.register(
            "legcrawl_run_info",
            "The current (or last) run: its number and outcome",
            info.clone(),
        );
        info.get_or_create(&RunLabels {
            run: s.run.to_string(),
            outcome: s.outcome.clone(),
        })
        .set(1);
        last_run(&mut registry, s);
        hosts(&mut registry, s);
    }
    let mut text = String::new();
    match prometheus_client::encoding::prometheus_text::encode(&mut text, &registry) {
        Ok(()) => text,
        Err(_) => String::from("# the metrics could not be encoded\n"),
    }
}

/// When the newest run that ended ended, and how (nothing before a run
/// ended).
fn last_run(registry: &mut Registry, s: &crate::status::snapshot::Snapshot) {
    let Some((ended_at, outcome)) = s
        .runs
        .iter()
        .rev()
        .find_map(|r| Some((r.ended_at?, r.outcome.as_str())))
    else {
        return;
    };
    gauge(
        registry,
        "legcrawl_last_run_end_timestamp_seconds",
        "When the last run that ended ended, in Unix seconds (a killed run never ended)",
        ended_at,
    );
    let ended = Family::<EndedLabel, Gauge>::default();
    registry.register(
        "legcrawl_last_run_outcome",
        "How the last run that ended ended (drained, limit, idle, interrupted, failed): 1",
        ended.clone(),
    );
    ended
        .get_or_create(&EndedLabel {
            outcome: outcome.to_owned(),
        })
        .set(1);
}

fn hosts(registry: &mut Registry, s: &crate::status::snapshot::Snapshot) {
    let queued = Family::<HostLabel, Gauge>::default();
    let in_flight = Family::<HostLabel, Gauge>::default();
    let fetched = Family::<HostLabel, Counter>::default();
    let errors = Family::<HostLabel, Counter>::default();
    for row in s.hosts.iter().take(METRIC_HOSTS) {
        let label = HostLabel {
            host: row.host.clone(),
        };
        queued.get_or_create(&label).set(clamp(row.queued));
        in_flight.get_or_create(&label).set(clamp(row.in_flight));
        if let Some(n) = row.fetched {
            fetched.get_or_create(&label).inc_by(n);
        }
        if let Some(n) = row.errors {
            errors.get_or_create(&label).inc_by(n);
        }
    }
    let busiest = format!("(the {METRIC_HOSTS} busiest hosts)");
    registry.register(
        "legcrawl_host_queued",
        format!("Requests queued per host {busiest}"),
        queued,
    );
    registry.register(
        "legcrawl_host_in_flight",
        format!("Requests in flight per host {busiest}"),
        in_flight,
    );
    registry.register(
        "legcrawl_host_fetched",
        format!("Pages of the run that finished per host {busiest}"),
        fetched,
    );
    registry.register(
        "legcrawl_host_errors",
        format!("Errors of the run per host {busiest}"),
        errors,
    );
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let metric = Counter::<u64>::default();
    metric.inc_by(value);
    registry.register(name, help, metric);
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let metric = Gauge::<i64>::default();
    metric.set(clamp(value));
    registry.register(name, help, metric);
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::status::snapshot::{HostRow, RunRow, Snapshot};

    #[test]
    fn the_issue_names_and_labels_are_there_and_hosts_are_bounded() {
        let snapshot = Snapshot {
            run: 4,
            outcome: "running".into(),
            errors: [("network".to_owned(), 2)].into_iter().collect(),
            hosts: (0..METRIC_HOSTS + 10)
                .map(|k| HostRow {
                    host: format!("h{k}.example"),
                    ..HostRow::default()
                })
                .collect(),
            ..Snapshot::default()
        };
        let view = Watched {
            phase: Phase::Running,
            message: String::new(),
            snapshot: Some(Arc::new(snapshot)),
        };
        let text = render(&view);
        for line in [
            "# TYPE legcrawl_pages_fetched_total counter",
            "legcrawl_pages_fetched_total{outcome=\"blocked\"} 0",
            "legcrawl_items_stored_total 0",
            "legcrawl_frontier_queued 0",
            "legcrawl_in_flight 0",
            "legcrawl_errors_total{kind=\"network\"} 2",
            "legcrawl_bytes_total 0",
            "legcrawl_run_info{run=\"4\",outcome=\"running\"} 1",
            "legcrawl_crawl_running 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        for outcome in ["new", "changed", "unchanged", "gone", "failed", "blocked"] {
            let label = format!("legcrawl_pages_fetched_total{{outcome=\"{outcome}\"}}");
            assert!(text.contains(&label), "{label}");
        }
        let hosts = text
            .lines()
            .filter(|l| l.starts_with("legcrawl_host_queued{"))
            .count();
        assert_eq!(hosts, METRIC_HOSTS);
        // No run has ended yet: no last run.
        assert!(!text.contains("legcrawl_last_run"), "{text}");
    }

    #[test]
    fn the_last_run_that_ended_is_the_one_before_a_running_or_killed_run() {
        let row = |id: u64, ended_at: Option<u64>, outcome: &str| RunRow {
            id,
            ended_at,
            outcome: outcome.into(),
            ..RunRow::default()
        };
        let snapshot = Snapshot {
            run: 4,
            outcome: "running".into(),
            runs: vec![
                row(1, Some(1_700_000_000), "drained"),
                row(2, Some(1_700_086_400), "failed"),
                row(3, None, "killed"),
                row(4, None, "running"),
            ],
            ..Snapshot::default()
        };
        let view = Watched {
            phase: Phase::Running,
            message: String::new(),
            snapshot: Some(Arc::new(snapshot)),
        };
        let text = render(&view);
        for line in [
            "# TYPE legcrawl_last_run_end_timestamp_seconds gauge",
            "legcrawl_last_run_end_timestamp_seconds 1700086400",
            "# TYPE legcrawl_last_run_outcome gauge",
            "legcrawl_last_run_outcome{outcome=\"failed\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert_eq!(text.matches("legcrawl_last_run_outcome{").count(), 1);
    }
}
