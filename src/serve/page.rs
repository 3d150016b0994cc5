//! The page at `/` (a maud template: every value is HTML-escaped by the
//! template) and its embedded assets. The first paint is rendered here from
//! the snapshot; `assets/app.js` then polls the JSON endpoints and updates the
//! page in place, writing data only through `textContent` and SVG attributes.
//! Depends on the source's view and the API's counts only.

use maud::{DOCTYPE, Markup, html};

use super::api;
use crate::view::watch::Watched;

/// The page's script.
pub const APP_JS: &str = include_str!("assets/app.js");
/// The page's style sheet.
pub const APP_CSS: &str = include_str!("assets/app.css");

/// Hosts rendered in the first paint (the script shows all of them).
const FIRST_HOSTS: usize = 50;

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
                            svg #rate-chart viewBox="0 0 800 200" preserveAspectRatio="none" role="img" aria-label="pages per second" {}
                        }
                        div.split {
                            div.panel {
                                h2 { "Pages by outcome" }
                                table #outcomes { tbody {
                                    @for name in ["new", "changed", "unchanged", "gone", "failed", "blocked"] {
                                        tr { th { (name) } td #(format!("o-{name}")) { (count(name)) } }
                                    }
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
                        div.panel { svg #runs-chart viewBox="0 0 800 200" preserveAspectRatio="none" role="img" aria-label="pages per run" {} }
                        div.legend #runs-legend {}
                        table #runs-table {
                            thead { tr { th { "run" } th { "started" } th { "outcome" } th { "pages" } th { "new" }
                                th { "changed" } th { "unchanged" } th { "failed" } th { "items" } } }
                            tbody {}
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
                                        tr { td { (e.at) } td.url { (e.url) } td { (e.reason) } }
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

/// A count, or "-" where it is not kept (a shared crawl's per-host counts).
fn known(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}
