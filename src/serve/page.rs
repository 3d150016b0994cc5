//! The page at `/` (a maud template: every value is HTML-escaped by the
//! template) and its embedded assets. The first paint is rendered here from
//! the snapshot, times as RFC 3339 UTC; `assets/app.js` then polls the JSON
//! endpoints, updates the page in place (writing data only through
//! `textContent` and SVG attributes) and draws the charts. The outcome columns
//! of a run add up to its pages: what no named outcome counts (requests the
//! scope no longer holds, dropped unfetched) is its own column.
//! Depends on the source's view, the API's counts and [`crate::clock`] only.

use maud::{DOCTYPE, Markup, html};

use super::api;
use crate::clock::rfc3339_secs;
use crate::status::snapshot::{Outcomes, RunRow};
use crate::view::watch::Watched;

/// The page's script.
pub const APP_JS: &str = include_str!("assets/app.js");
/// The page's style sheet.
pub const APP_CSS: &str = include_str!("assets/app.css");

/// Hosts rendered in the first paint (the script shows all of them).
const FIRST_HOSTS: usize = 50;

/// The outcomes a run's pages are counted by, in the page's order; with
/// [`out_of_scope`] they add up to its pages.
pub const OUTCOMES: [&str; 6] = ["new", "changed", "unchanged", "gone", "failed", "blocked"];

/// The page for `view` of the state in `dir`.
pub fn render(view: &Watched, dir: &str) -> Markup {
    let snapshot = view.snapshot.as_deref();
    let counts = snapshot.map(api::counts).unwrap_or_default();
    let count = |name: &str| counts.get(name).copied().unwrap_or(0).to_string();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "legcrawl · " (dir) }
                link rel="stylesheet" href="assets/app.css";
                script src="assets/app.js" defer {}
            }
            body {
                header {
                    h1 { "legcrawl" }
                    span.dir { (dir) }
                    span #phase .phase data-phase=(format!("{:?}", view.phase).to_lowercase()) { (view.message) }
                }
                nav {
                    @for (id, label) in [("overview", "Overview"), ("hosts", "Hosts"), ("runs", "Runs"),
                        ("items", "Items"), ("frontier", "Frontier"), ("errors", "Recent errors")] {
                        a href=(format!("#{id}")) data-tab=(id) { (label) }
                    }
                }
                main {
                    section #overview {
                        div.cards {
                            @for (id, label) in [("pages", "pages"), ("rate", "pages/s"), ("queued", "queued"),
                                ("in_flight", "in flight"), ("items", "items"), ("bytes", "bytes"), ("errors", "errors")] {
                                div.card {
                                    div.value #(format!("c-{id}")) { @if id == "rate" { "–" } @else { (count(id)) } }
                                    div.label { (label) }
                                }
                            }
                        }
                        div.panel {
                            h2 { "Pages/s over the run " span.note #rate-note {} }
                            svg #rate-chart viewBox="0 0 800 220" role="img" aria-label="pages per second over the run" {}
                        }
                        div.split {
                            div.panel {
                                h2 { "Pages by outcome" }
                                table #outcomes { tbody {
                                    @for name in OUTCOMES {
                                        tr { th { (name) } td #(format!("o-{name}")) { (count(name)) } }
                                    }
                                    tr { th { "out of scope" } td #o-out_of_scope { (snapshot.map_or(0, |s| out_of_scope(&s.pages))) } }
                                } }
                            }
                            div.panel {
                                h2 { "Errors by kind" }
                                table #error-kinds { tbody {
                                    @if let Some(s) = snapshot {
                                        @for (kind, n) in &s.errors { tr { th { (kind) } td { (n) } } }
                                    }
                                } }
                            }
                        }
                        div.panel {
                            h2 { "Busiest hosts" }
                            table #top-hosts {
                                thead { tr { th { "host" } th { "queued" } th { "in flight" } th { "fetched" } th { "errors" } } }
                                tbody {}
                            }
                        }
                    }
                    section #hosts {
                        h2 { "Hosts " span.note #hosts-note {} }
                        table.sortable #hosts-table {
                            thead { tr {
                                @for (key, label) in [("host", "host"), ("queued", "queued"), ("in_flight", "in flight"),
                                    ("fetched", "fetched"), ("errors", "errors"), ("delay_ms", "delay"),
                                    ("wait_ms", "backoff"), ("robots", "robots.txt"), ("parked", "parked")] {
                                    th data-key=(key) { (label) }
                                }
                            } }
                            tbody {
                                @if let Some(s) = snapshot {
                                    @for h in s.hosts.iter().take(FIRST_HOSTS) {
                                        tr {
                                            td { (h.host) } td { (h.queued) } td { (h.in_flight) } td { (known(h.fetched)) }
                                            td { (known(h.errors)) } td { (h.delay_ms) " ms" } td { (h.wait_ms) " ms" }
                                            td { (h.robots) } td { @if h.parked { "parked" } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    section #runs {
                        h2 { "Runs" }
                        div.panel { svg #runs-chart viewBox="0 0 800 240" role="img" aria-label="pages per run by outcome, log scale" {} }
                        div.legend #runs-legend {}
                        table #runs-table {
                            thead { tr {
                                th { "run" } th { "started" } th { "outcome" } th { "pages" }
                                @for name in OUTCOMES { th { (name) } }
                                th { "out of scope" } th { "items" }
                            } }
                            tbody {
                                @if let Some(s) = snapshot {
                                    @for run in s.runs.iter().rev() { (run_row(run)) }
                                }
                            }
                        }
                    }
                    section #items {
                        h2 { "Latest items" }
                        input #item-q type="search" placeholder="filter by URL substring" autocomplete="off";
                        div #items-list {}
                    }
                    section #frontier {
                        h2 { "Head of the queue per host" }
                        div #frontier-list {}
                    }
                    section #errors {
                        h2 { "Recent errors" }
                        table #errors-table {
                            thead { tr { th { "when" } th { "URL" } th { "reason" } } }
                            tbody {
                                @if let Some(s) = snapshot {
                                    @for e in s.recent_errors.iter().rev() {
                                        tr { td { (when(e.at)) } td.url { (e.url) } td { (e.reason) } }
                                    }
                                }
                            }
                        }
                    }
                }
                footer { "read-only · updates every 2 s · " a href="metrics" { "/metrics" } }
            }
        }
    }
}

/// One row of the runs table: the same cells `assets/app.js` writes.
fn run_row(run: &RunRow) -> Markup {
    let p = &run.pages;
    let by_outcome = [p.new, p.changed, p.unchanged, p.gone, p.failed, p.blocked];
    html! {
        tr {
            td { (run.id) } td { (when(run.started_at)) } td { (run.outcome) } td { (p.pages) }
            @for n in by_outcome { td { (n) } }
            td { (out_of_scope(p)) } td { (run.items) }
        }
    }
}

/// A run's pages that no named outcome counts (requests the
/// scope no longer holds, dropped unfetched):
/// the column that makes the outcomes add up to the pages.
pub fn out_of_scope(p: &Outcomes) -> u64 {
    let named = p.new + p.changed + p.unchanged + p.gone + p.failed + p.blocked;
    p.pages.saturating_sub(named)
}

/// Unix seconds as RFC 3339 UTC, or nothing for 0 (not known).
fn when(secs: u64) -> String {
    match secs {
        0 => String::new(),
        secs => rfc3339_secs(secs),
    }
}

/// A count, or "-" where it is not kept (a shared crawl's per-host counts).
fn known(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::status::snapshot::{ErrorRow, Snapshot};
    use crate::view::watch::Phase;

    /// 2026-12-02T12:00:00Z.
    const NOON: u64 = 1_796_212_800;

    fn view() -> Watched {
        let pages = Outcomes {
            pages: 540,
            new: 2,
            changed: 5,
            unchanged: 520,
            gone: 9,
            failed: 1,
            blocked: 1,
        };
        let run = RunRow {
            id: 7,
            started_at: NOON,
            ended_at: Some(NOON + 60),
            outcome: "drained".into(),
            pages,
            items: 7,
        };
        let snapshot = Snapshot {
            run: 7,
            run_started_at: NOON,
            outcome: "drained".into(),
            pages,
            recent_errors: vec![ErrorRow {
                at: NOON + 30,
                url: "http://127.0.0.1/x".into(),
                reason: "HTTP 404".into(),
            }],
            runs: vec![run],
            ..Snapshot::default()
        };
        Watched {
            phase: Phase::Ended,
            message: "run 7 ended".into(),
            snapshot: Some(Arc::new(snapshot)),
        }
    }

    #[test]
    fn the_first_paint_shows_readable_times_never_unix_seconds() {
        let page = render(&view(), "data/x").into_string();
        assert!(page.contains("2026-12-02T12:00:00Z"), "the run's start");
        assert!(page.contains("2026-12-02T12:00:30Z"), "the error's time");
        assert!(!page.contains(&NOON.to_string()), "raw Unix seconds");
        assert!(!page.contains(&(NOON + 30).to_string()), "raw Unix seconds");
    }

    #[test]
    fn a_runs_columns_add_up_to_its_pages() {
        let page = render(&view(), "data/x").into_string();
        let head = "<th>pages</th><th>new</th><th>changed</th><th>unchanged</th><th>gone</th>\
                    <th>failed</th><th>blocked</th><th>out of scope</th><th>items</th>";
        assert!(page.contains(head), "{page}");
        // 2 + 5 + 520 + 9 + 1 + 1 named, 2 out of scope: 540.
        let row = "<td>540</td><td>2</td><td>5</td><td>520</td><td>9</td><td>1</td><td>1</td>\
                   <td>2</td><td>7</td>";
        assert!(page.contains(row), "{page}");
        assert!(page.contains(r#"<td id="o-out_of_scope">2</td>"#), "{page}");
    }
}
