//! The JSON endpoints the page polls (documented in docs/serve.md). Each is a
//! bounded slice of the snapshot: the snapshot's own bounds hold, and the item
//! search returns at most [`MAX_ITEMS`](crate::status::snapshot::MAX_ITEMS)
//! items. Depends on the source's view only.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::App;
use crate::status::snapshot::Snapshot;
use crate::view::watch::{Phase, Watched};

/// The fields every answer starts with.
#[derive(Serialize)]
struct Head<'a> {
    phase: Phase,
    message: &'a str,
    run: u64,
    outcome: &'a str,
    updated_at_ms: u64,
}

fn head(view: &Watched) -> Head<'_> {
    let s = view.snapshot.as_deref();
    Head {
        phase: view.phase,
        message: &view.message,
        run: s.map_or(0, |s| s.run),
        outcome: s.map_or("", |s| s.outcome.as_str()),
        updated_at_ms: s.map_or(0, |s| s.updated_at_ms),
    }
}

fn with_head(view: &Watched, body: Value) -> Json<Value> {
    let mut out = serde_json::to_value(head(view)).unwrap_or_else(|_| json!({}));
    if let (Some(out), Value::Object(body)) = (out.as_object_mut(), body) {
        out.extend(body);
    }
    Json(out)
}

/// `GET /api/overview`: counts, errors by kind, and pages/s over the run.
pub async fn overview(State(app): State<Arc<App>>) -> Json<Value> {
    let view = app.source.view().await;
    let Some(s) = view.snapshot.as_deref() else {
        return with_head(&view, json!({}));
    };
    let rate = rate_series(s);
    with_head(
        &view,
        json!({
            "run_started_at": s.run_started_at,
            "ended_at": s.ended_at,
            "pages": s.pages,
            "items_stored": s.items_stored,
            "items_total": s.summary.items,
            "bytes": s.bytes,
            "errors": s.errors,
            "errors_total": s.errors.values().sum::<u64>(),
            "queued": s.queued,
            "in_flight": s.in_flight,
            "hosts_total": s.hosts_total,
            "seen": s.summary.seen,
            "pages_per_s": rate.last().map_or(0.0, |r| r.1),
            "rate": rate.iter().map(|(t, r)| json!([t, r])).collect::<Vec<_>>(),
        }),
    )
}

/// Pages/s between successive samples: `(unix ms, pages/s)`.
fn rate_series(s: &Snapshot) -> Vec<(u64, f64)> {
    s.samples
        .windows(2)
        .filter(|w| w[1][0] > w[0][0])
        .map(|w| {
            let secs = (w[1][0] - w[0][0]) as f64 / 1000.0;
            let pages = w[1][1].saturating_sub(w[0][1]) as f64;
            (w[1][0], (pages / secs * 10.0).round() / 10.0)
        })
        .collect()
}

/// `GET /api/hosts`: the host table.
pub async fn hosts(State(app): State<Arc<App>>) -> Json<Value> {
    let view = app.source.view().await;
    let body = match view.snapshot.as_deref() {
        Some(s) => json!({ "hosts_total": s.hosts_total, "hosts": s.hosts }),
        None => json!({ "hosts_total": 0, "hosts": [] }),
    };
    with_head(&view, body)
}

/// `GET /api/runs`: the run history, oldest first.
pub async fn runs(State(app): State<Arc<App>>) -> Json<Value> {
    let view = app.source.view().await;
    let runs = view.snapshot.as_deref().map(|s| &s.runs[..]).unwrap_or(&[]);
    let body = json!({ "runs": runs });
    with_head(&view, body)
}

/// `GET /api/frontier`: the head of the queue per host.
pub async fn frontier(State(app): State<Arc<App>>) -> Json<Value> {
    let view = app.source.view().await;
    let heads = view
        .snapshot
        .as_deref()
        .map(|s| &s.frontier[..])
        .unwrap_or(&[]);
    let body = json!({ "hosts": heads });
    with_head(&view, body)
}

/// `GET /api/errors`: the recent errors, newest first.
pub async fn errors(State(app): State<Arc<App>>) -> Json<Value> {
    let view = app.source.view().await;
    let errors: Vec<_> = view
        .snapshot
        .as_deref()
        .map(|s| s.recent_errors.iter().rev().collect())
        .unwrap_or_default();
    let body = json!({ "errors": errors });
    with_head(&view, body)
}

/// The query of `/api/items`.
#[derive(Debug, Deserialize)]
pub struct ItemQuery {
    /// Keep the items whose URL contains this (case-insensitive).
    #[serde(default)]
    q: String,
}

/// `GET /api/items?q=`: the latest items, newest first, those whose URL
/// contains `q`.
pub async fn items(State(app): State<Arc<App>>, Query(query): Query<ItemQuery>) -> Json<Value> {
    let view = app.source.view().await;
    let needle = query.q.to_lowercase();
    let items: Vec<_> = view
        .snapshot
        .as_deref()
        .map(|s| {
            s.recent_items
                .iter()
                .rev()
                .filter(|i| needle.is_empty() || i.url.to_lowercase().contains(&needle))
                .collect()
        })
        .unwrap_or_default();
    let kept = view.snapshot.as_deref().map_or(0, |s| s.recent_items.len());
    let body = json!({ "kept": kept, "items": items });
    with_head(&view, body)
}

/// Counts for the page's first paint (the same numbers as `/api/overview`).
pub fn counts(s: &Snapshot) -> BTreeMap<&'static str, u64> {
    BTreeMap::from([
        ("pages", s.pages.pages),
        ("new", s.pages.new),
        ("changed", s.pages.changed),
        ("unchanged", s.pages.unchanged),
        ("gone", s.pages.gone),
        ("failed", s.pages.failed),
        ("blocked", s.pages.blocked),
        ("queued", s.queued),
        ("in_flight", s.in_flight),
        ("items", s.items_stored),
        ("bytes", s.bytes),
        ("errors", s.errors.values().sum()),
    ])
}
