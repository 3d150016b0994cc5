//! [`CssItems`]: items whose fields are read with CSS selectors (the `scraper` crate).
//!
//! Runs only on 2xx HTML responses ([`Response::is_html`]). The body is decoded with
//! [`crate::charset`] ([`Response::text`]) and parsed into a DOM by html5ever through
//! `scraper` (this leg, unlike the link extractor, needs a tree).
//!
//! With an `item` selector, one item is made per matching element and field selectors
//! match among that element's descendants; without one, one item is made per page and
//! field selectors match in the whole document. Each field reads, from its first match
//! (or every match with `all`), either the text (all descendant text nodes joined, then
//! whitespace trimmed and collapsed to single spaces) or one attribute (trimmed; an
//! `href` or `src` is resolved against the document's first `<base href>` or the
//! response URL, and kept as written if it does not resolve). A field with no value is
//! `null` (`[]` with `all`): no match, or the attribute absent on every match. An item
//! with a `required` field without value is dropped. Every item gets `url` (the
//! response URL) unless a field is named `url`. Items come in document order.
//!
//! Depends on [`crate::item`], [`crate::response`], [`crate::charset`] and `scraper`.
//!
//! # Example
//! ```
//! use legcrawl::legs::{self, CssItems, CssItemsSettings, FieldSettings};
//! # use legcrawl::{request::Request, response::Response};
//! # let mut headers = http::HeaderMap::new();
//! # headers.insert(http::header::CONTENT_TYPE, "text/html".parse().unwrap());
//! # let response = Response {
//! #     request: Request::get("http://dmoz.example/Computers/"),
//! #     url: url::Url::parse("http://dmoz.example/Computers/").unwrap(),
//! #     status: 200,
//! #     headers,
//! #     body: bytes::Bytes::from_static(br#"<div class="title-and-desc">
//! #       <a href="http://site.example/"><div class="site-title">Site</div></a>
//! #       <div class="site-descr">  A   fine
//! #         site. </div></div>"#),
//! #     truncated: false,
//! #     fetched_at: std::time::UNIX_EPOCH,
//! #     kept: false,
//! # };
//! let field = |name: &str, selector: &str, attr: Option<&str>| FieldSettings {
//!     name: name.into(),
//!     selector: selector.into(),
//!     attr: attr.map(Into::into),
//!     ..FieldSettings::default()
//! };
//! let leg = CssItems::new(CssItemsSettings {
//!     item: Some(".title-and-desc".into()),
//!     fields: vec![
//!         field("name", ".site-title", None),
//!         field("description", ".site-descr", None),
//!         field("link", "a", Some("href")),
//!     ],
//! })?;
//! let items = legs::run(&leg, &response).items;
//! assert_eq!(items[0]["name"], "Site");
//! assert_eq!(items[0]["description"], "A fine site.");
//! assert_eq!(items[0]["link"], "http://site.example/");
//! assert_eq!(items[0]["url"], "http://dmoz.example/Computers/");
//! # Ok::<(), legcrawl::legs::LegError>(())
//! ```

use scraper::error::SelectorErrorKind;
use scraper::{ElementRef, Html, Selector};
use serde_json::Value;
use url::Url;

use super::{Leg, LegError, Output};
use crate::item::Item;
use crate::response::Response;

/// The name used in [`LegError`]s.
const LEG: &str = "css_items";

/// The settings of [`CssItems`], as read from the config file.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CssItemsSettings {
    /// CSS selector of the item container (one item per match, e.g. `.title-and-desc`);
    /// `None` makes one item per page. Default `None`.
    pub item: Option<String>,
    /// The fields of each item, at least one. Default empty (rejected by [`CssItems::new`]).
    pub fields: Vec<FieldSettings>,
}

/// One field of a [`CssItemsSettings`].
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSettings {
    /// The item key; non-empty and unique among the fields. Required.
    pub name: String,
    /// CSS selector, matched among the container's descendants (or the whole page).
    /// Required.
    pub selector: String,
    /// Attribute to read (`href`, `src` are made absolute); `None` reads the text.
    /// Default `None`.
    #[serde(default)]
    pub attr: Option<String>,
    /// Read every match into an array instead of the first match. Default `false`.
    #[serde(default)]
    pub all: bool,
    /// Drop the item when this field has no value. Default `false`.
    #[serde(default)]
    pub required: bool,
}

/// Extracts items with CSS selectors (see the module doc).
#[derive(Clone, Debug)]
pub struct CssItems {
    item: Option<Selector>,
    fields: Vec<Field>,
    /// True when no field is named `url`, so the response URL is added.
    add_url: bool,
}

/// A validated [`FieldSettings`].
#[derive(Clone, Debug)]
struct Field {
    name: String,
    selector: Selector,
    attr: Option<String>,
    /// The attribute is `href` or `src`: resolve it to an absolute URL.
    is_link: bool,
    all: bool,
    required: bool,
}

impl CssItems {
    /// Builds the leg; fails with [`LegError::Invalid`] naming a bad selector (and its
    /// field), an empty or repeated field name, an empty `attr`, or an empty field list.
    pub fn new(settings: CssItemsSettings) -> Result<CssItems, LegError> {
        let item = match &settings.item {
            Some(selector) => Some(parse_selector("item", selector)?),
            None => None,
        };
        if settings.fields.is_empty() {
            return Err(invalid(
                "fields is empty: give at least one field".to_owned(),
            ));
        }
        let mut fields: Vec<Field> = Vec::with_capacity(settings.fields.len());
        for field in settings.fields {
            if field.name.is_empty() {
                return Err(invalid(format!(
                    "field with selector {:?} has no name",
                    field.selector
                )));
            }
            if fields.iter().any(|f| f.name == field.name) {
                return Err(invalid(format!("field {:?} is given twice", field.name)));
            }
            if field.attr.as_deref().is_some_and(|a| a.trim().is_empty()) {
                return Err(invalid(format!("field {:?} has an empty attr", field.name)));
            }
            let selector = parse_selector(&format!("field {:?}", field.name), &field.selector)?;
            let attr = field.attr.map(|a| a.trim().to_ascii_lowercase());
            fields.push(Field {
                is_link: matches!(attr.as_deref(), Some("href" | "src")),
                name: field.name,
                selector,
                attr,
                all: field.all,
                required: field.required,
            });
        }
        let add_url = !fields.iter().any(|f| f.name == "url");
        Ok(CssItems {
            item,
            fields,
            add_url,
        })
    }

    /// The item read from `scope` (an element, or the whole document), unless a
    /// required field has no value.
    fn extract(&self, doc: &Html, scope: Option<ElementRef<'_>>, ctx: &Context) -> Option<Item> {
        let mut item = Item::new();
        for field in &self.fields {
            let limit = if field.all { usize::MAX } else { 1 };
            let matches: Vec<ElementRef<'_>> = match scope {
                Some(element) => element.select(&field.selector).take(limit).collect(),
                None => doc.select(&field.selector).take(limit).collect(),
            };
            let values: Vec<String> = matches
                .into_iter()
                .filter_map(|element| field.value(element, ctx))
                .collect();
            if field.required && values.is_empty() {
                return None;
            }
            let value = if field.all {
                Value::Array(values.into_iter().map(Value::String).collect())
            } else {
                values.into_iter().next().map_or(Value::Null, Value::String)
            };
            item.insert(field.name.clone(), value);
        }
        if self.add_url {
            item.insert("url".to_owned(), Value::String(ctx.url.clone()));
        }
        Some(item)
    }
}

impl Field {
    /// The field's value on one matched element, if it has one.
    fn value(&self, element: ElementRef<'_>, ctx: &Context) -> Option<String> {
        let Some(attr) = &self.attr else {
            return Some(collapse_whitespace(element.text()));
        };
        let raw = element.value().attr(attr)?.trim();
        if !self.is_link {
            return Some(raw.to_owned());
        }
        Some(
            ctx.base
                .join(raw)
                .map_or_else(|_| raw.to_owned(), String::from),
        )
    }
}

/// What every field of one page resolves against.
struct Context {
    /// The response URL, as put into items.
    url: String,
    /// The base for `href`/`src`: the first `<base href>`, or the response URL.
    base: Url,
}

impl Leg for CssItems {
    fn process_response(&self, response: &Response, out: &mut Output) {
        if !response.is_content() || !response.is_html() {
            return;
        }
        let text = response.text();
        let doc = Html::parse_document(&text);
        let ctx = Context {
            url: response.url.to_string(),
            base: document_base(&doc, &response.url),
        };
        match &self.item {
            Some(selector) => {
                for element in doc.select(selector) {
                    out.items.extend(self.extract(&doc, Some(element), &ctx));
                }
            }
            None => out.items.extend(self.extract(&doc, None, &ctx)),
        }
    }
}

/// The first `<base href>` of the document resolved against `page`, or `page`.
fn document_base(doc: &Html, page: &Url) -> Url {
    let found = Selector::parse("base[href]").ok().and_then(|selector| {
        let href = doc.select(&selector).next()?.value().attr("href")?;
        page.join(href.trim()).ok()
    });
    found.unwrap_or_else(|| page.clone())
}

/// The pieces joined, trimmed, with every whitespace run made one space.
fn collapse_whitespace<'a>(pieces: impl Iterator<Item = &'a str>) -> String {
    let joined: String = pieces.collect();
    let mut out = String::with_capacity(joined.len());
    for word in joined.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

fn parse_selector(what: &str, selector: &str) -> Result<Selector, LegError> {
    Selector::parse(selector).map_err(|error| {
        invalid(format!(
            "{what}: bad selector {selector:?}: {}",
            selector_mistake(&error)
        ))
    })
}

/// Why a selector did not parse, in words (scraper's own text for some kinds is
/// "Unexpected error occurred. Please report this to the developer" and a Rust
/// debug dump).
fn selector_mistake(error: &SelectorErrorKind) -> &'static str {
    use selectors::parser::SelectorParseErrorKind as Kind;
    match error {
        SelectorErrorKind::UnexpectedToken => {
            "unexpected character (a stray bracket, quote or dot?)"
        }
        SelectorErrorKind::EndOfLine => "something is missing at its end, or inside its [ ] or ( )",
        SelectorErrorKind::InvalidAtRule
        | SelectorErrorKind::InvalidAtRuleBody
        | SelectorErrorKind::QualRuleInvalid => "not a selector",
        SelectorErrorKind::TooManyNestedBlocks => "nested too deeply",
        SelectorErrorKind::ExpectedColonOnPseudoElement
        | SelectorErrorKind::ExpectedIdentityOnPseudoElement => {
            "a pseudo-element is written '::name'"
        }
        SelectorErrorKind::UnexpectedSelectorParseError(kind) => match kind {
            Kind::NoQualifiedNameInAttributeSelector | Kind::InvalidQualNameInAttr => {
                "an attribute selector needs an attribute name, as in [href] or [data-id=\"7\"]"
            }
            Kind::UnexpectedTokenInAttributeSelector | Kind::BadValueInAttr => {
                "write an attribute selector as [name], [name=value] or [name=\"a value\"]"
            }
            Kind::EmptySelector => "the selector is empty",
            Kind::DanglingCombinator => "a combinator (>, +, ~) has nothing on one side",
            Kind::ClassNeedsIdent => "'.' must be followed by a class name",
            Kind::PseudoElementExpectedColon
            | Kind::PseudoElementExpectedIdent
            | Kind::NoIdentForPseudo => "':' must be followed by a pseudo-class name",
            Kind::UnsupportedPseudoClassOrElement => "unsupported pseudo-class or pseudo-element",
            Kind::UnexpectedIdent => "unexpected name",
            Kind::ExpectedNamespace | Kind::ExpectedBarInAttr => {
                "namespaces are not supported; drop the 'prefix|'"
            }
            Kind::ExplicitNamespaceUnexpectedToken => "unexpected text after '|'",
            Kind::NonCompoundSelector
            | Kind::NonPseudoElementAfterSlotted
            | Kind::InvalidPseudoElementAfterSlotted
            | Kind::InvalidPseudoElementInsideWhere
            | Kind::InvalidState => "this selector is not allowed in this position",
        },
    }
}

fn invalid(message: String) -> LegError {
    LegError::Invalid { leg: LEG, message }
}

#[cfg(test)]
#[path = "css_items_tests.rs"]
mod tests;
