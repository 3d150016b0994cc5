//! The state's format: its version, the marker file that says it, and the
//! build to use for an older one. At the bottom of the store: depends on
//! nothing.

/// Version of the state layout as a whole. Format 5: requests packed per
/// host (see `frontier`), the exact seen set and the page ids in sorted run
/// files (`exact`, `pageids`), page records in blocks by page id (`pages`),
/// the due index in chunks by due second (`due`), and a Bloom filter that
/// grows with the crawl unless `--bloom-bits` fixed its size (`sizing`).
/// Only this format is read: no release ever wrote an older one, so no
/// upgrade is kept, and a state of formats 2 to 4 is refused in one line
/// that names [`LAST_BUILD_READING_OLD_FORMATS`].
pub const STATE_FORMAT: u32 = 5;
/// The last build (a commit of legcrawl's repository) that reads, and
/// upgrades, states of formats 2 to 4: `cargo install --git <repo> --rev`
/// it, open the state once, and it is format 5.
pub const LAST_BUILD_READING_OLD_FORMATS: &str = "4a61258";
/// Name of the marker file that makes a directory legcrawl state.
pub const MARKER_FILE: &str = "LEGCRAWL";
