//! `legcrawl dump items`: which items (all, one run's, those stored after a run) and
//! in what shape (JSON lines as stored, or CSV), optionally cut to chosen fields.
//!
//! Items carry sequence numbers that grow by one per stored item, and runs are
//! sequential, so each run record notes the item count at its start
//! ([`RunRecord::first_item`]): run N's items are those from its `first_item` to run
//! N+1's. Runs recorded before that field existed cannot be selected (one-line error).
//! `--run last` and `--since-run last` name the newest run record, so a nightly job
//! need not track run numbers.
//!
//! CSV follows RFC 4180: a header row of the field names, one row per item, CRLF line
//! ends, a field quoted when it holds a comma, a quote, CR or LF, quotes doubled.
//! Strings are written as they are, numbers and booleans as JSON writes them, `null`
//! and missing fields as empty cells, arrays and objects as compact JSON text. The
//! escaper is the few lines below (no dependency for it); the tests read the output
//! back with the `csv` crate.

use std::io::Write;
use std::ops::Range;

use anyhow::Context;
use legcrawl::store::records::RunRecord;
use legcrawl::store::{Each, State};
use serde_json::{Map, Value};

use super::BadInput;

/// The columns of `--format csv` when `--fields` is not given, first; every other
/// top-level field found in the items selected follows, in alphabetical order.
pub const CSV_LEADING_FIELDS: [&str; 4] = ["url", "status", "title", "fetched_at"];

/// The options of `dump items`.
#[derive(Debug, Clone, clap::Args)]
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
    /// Whether `--run` or `--since-run` was given.
    pub fn selects_runs(&self) -> bool {
        self.run.is_some() || self.since_run.is_some()
    }

    /// `--run` and `--since-run` (for `dump --shared`).
    pub fn runs(&self) -> (Option<RunRef>, Option<RunRef>) {
        (self.run, self.since_run)
    }
}

/// A run as `--run` and `--since-run` name it: a number, or `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunRef {
    /// Run N (run numbers start at 1; `--since-run 0` means before every run).
    Number(u64),
    /// The newest run record of the state.
    Last,
}

impl RunRef {
    /// Parses `N` or `last` (clap value parser).
    pub fn parse(text: &str) -> Result<RunRef, String> {
        match text.trim() {
            "last" => Ok(RunRef::Last),
            number => number
                .parse()
                .map(RunRef::Number)
                .map_err(|_| format!("expected a run number or \"last\", got {text:?}")),
        }
    }
}

/// The output formats of `dump items`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// RFC 4180 CSV with a header row.
    Csv,
}

/// Prints the items `args` select, at most `limit` of them. `json` is `dump --json`:
/// harmless with jsonl, a contradiction with csv.
pub fn print_items(
    out: &mut impl Write,
    state: &State,
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
    let range = item_range(state, args)?;
    let limit = limit.unwrap_or(usize::MAX);
    match (args.format, fields) {
        (Format::Jsonl, None) => each_item(state, &range, limit, |_, text| {
            writeln!(out, "{text}").map_err(Into::into)
        }),
        (Format::Jsonl, Some(fields)) => each_item(state, &range, limit, |seq, text| {
            let item = parse(seq, text)?;
            write_object(out, &item, fields)
        }),
        (Format::Csv, fields) => {
            let columns = match fields {
                Some(fields) => fields.to_vec(),
                None => csv_columns(state, &range, limit)?,
            };
            write_row(out, columns.iter().map(String::as_str))?;
            each_item(state, &range, limit, |seq, text| {
                let item = parse(seq, text)?;
                let cells: Vec<String> = columns.iter().map(|c| cell(item.get(c))).collect();
                write_row(out, cells.iter().map(String::as_str))
            })
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

/// The item sequence numbers `--run` / `--since-run` select (all without either).
fn item_range(state: &State, args: &ItemsArgs) -> anyhow::Result<Range<u64>> {
    let end = state.items_len();
    let (wanted, since) = match (args.run, args.since_run) {
        (Some(run), _) => (run, false),
        (None, Some(RunRef::Number(0))) | (None, None) => return Ok(0..end),
        (None, Some(run)) => (run, true),
    };
    let runs = state.runs()?;
    let at = run_index(state, &runs, wanted)?;
    // Where the run after `wanted` started, or the end when `wanted` is the last.
    let next_start = match runs.get(at + 1) {
        Some(next) => first_item(next)?,
        None => end,
    };
    if since {
        return Ok(next_start..end);
    }
    Ok(first_item(&runs[at])?..next_start)
}

/// Where `wanted` is in `runs` (oldest first), or one line saying which runs there
/// are.
pub(super) fn run_index(
    state: &State,
    runs: &[RunRecord],
    wanted: RunRef,
) -> anyhow::Result<usize> {
    let at = match wanted {
        RunRef::Last => runs.len().checked_sub(1),
        RunRef::Number(n) => runs.iter().position(|r| r.id == n),
    };
    at.ok_or_else(|| {
        let dir = state.dir().display();
        let message = match (wanted, runs.first(), runs.last()) {
            (RunRef::Number(n), Some(first), Some(last)) => format!(
                "no run {n} in {dir} (runs {} to {}; see legcrawl dump runs)",
                first.id, last.id
            ),
            (RunRef::Number(n), _, _) => format!("no run {n} in {dir} (no runs yet)"),
            (RunRef::Last, _, _) => format!("no runs yet in {dir}, so no last run"),
        };
        BadInput(message).into()
    })
}

/// Where `run`'s items start; a one-line error for runs recorded without it.
fn first_item(run: &RunRecord) -> anyhow::Result<u64> {
    run.first_item.ok_or_else(|| {
        BadInput(format!(
            "run {} was recorded by an older legcrawl that did not note where its items start; \
             --run and --since-run work for the runs recorded since",
            run.id
        ))
        .into()
    })
}

/// Calls `each` for the durable items in `range`, at most `limit`, stopping at the
/// first error.
fn each_item(
    state: &State,
    range: &Range<u64>,
    limit: usize,
    mut each: impl FnMut(u64, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut left = limit;
    state.deliver(&mut Each::new(range.start, |seq, text| {
        if seq >= range.end || left == 0 {
            return Ok(false);
        }
        left -= 1;
        each(seq, text).map(|()| true)
    }))
}

/// A stored item as an object; an item that is not one is a corrupt record.
fn parse(seq: u64, text: &str) -> anyhow::Result<Map<String, Value>> {
    serde_json::from_str(text).with_context(|| format!("item {seq} is not a JSON object"))
}

/// The default CSV columns: [`CSV_LEADING_FIELDS`], then the other fields of the
/// selected items, alphabetically (one pass over them before the rows).
fn csv_columns(state: &State, range: &Range<u64>, limit: usize) -> anyhow::Result<Vec<String>> {
    let mut others = std::collections::BTreeSet::new();
    each_item(state, range, limit, |seq, text| {
        for key in parse(seq, text)?.keys() {
            if !CSV_LEADING_FIELDS.contains(&key.as_str()) {
                others.insert(key.clone());
            }
        }
        Ok(())
    })?;
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
    fn runs_are_numbers_or_last() {
        assert_eq!(RunRef::parse("last"), Ok(RunRef::Last));
        assert_eq!(RunRef::parse("0"), Ok(RunRef::Number(0)));
        assert_eq!(RunRef::parse("42"), Ok(RunRef::Number(42)));
        for bad in ["", "-1", "Last", "latest", "1.5", "2 runs"] {
            assert_eq!(
                RunRef::parse(bad),
                Err(format!("expected a run number or \"last\", got {bad:?}"))
            );
        }
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
