//! Store settings that the configuration and the command line choose and the
//! store keeps: the seen set's mode. Depends on nothing.

/// How the seen set answers "have we seen this fingerprint?".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DedupMode {
    /// Bloom filter, with every "maybe" confirmed against the exact fingerprints in
    /// sled, so a false positive never loses a page (default).
    #[default]
    Exact,
    /// Bloom filter alone: constant-size state, false positives drop pages.
    Bloom,
}

impl DedupMode {
    /// The name used on the command line and in the state (`exact`, `bloom`).
    pub fn as_str(self) -> &'static str {
        match self {
            DedupMode::Exact => "exact",
            DedupMode::Bloom => "bloom",
        }
    }

    /// Parses [`DedupMode::as_str`] names.
    pub fn parse(name: &str) -> Option<DedupMode> {
        match name {
            "exact" => Some(DedupMode::Exact),
            "bloom" => Some(DedupMode::Bloom),
            _ => None,
        }
    }
}
