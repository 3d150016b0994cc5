//! `legcrawl dump items`: which items (all, one run's, those stored after a run) and
//! in what shape (JSON lines as stored, or CSV), optionally cut to chosen fields.
//!
//! Which items a run stored is the view's to say ([`CrawlView::for_each_item`]),
//! for a state directory and a shared crawl alike. `--run last` and `--since-run
//! last` name the newest run record, so a nightly job need not track run numbers.
//!
//! CSV follows RFC 4180: a header row of the field names, one row per item, CRLF line
//! ends, a field quoted when it holds a comma, a quote, CR or LF, quotes doubled.
//! Strings are written as they are, numbers and booleans as JSON writes them, `null`
//! and missing fields as empty cells, arrays and objects as compact JSON text. The
//! escaper is the few lines below (no dependency for it); the tests read the output
//! back with the `csv` crate.

use std::io::Write;

use anyhow::Context;
use legcrawl::view::{CrawlView, ItemPick, RunRef, ViewError};
use serde_json::{Map, Value};

use super::BadInput;

/// The columns of `--format csv` when `--fields` is not given, first; every other
/// top-level field found in the items selected follows, in alphabetical order.
pub const CSV_LEADING_FIELDS: [&str; 4] = ["url", "status", "title", "fetched_at"];

/// The options of `dump items`.
#[derive(Debug, Clone, clap::Args, serde::Serialize, serde::Deserialize)]
pub struct ItemsArgs {
    /// Output format: jsonl (one JSON object per line, as stored) or csv (RFC 4180
    /// with a header row; without --fields: url,status,title,fetched_at, then every
    /// other field found, alphabetically).
    #[arg(long, value_enum, default_value_t = Format::Jsonl, value_name = "FORMAT")]
    format: Format,
    /// Only these top-level fields, in this order (comma-separated, e.g.
    /// url,title,status). jsonl objects then have exactly these keys (null when an
    /// item has no such field); csv leaves the cell empty.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    fields: Option<Vec<String>>,
    /// Only the items run N stored; `last`: the newest run's.
    #[arg(long, value_name = "N|last", conflicts_with = "since_run", value_parser = RunRef::parse)]
    run: Option<RunRef>,
    /// Only the items stored by the runs after run N (0 = every run): what a consumer
    /// that took run N's items has not taken yet. `last` is the newest run, after
    /// which no run has stored anything yet: it prints nothing.
    #[arg(long, value_name = "N|last", value_parser = RunRef::parse)]
    since_run: Option<RunRef>,
}

impl ItemsArgs {
    /// The items `--run` / `--since-run` select.
    fn pick(&self) -> ItemPick {
        match (self.run, self.since_run) {
            (Some(run), _) => ItemPick::Run(run),
            (None, Some(since)) => ItemPick::SinceRun(since),
            (None, None) => ItemPick::All,
        }
    }
}

/// The output formats of `dump items`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// RFC 4180 CSV with a header row.
    Csv,
}

/// Prints the items `args` select, at most `limit` of them. `json` is `dump --json`:
/// harmless with jsonl, a contradiction with csv.
pub async fn print_items(
    out: &mut impl Write,
    view: &CrawlView,
    args: &ItemsArgs,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    if json && args.format == Format::Csv {
        return Err(
            BadInput("--json and --format csv ask for two formats; give one".into()).into(),
        );
    }
    let fields = args.fields.as_deref().map(check_fields).transpose()?;
    let pick = args.pick();
    let limit = limit.unwrap_or(usize::MAX);
    match (args.format, fields) {
        (Format::Jsonl, None) => {
            each_item(view, pick, limit, |_, text| {
                writeln!(out, "{text}").map_err(Into::into)
            })
            .await
        }
        (Format::Jsonl, Some(fields)) => {
            each_item(view, pick, limit, |n, text| {
                let item = parse(n, text)?;
                write_object(out, &item, fields)
            })
            .await
        }
        (Format::Csv, fields) => {
            let columns = match fields {
                Some(fields) => fields.to_vec(),
                None => csv_columns(view, pick, limit).await?,
            };
            write_row(out, columns.iter().map(String::as_str))?;
            each_item(view, pick, limit, |n, text| {
                let item = parse(n, text)?;
                let cells: Vec<String> = columns.iter().map(|c| cell(item.get(c))).collect();
                write_row(out, cells.iter().map(String::as_str))
            })
            .await
        }
    }
}

/// `--fields` without empty or repeated names.
fn check_fields(fields: &[String]) -> anyhow::Result<&[String]> {
    for (i, name) in fields.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(BadInput(format!(
                "--fields has an empty name (field {} of {:?})",
                i + 1,
                fields.join(",")
            ))
            .into());
        }
        if fields[..i].contains(name) {
            return Err(BadInput(format!("--fields names {name:?} twice")).into());
        }
    }
    Ok(fields)
}

/// Calls `each` with the number (from 1, for messages) and the JSON text of
/// the items `pick` selects, at most `limit`, stopping at the first error.
async fn each_item(
    view: &CrawlView,
    pick: ItemPick,
    limit: usize,
    mut each: impl FnMut(u64, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut n = 0;
    let read = view.for_each_item(pick, |text| {
        if n as usize >= limit {
            return Ok(false);
        }
        n += 1;
        each(n, text).map(|()| true).map_err(Failed::Writing)
    });
    match read.await {
        Ok(()) => Ok(()),
        Err(Failed::Reading(error)) => Err(super::dump::lift(error)),
        Err(Failed::Writing(error)) => Err(error),
    }
}

/// Why [`each_item`] stopped: the view could not be read (its error keeps
/// its exit code), or an item could not be written.
enum Failed {
    Reading(ViewError),
    Writing(anyhow::Error),
}

impl From<ViewError> for Failed {
    fn from(error: ViewError) -> Failed {
        Failed::Reading(error)
    }
}

impl From<legcrawl::store::StoreError> for Failed {
    fn from(error: legcrawl::store::StoreError) -> Failed {
        Failed::Reading(error.into())
    }
}

/// A stored item as an object; an item that is not one is a corrupt record.
fn parse(n: u64, text: &str) -> anyhow::Result<Map<String, Value>> {
    serde_json::from_str(text)
        .with_context(|| format!("item {n} of the selection is not a JSON object"))
}

/// The default CSV columns: [`CSV_LEADING_FIELDS`], then the other fields of the
/// selected items, alphabetically (one pass over them before the rows).
async fn csv_columns(
    view: &CrawlView,
    pick: ItemPick,
    limit: usize,
) -> anyhow::Result<Vec<String>> {
    let mut others = std::collections::BTreeSet::new();
    each_item(view, pick, limit, |n, text| {
        for key in parse(n, text)?.keys() {
            if !CSV_LEADING_FIELDS.contains(&key.as_str()) {
                others.insert(key.clone());
            }
        }
        Ok(())
    })
    .await?;
    let leading = CSV_LEADING_FIELDS.iter().map(|&f| f.to_owned());
    Ok(leading.chain(others).collect())
}

/// One JSON line holding exactly `fields`, in that order (null when missing).
fn write_object(
    out: &mut impl Write,
    item: &Map<String, Value>,
    fields: &[String],
) -> anyhow::Result<()> {
    let mut line = String::from("{");
    for (i, name) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(&Value::from(name.as_str()).to_string());
        line.push(':');
        line.push_str(&item.get(name).unwrap_or(&Value::Null).to_string());
    }
    line.push('}');
    writeln!(out, "{line}").map_err(Into::into)
}

/// The text of one CSV cell: strings as they are, `null` and missing as empty,
/// anything else as compact JSON. A string that a spreadsheet would run as a
/// formula (it begins with `=`, `+`, `-`, `@`, a tab or a CR: OWASP's CSV
/// injection advice) gets a `'` in front, so that it is shown as text.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if s.starts_with(FORMULA_STARTS) => format!("'{s}"),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// First characters that make a spreadsheet read a cell as a formula.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One RFC 4180 record, CRLF-terminated.
fn write_row<'a>(out: &mut impl Write, cells: impl Iterator<Item = &'a str>) -> anyhow::Result<()> {
    let mut line = String::new();
    for (i, text) in cells.enumerate() {
        if i > 0 {
            line.push(',');
        }
        push_csv_field(&mut line, text);
    }
    line.push_str("\r\n");
    out.write_all(line.as_bytes()).map_err(Into::into)
}

/// Appends `text` as a CSV field: quoted (quotes doubled) when it holds a comma, a
/// quote, CR or LF.
fn push_csv_field(line: &mut String, text: &str) {
    if text.contains([',', '"', '\r', '\n']) {
        line.push('"');
        line.push_str(&text.replace('"', "\"\""));
        line.push('"');
    } else {
        line.push_str(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(text: &str) -> String {
        let mut line = String::new();
        push_csv_field(&mut line, text);
        line
    }

    #[test]
    fn a_cell_a_spreadsheet_would_run_as_a_formula_is_text() {
        let text = |s: &str| cell(Some(&Value::String(s.into())));
        assert_eq!(
            text("=HYPERLINK(\"http://x\")"),
            "'=HYPERLINK(\"http://x\")"
        );
        for start in ["+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(text(start), format!("'{start}"));
        }
        assert_eq!(text("a=b"), "a=b");
        assert_eq!(
            cell(Some(&Value::from(-3))),
            "-3",
            "numbers are not formulas"
        );
    }

    #[test]
    fn fields_are_quoted_only_when_needed() {
        assert_eq!(field("plain text"), "plain text");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("cr\r"), "\"cr\r\"");
        assert_eq!(field(""), "");
    }

    #[test]
    fn cells_write_nested_values_as_compact_json() {
        assert_eq!(cell(None), "");
        assert_eq!(cell(Some(&Value::Null)), "");
        assert_eq!(cell(Some(&serde_json::json!(200))), "200");
        assert_eq!(cell(Some(&serde_json::json!(true))), "true");
        assert_eq!(cell(Some(&serde_json::json!(["a", 1]))), "[\"a\",1]");
        assert_eq!(cell(Some(&serde_json::json!({"k": "v"}))), "{\"k\":\"v\"}");
    }
}
