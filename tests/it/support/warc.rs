//! Reading the WARC files a crawl wrote: our own small reader (gzip members,
//! fields, blocks, recomputed digests) and the independent one, `warcio`.
//!
//! `warcio` is found through `LEGCRAWL_WARCIO` (the path of the executable)
//! or on `PATH`. When it is missing a test says so loudly and skips that
//! check; with `LEGCRAWL_REQUIRE_WARCIO=1` (as `.ci/run` sets) a missing
//! warcio fails the test instead.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One WARC record.
#[derive(Clone, Debug)]
pub struct Record {
    /// The file it is in.
    pub file: PathBuf,
    /// Its index among the file's records.
    pub index: usize,
    /// Named fields (names as written), in order.
    pub fields: Vec<(String, String)>,
    /// The block (`Content-Length` bytes).
    pub block: Vec<u8>,
}

impl Record {
    /// The value of field `name` (case-insensitive), if present.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `WARC-Type`.
    pub fn kind(&self) -> &str {
        self.field("WARC-Type").unwrap_or("")
    }

    /// `WARC-Target-URI`.
    pub fn target(&self) -> &str {
        self.field("WARC-Target-URI").unwrap_or("")
    }

    /// The HTTP head of the block (up to and including the blank line) and the
    /// payload after it.
    pub fn http(&self) -> (&[u8], &[u8]) {
        match self.block.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(at) => self.block.split_at(at + 4),
            None => (&self.block[..], &[][..]),
        }
    }
}

/// The WARC files in `dir`, sorted by name.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".warc.gz"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The gzip members of a file, each decompressed.
pub fn members(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut rest = bytes;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let mut decoder = flate2::bufread::GzDecoder::new(&mut rest);
        let mut member = Vec::new();
        decoder
            .read_to_end(&mut member)
            .expect("a complete gzip member");
        out.push(member);
    }
    out
}

/// Parses one record (a decompressed member).
fn parse(file: &Path, index: usize, member: &[u8]) -> Record {
    let end = member
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("record header end");
    let head = std::str::from_utf8(&member[..end]).expect("UTF-8 header");
    let mut lines = head.split("\r\n");
    assert_eq!(
        lines.next(),
        Some("WARC/1.1"),
        "{}: version line",
        file.display()
    );
    let fields: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(": ").expect("a field");
            (name.to_owned(), value.to_owned())
        })
        .collect();
    let len: usize = fields
        .iter()
        .find(|(n, _)| n == "Content-Length")
        .and_then(|(_, v)| v.parse().ok())
        .expect("Content-Length");
    let block = member[end + 4..end + 4 + len].to_vec();
    assert_eq!(
        &member[end + 4 + len..],
        b"\r\n\r\n",
        "{}: record {index} ends with two CRLFs right after its block",
        file.display()
    );
    Record {
        file: file.to_owned(),
        index,
        fields,
        block,
    }
}

/// Every record of `file`, checking that each gzip member is one record.
pub fn read(file: &Path) -> Vec<Record> {
    let bytes = std::fs::read(file).expect("read WARC file");
    members(&bytes)
        .iter()
        .enumerate()
        .map(|(i, member)| parse(file, i, member))
        .collect()
}

/// Every record of every WARC file in `dir`, in file order.
pub fn read_dir(dir: &Path) -> Vec<Record> {
    files(dir).iter().flat_map(|f| read(f)).collect()
}

/// `sha1:` + base32 of the SHA-1 of `bytes`, computed here independently of
/// the crate's writer.
pub fn sha1_base32(bytes: &[u8]) -> String {
    use sha1::Digest;
    let digest = sha1::Sha1::digest(bytes);
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::from("sha1:");
    let (mut buffer, mut bits) = (0u32, 0);
    for byte in digest {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    // 160 bits is a multiple of 5: no padding.
    out
}

/// Checks the digests of `record` against its block and payload; they must be there.
pub fn check_digests(record: &Record) {
    // legcrawl digests every record's block, and the payload of every
    // request and response and of an identical-payload revisit: a record
    // without them is a defect, not a record to skip.
    let digest = record.field("WARC-Block-Digest").unwrap_or_else(|| {
        panic!(
            "{} record {} in {} has no WARC-Block-Digest",
            record.kind(),
            record.index,
            record.file.display()
        )
    });
    assert_eq!(
        digest,
        sha1_base32(&record.block),
        "block digest of {} record {} in {}",
        record.kind(),
        record.index,
        record.file.display()
    );
    let identical = record
        .field("WARC-Profile")
        .is_some_and(|p| p.ends_with("identical-payload-digest"));
    if (record.kind() == "revisit" && identical) || matches!(record.kind(), "request" | "response")
    {
        assert!(
            record.field("WARC-Payload-Digest").is_some(),
            "{} record {} ({}) has no WARC-Payload-Digest",
            record.kind(),
            record.index,
            record.target()
        );
    }
    if matches!(record.kind(), "request" | "response")
        && let Some(digest) = record.field("WARC-Payload-Digest")
    {
        assert_eq!(
            digest,
            sha1_base32(record.http().1),
            "payload digest of {} record {} ({})",
            record.kind(),
            record.index,
            record.target()
        );
    }
}

/// The warcio executable, or why there is none. Panics when
/// `LEGCRAWL_REQUIRE_WARCIO=1` and it is missing.
pub fn warcio() -> Option<PathBuf> {
    let found = match std::env::var_os("LEGCRAWL_WARCIO") {
        Some(path) => Some(PathBuf::from(path)).filter(|p| p.is_file()),
        None => std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("warcio"))
                .find(|p| p.is_file())
        }),
    };
    if found.is_none() {
        let why = "warcio not found (set LEGCRAWL_WARCIO to its path or put it on PATH; \
                   `python3 -m venv .venv && .venv/bin/pip install warcio==1.7.5`)";
        super::skip::skipped("LEGCRAWL_REQUIRE_WARCIO", "the warcio checks", why);
    }
    found
}

/// `warcio check` on every file: passes, or the test fails with its report.
/// Returns false when warcio is missing (and not required).
pub fn warcio_check(files: &[PathBuf]) -> bool {
    let Some(warcio) = warcio() else {
        return false;
    };
    for file in files {
        let out = Command::new(&warcio)
            .arg("check")
            .arg("-v")
            .arg(file)
            .output()
            .expect("run warcio check");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "warcio check {}: {}\n{report}{}",
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !report.contains("digest failed"),
            "warcio check {}: {report}",
            file.display()
        );
    }
    true
}

/// `warcio index` of every file: per record its type, target, profile and HTTP
/// status (as warcio reads them), in file order; `None` when warcio is missing.
pub fn warcio_index(files: &[PathBuf]) -> Option<Vec<BTreeMap<String, String>>> {
    let warcio = warcio()?;
    let mut rows = Vec::new();
    for file in files {
        let out = Command::new(&warcio)
            .args([
                "index",
                "-f",
                "warc-type,warc-target-uri,warc-profile,warc-refers-to-target-uri,warc-refers-to-date,http:status",
            ])
            .arg(file)
            .output()
            .expect("run warcio index");
        assert!(
            out.status.success(),
            "warcio index {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let row: BTreeMap<String, String> =
                serde_json::from_str(line).expect("warcio index JSON line");
            rows.push(row);
        }
    }
    Some(rows)
}

/// The `warcinfo` records of every file as warcio reads them (`warcio index`
/// for their offsets, `warcio extract --payload` for their blocks): per
/// record its `name: value` fields, in file order (a name given twice keeps
/// its last value); `None` when warcio is missing.
pub fn warcio_warcinfo(files: &[PathBuf]) -> Option<Vec<BTreeMap<String, String>>> {
    let warcio = warcio()?;
    let mut infos = Vec::new();
    for file in files {
        let out = Command::new(&warcio)
            .args(["index", "-f", "warc-type,offset"])
            .arg(file)
            .output()
            .expect("run warcio index");
        assert!(
            out.status.success(),
            "warcio index {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let row: serde_json::Value = serde_json::from_str(line).expect("warcio index JSON");
            if row["warc-type"] != "warcinfo" {
                continue;
            }
            let offset = match &row["offset"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let out = Command::new(&warcio)
                .args(["extract", "--payload"])
                .arg(file)
                .arg(&offset)
                .output()
                .expect("run warcio extract");
            assert!(
                out.status.success(),
                "warcio extract {} {offset}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let fields = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|line| line.split_once(": "))
                .map(|(name, value)| (name.to_owned(), value.trim().to_owned()))
                .collect();
            infos.push(fields);
        }
    }
    Some(infos)
}
