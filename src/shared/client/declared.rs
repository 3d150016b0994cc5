//! Tests that every call of a crawl script declares in KEYS each fixed key
//! the script names (`K('name')` in `lua/common.lua` and its own file), and
//! the lease records it is given, all in one Redis Cluster slot; that the
//! only keys a script builds itself (`found(...)`) are the host queues, lease
//! records and seen-set buckets it cannot know ahead; and that `lua/seen.lua`
//! finds a fingerprint's bucket as `lua/common.lua` does.

use std::collections::BTreeSet;

use super::{COMMON_KEYS, CrawlScript, Scripts, declared_keys};
use crate::shared::Keys;

/// Each script, and whether its call site passes lease tokens (whose
/// `lease:TOKEN` records the script then names with `K`).
fn call_sites(s: &Scripts) -> Vec<(&'static str, &CrawlScript, bool)> {
    vec![
        ("seeds", &s.seeds, false),
        ("unpark", &s.unpark, false),
        ("policy", &s.policy, false),
        ("cycle", &s.cycle, false),
        ("lease", &s.lease, false),
        ("renew", &s.renew, true),
        ("release", &s.release, true),
        ("beat", &s.beat, false),
        ("complete", &s.complete, true),
        ("links", &s.links, true),
    ]
}

/// The names in `K('name')` calls of `source`, and whether it names a
/// declared lease record (`K('lease:' .. token)`).
fn named_keys(source: &str) -> (BTreeSet<String>, bool) {
    let mut names = BTreeSet::new();
    let mut leases = false;
    for part in source.split("K('").skip(1) {
        let name = part.split('\'').next().unwrap_or("");
        if name == "lease:" {
            leases = true;
        } else {
            names.insert(name.to_owned());
        }
    }
    (names, leases)
}

/// The hash tag of a key as Redis Cluster takes it: between the first `{`
/// and the next `}`, when not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')? + open + 1;
    (close > open + 1).then(|| &key[open + 1..close])
}

#[test]
fn every_fixed_key_a_script_names_is_declared_by_its_call() {
    let scripts = Scripts::new();
    for (name, script, tokens) in call_sites(&scripts) {
        let (named, leases) = named_keys(script.source);
        let declared: BTreeSet<String> = COMMON_KEYS
            .iter()
            .chain(script.keys)
            .map(|k| (*k).to_owned())
            .collect();
        assert_eq!(named, declared, "{name}.lua: named vs declared keys");
        assert_eq!(
            leases, tokens,
            "{name}.lua names lease records with K iff its call passes tokens"
        );
    }
}

#[test]
fn keys_a_script_builds_itself_are_host_queues_lease_records_and_seen_buckets() {
    let scripts = Scripts::new();
    for (name, script, _) in call_sites(&scripts) {
        // `P ..` only in the meta check, K and found.
        assert_eq!(script.source.matches("P .. ").count(), 3, "{name}.lua");
        for part in script.source.split("found('").skip(1) {
            let kind = part.split('\'').next().unwrap_or("");
            assert!(
                matches!(
                    kind,
                    "q:" | "qp:" | "parked:" | "parkedp:" | "lease:" | "s:"
                ),
                "{name}.lua builds a {kind:?} key itself"
            );
        }
    }
}

#[test]
fn a_call_declares_meta_first_and_every_key_in_the_crawls_slot() {
    let keys = Keys::new("docs");
    let scripts = Scripts::new();
    for (name, script, tokens) in call_sites(&scripts) {
        let given: &[u64] = if tokens {
            &[7, 1_700_000_000_000_000]
        } else {
            &[]
        };
        let declared = declared_keys(&keys, script, given);
        assert_eq!(declared[0], "legcrawl:{docs}:meta", "{name}");
        assert!(
            declared.iter().all(|k| hash_tag(k) == Some("docs")),
            "{name}: {declared:?}"
        );
        for token in given {
            assert!(
                declared.contains(&keys.lease(*token)),
                "{name}: lease {token}"
            );
        }
        let unique: BTreeSet<&String> = declared.iter().collect();
        assert_eq!(unique.len(), declared.len(), "{name}: a key declared twice");
    }
}

/// The text of `local function NAME` in `source`, to its closing `end` at
/// the start of a line.
fn lua_function<'a>(source: &'a str, name: &str) -> &'a str {
    let start = source
        .find(&format!("local function {name}("))
        .unwrap_or_else(|| panic!("no function {name}"));
    let end = source[start..]
        .find("\nend\n")
        .unwrap_or_else(|| panic!("function {name} has no end"));
    &source[start..start + end]
}

#[test]
fn the_seen_lookup_finds_buckets_as_the_scripts_that_add_to_them() {
    let common = include_str!("../lua/common.lua");
    let seen = include_str!("../lua/seen.lua");
    for name in ["seen_hash", "seen_bucket"] {
        assert_eq!(
            lua_function(common, name),
            lua_function(seen, name),
            "{name} differs between common.lua and seen.lua"
        );
    }
}
