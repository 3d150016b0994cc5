//! The registry of leg kinds: a `[[legs]]` table → a boxed [`Leg`].
//!
//! Every leg table has a `kind` and that kind's settings; unknown keys are errors. A
//! kind is built in two steps: its settings struct is deserialized from the spanned
//! table (so type errors point at the value), then the leg's constructor validates
//! them; a [`LegError`] from the constructor is placed at the string value it quotes,
//! or at the `kind` when it quotes none. `stack` and `callback_rules` hold nested leg
//! lists, built recursively. Depends on [`crate::legs`], [`crate::canon`], `span` and
//! `toml`.

use std::ops::Range;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde::de::IntoDeserializer;
use toml::Spanned;
use toml::de::DeValue;

use super::Pattern;
use super::span;
use crate::canon::Rules;
use crate::legs::{
    CallbackRules, Canonicalize, CssItems, FeedLinks, ItemIdSetter, Leg, LegError, LinkExtractor,
    PageItem, Sitemap, Stack, TrapGuard,
};

/// A spanned value of the parsed document.
type Value<'i> = Spanned<DeValue<'i>>;
/// Builds one kind of leg from its table (with `kind` already removed).
type Build = fn(Value<'_>) -> Result<Box<dyn Leg>, Located>;

/// An error at a byte range of the file (turned into line, column and key later).
#[derive(Debug)]
pub(super) struct Located {
    /// Where in the file.
    pub span: Range<usize>,
    /// What is wrong, one line.
    pub message: String,
}

impl Located {
    /// A toml error, placed at its own span or else at `fallback`.
    pub fn toml(error: &toml::de::Error, fallback: Range<usize>) -> Located {
        Located {
            span: error.span().unwrap_or(fallback),
            message: error.message().to_owned(),
        }
    }
}

/// Every leg kind, in the order the documentation lists them.
const KINDS: &[(&str, Build)] = &[
    ("links", |t| simple(t, LinkSettings::build)),
    ("canonicalize", |t| simple(t, CanonicalizeSettings::build)),
    ("page_item", |t| {
        simple(t, |_: NoSettings| Ok(PageItem::new()))
    }),
    ("item_id", |t| simple(t, ItemIdSetter::new)),
    ("trap_guard", |t| simple(t, TrapGuard::new)),
    ("stack", build_stack),
    ("callback_rules", build_callback_rules),
    ("feed", |t| simple(t, FeedLinks::new)),
    ("sitemap", |t| simple(t, Sitemap::new)),
    ("css_items", |t| simple(t, CssItems::new)),
];

/// The names of the leg kinds a crawl file may use.
pub fn kind_names() -> Vec<&'static str> {
    KINDS.iter().map(|(name, _)| *name).collect()
}

/// Settings of the `links` leg ([`LinkExtractor`]). Unset fields come from the crawl's
/// `[scope]` (and the CLI flags over it) when the leg is configured.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinkSettings {
    /// Only follow URLs matching one of these regexes.
    pub allow: Option<Vec<Pattern>>,
    /// Never follow URLs matching one of these regexes.
    pub deny: Option<Vec<Pattern>>,
    /// Hosts links may lead to.
    pub allowed_hosts: Option<Vec<String>>,
    /// Follow `rel=nofollow` links.
    pub follow_nofollow: Option<bool>,
    /// Also follow `img[src]`.
    pub images: bool,
    /// Also follow `iframe[src]`.
    pub iframes: bool,
    /// Emit no links from pages at this depth or deeper.
    pub max_depth: Option<u32>,
    /// Only links inside elements matching these CSS selectors (Scrapy's `restrict_css`).
    pub restrict_css: Vec<String>,
}

impl LinkSettings {
    /// The extractor these settings describe.
    pub fn build(self) -> Result<LinkExtractor, LegError> {
        let mut leg = LinkExtractor::new()
            .images(self.images)
            .iframes(self.iframes)
            .restrict_css(&self.restrict_css)?;
        if let Some(allow) = self.allow {
            leg = leg.allow(&allow)?;
        }
        if let Some(deny) = self.deny {
            leg = leg.deny(&deny)?;
        }
        if let Some(hosts) = self.allowed_hosts {
            leg = leg.allowed_hosts(&hosts)?;
        }
        if let Some(follow) = self.follow_nofollow {
            leg = leg.follow_nofollow(follow);
        }
        if let Some(depth) = self.max_depth {
            leg = leg.max_depth(Some(depth));
        }
        Ok(leg)
    }
}

/// A canonicalization rule by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CanonRule {
    /// [`Rules::sort_query`].
    SortQueryArgs,
    /// [`Rules::normalize_percent`].
    NormalizePercentEncoding,
    /// [`Rules::drop_fragment`].
    DropFragment,
}

/// Settings of the `canonicalize` leg ([`Canonicalize`]).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CanonicalizeSettings {
    /// Exactly these rules; unset: `normalize-percent-encoding` and `drop-fragment`.
    pub rules: Option<Vec<CanonRule>>,
    /// Remove query parameters whose key matches one of these globs (`utm_*`).
    pub strip_query_params: Vec<String>,
}

impl CanonicalizeSettings {
    /// The canonicalizer these settings describe.
    pub fn build(self) -> Result<Canonicalize, LegError> {
        let rules = self
            .rules
            .unwrap_or_else(|| vec![CanonRule::NormalizePercentEncoding, CanonRule::DropFragment]);
        Ok(Canonicalize::with_rules(Rules {
            sort_query: rules.contains(&CanonRule::SortQueryArgs),
            normalize_percent: rules.contains(&CanonRule::NormalizePercentEncoding),
            drop_fragment: rules.contains(&CanonRule::DropFragment),
            strip_query_params: self.strip_query_params,
        }))
    }
}

/// The settings of a kind that has none: any key is an error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}

/// One rule of `callback_rules` (its `legs` are taken out first).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSettings {
    pattern: String,
}

/// Builds a stack from an array of leg tables.
pub(super) fn build_list(value: Value<'_>) -> Result<Stack, Located> {
    let span = value.span();
    let DeValue::Array(array) = value.into_inner() else {
        return Err(Located {
            span,
            message: "expected an array of leg tables".into(),
        });
    };
    array.into_iter().try_fold(Stack::new(), |stack, leg| {
        Ok(stack.push_boxed(build_leg(leg)?))
    })
}

/// Builds one leg from its table.
fn build_leg(value: Value<'_>) -> Result<Box<dyn Leg>, Located> {
    let span = value.span();
    let DeValue::Table(mut table) = value.into_inner() else {
        return Err(Located {
            span,
            message: "a leg must be a table with a `kind`".into(),
        });
    };
    let Some(kind) = table.remove("kind") else {
        return Err(Located {
            span,
            message: "this leg has no `kind`".into(),
        });
    };
    let kind_span = kind.span();
    let name = kind.get_ref().as_str().unwrap_or_default();
    let Some((_, build)) = KINDS.iter().find(|(known, _)| *known == name) else {
        return Err(Located {
            span: kind_span,
            message: format!(
                "unknown leg kind {:?} (known: {})",
                kind.get_ref().as_str().unwrap_or("(not a string)"),
                kind_names().join(", ")
            ),
        });
    };
    build(Spanned::new(kind_span, DeValue::Table(table)))
}

/// Deserializes `S` from `table`, then builds the leg with `new`.
fn simple<S, L>(
    table: Value<'_>,
    new: fn(S) -> Result<L, LegError>,
) -> Result<Box<dyn Leg>, Located>
where
    S: DeserializeOwned,
    L: Leg + 'static,
{
    let leg = new(settings(table.clone())?).map_err(|e| place(&table, &e))?;
    Ok(Box::new(leg))
}

/// Deserializes settings from a table; the table's span is where the leg's `kind` is.
fn settings<S: DeserializeOwned>(table: Value<'_>) -> Result<S, Located> {
    let kind_span = table.span();
    S::deserialize(table.into_deserializer()).map_err(|e| Located::toml(&e, kind_span))
}

/// Places a constructor's error at the string value it quotes (the last-quoted one when
/// it quotes several: messages name the context first, `field "a": bad selector "h1.."`),
/// else at the `kind`.
fn place(table: &Value<'_>, error: &LegError) -> Located {
    let message = error.to_string();
    let quoted_at = |text: &str| match error {
        LegError::BadRegex { pattern, .. } => (text == pattern).then_some(0),
        _ => message.rfind(&format!("{text:?}")),
    };
    let span = match table.get_ref() {
        DeValue::Table(t) => span::entries(t)
            .into_iter()
            .filter_map(|entry| Some((entry.text.as_deref().and_then(quoted_at)?, entry.value)))
            .max_by_key(|(at, _)| *at)
            .map(|(_, span)| span),
        _ => None,
    };
    Located {
        span: span.unwrap_or_else(|| table.span()),
        message,
    }
}

/// Takes `key` out of a leg table (`None` when absent).
fn take<'i>(table: &mut Value<'i>, key: &str) -> Option<Value<'i>> {
    match table.get_mut() {
        DeValue::Table(t) => t.remove(key),
        _ => None,
    }
}

/// `kind = "stack"`: `legs = [...]`, run as a [`Stack`].
fn build_stack(mut table: Value<'_>) -> Result<Box<dyn Leg>, Located> {
    let span = table.span();
    let legs = take(&mut table, "legs");
    settings::<NoSettings>(table)?;
    let legs = legs.ok_or_else(|| Located {
        span,
        message: "a stack needs `legs = [...]`".into(),
    })?;
    Ok(Box::new(build_list(legs)?))
}

/// `kind = "callback_rules"`: `rules = [{ pattern, legs }]`, `otherwise = [...]`.
fn build_callback_rules(mut table: Value<'_>) -> Result<Box<dyn Leg>, Located> {
    let rules = take(&mut table, "rules");
    let otherwise = take(&mut table, "otherwise");
    settings::<NoSettings>(table)?;
    let mut leg = CallbackRules::new();
    if let Some(rules) = rules {
        let rules_span = rules.span();
        let DeValue::Array(rules) = rules.into_inner() else {
            return Err(Located {
                span: rules_span,
                message: "expected an array of rules `{ pattern = \"...\", legs = [...] }`".into(),
            });
        };
        for mut rule in rules {
            let rule_span = rule.span();
            let legs = take(&mut rule, "legs");
            let copy = rule.clone();
            let RuleSettings { pattern } = settings(rule)?;
            let legs = legs.ok_or_else(|| Located {
                span: rule_span,
                message: "a rule needs `legs = [...]`".into(),
            })?;
            leg = leg
                .rule_boxed(&pattern, Box::new(build_list(legs)?))
                .map_err(|e| place(&copy, &e))?;
        }
    }
    if let Some(otherwise) = otherwise {
        leg = leg.otherwise_boxed(Box::new(build_list(otherwise)?));
    }
    Ok(Box::new(leg))
}
