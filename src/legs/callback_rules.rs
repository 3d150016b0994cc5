//! [`CallbackRules`]: dispatches each response to a leg chosen by URL regex (the SEP's
//! `CallbackRules`).
//!
//! Rules are tried in declared order against the response's final URL
//! ([`Response::url`]) with [`Regex::is_match`] (a search, as Python's `re.search`); the
//! first rule that matches *owns* the response. A response no rule matches is owned by
//! the fallback leg ([`CallbackRules::otherwise`]; by default none: nothing happens).
//!
//! # Decision: the owner runs all three hooks for its response
//! SEP-016 passes every request and item through every leg's hooks. Here the legs of a
//! rule exist only for the pages that rule matches — a rule is a Scrapy callback — so
//! for one response, `process_response`, `process_request` and `process_item` all go to
//! the owner alone (which may be a [`super::Stack`], inside which SEP-016 order holds).
//! The other rules' legs are not consulted: an item-id setter or a request filter in
//! the `/product/` rule never touches the items or requests of a category page. Legs
//! that must see everything belong beside the `CallbackRules`, not inside it. Requests
//! and items produced by sibling legs for the same response still pass through the
//! owner's hooks, as SEP-016 wants. `configure` reaches every rule's leg and the
//! fallback, in declared order.
//!
//! Depends on [`crate::legs`] and `regex`.

use regex::Regex;

use super::{Leg, LegError, Output};
use crate::config::CrawlConfig;
use crate::item::Item;
use crate::request::Request;
use crate::response::Response;

/// The name used in [`LegError`]s.
const LEG: &str = "callback_rules";

/// Ordered (URL regex → leg) rules plus a fallback leg (see the module doc).
///
/// ```
/// use legcrawl::legs::{self, CallbackRules, LinkExtractor, PageItem};
///
/// let rules = CallbackRules::new()
///     .rule("/product/", PageItem::new())
///     .unwrap()
///     .otherwise(LinkExtractor::new());
/// assert_eq!(rules.len(), 1);
/// assert!(CallbackRules::new().rule("(", PageItem::new()).is_err());
/// ```
#[derive(Default)]
pub struct CallbackRules {
    rules: Vec<(Regex, Box<dyn Leg>)>,
    fallback: Option<Box<dyn Leg>>,
}

impl CallbackRules {
    /// No rules and no fallback: a leg that does nothing.
    pub fn new() -> CallbackRules {
        CallbackRules::default()
    }

    /// Appends a rule: responses whose URL matches `pattern` (and no earlier rule) go
    /// to `leg`.
    pub fn rule(self, pattern: &str, leg: impl Leg + 'static) -> Result<CallbackRules, LegError> {
        self.rule_boxed(pattern, Box::new(leg))
    }

    /// [`CallbackRules::rule`] for a leg chosen at run time.
    pub fn rule_boxed(
        mut self,
        pattern: &str,
        leg: Box<dyn Leg>,
    ) -> Result<CallbackRules, LegError> {
        let regex = Regex::new(pattern).map_err(|source| LegError::BadRegex {
            leg: LEG,
            pattern: pattern.to_owned(),
            source,
        })?;
        self.rules.push((regex, leg));
        Ok(self)
    }

    /// The leg for responses no rule matches (replacing any earlier one).
    pub fn otherwise(self, leg: impl Leg + 'static) -> CallbackRules {
        self.otherwise_boxed(Box::new(leg))
    }

    /// [`CallbackRules::otherwise`] for a leg chosen at run time.
    pub fn otherwise_boxed(mut self, leg: Box<dyn Leg>) -> CallbackRules {
        self.fallback = Some(leg);
        self
    }

    /// Number of rules (the fallback not counted).
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The leg that owns `response`: the first matching rule's, else the fallback.
    fn owner(&self, response: &Response) -> Option<&dyn Leg> {
        let url = response.url.as_str();
        self.rules
            .iter()
            .find(|(regex, _)| regex.is_match(url))
            .map(|(_, leg)| leg.as_ref())
            .or(self.fallback.as_deref())
    }
}

impl std::fmt::Debug for CallbackRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let patterns: Vec<&str> = self.rules.iter().map(|(re, _)| re.as_str()).collect();
        f.debug_struct("CallbackRules")
            .field("rules", &patterns)
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl Leg for CallbackRules {
    /// Configures every rule's leg, then the fallback; stops at the first error.
    fn configure(&mut self, config: &CrawlConfig) -> Result<(), LegError> {
        for (_, leg) in &mut self.rules {
            leg.configure(config)?;
        }
        match &mut self.fallback {
            Some(leg) => leg.configure(config),
            None => Ok(()),
        }
    }

    fn process_response(&self, response: &Response, out: &mut Output) {
        if let Some(leg) = self.owner(response) {
            leg.process_response(response, out);
        }
    }

    fn process_request(&self, request: Request, response: &Response) -> Option<Request> {
        match self.owner(response) {
            Some(leg) => leg.process_request(request, response),
            None => Some(request),
        }
    }

    fn process_item(&self, item: Item, response: &Response) -> Option<Item> {
        match self.owner(response) {
            Some(leg) => leg.process_item(item, response),
            None => Some(item),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legs::{Stack, filter_requests, map_items, run, test_response};

    /// Emits one item `{"leg": name}` and one request to `/from-{name}`.
    struct Emit(&'static str);
    impl Leg for Emit {
        fn process_response(&self, response: &Response, out: &mut Output) {
            let mut item = Item::new();
            item.insert("leg".into(), self.0.into());
            out.items.push(item);
            let url = format!("http://shop.test/from-{}", self.0);
            out.push_request(Request::follow(&response.request, url));
        }
    }

    fn shop() -> CallbackRules {
        let tag = map_items(|mut item| {
            item.insert("tagged".into(), true.into());
            Some(item)
        });
        CallbackRules::new()
            .rule("/product/", Stack::new().push(Emit("product")).push(tag))
            .unwrap()
            .rule("/(product|category)/", Emit("category"))
            .unwrap()
            .otherwise(Emit("other"))
    }

    fn legs_of<'a>(out: &'a Output<'_>) -> Vec<&'a str> {
        out.items
            .iter()
            .map(|i| i["leg"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn first_matching_rule_wins_then_fallback() {
        let rules = shop();
        let page = |url| run(&rules, &test_response(url, Some("text/html"), ""));
        assert_eq!(legs_of(&page("http://shop.test/product/1")), ["product"]);
        assert_eq!(legs_of(&page("http://shop.test/category/a")), ["category"]);
        assert_eq!(legs_of(&page("http://shop.test/about")), ["other"]);
        let bare = CallbackRules::new().rule("/x", Emit("x")).unwrap();
        let out = run(&bare, &test_response("http://shop.test/", None, ""));
        assert!(out.items.is_empty() && out.requests.is_empty());
    }

    #[test]
    fn only_the_owner_processes_requests_and_items() {
        let drop_all = filter_requests(|_| false);
        let rules = shop().rule("never-matches-earlier", drop_all).unwrap();
        // The tagging leg of the product rule never sees a category page's items.
        let category = run(
            &Stack::new().push(Emit("sibling")).push(rules),
            &test_response("http://shop.test/category/a", None, ""),
        );
        assert_eq!(legs_of(&category), ["sibling", "category"]);
        assert!(category.items.iter().all(|i| !i.contains_key("tagged")));
        assert_eq!(
            category.requests.len(),
            2,
            "the dropping rule does not own it"
        );
        // On a product page the owner's hooks also see the sibling's item.
        let product = run(
            &Stack::new().push(Emit("sibling")).push(shop()),
            &test_response("http://shop.test/product/1", None, ""),
        );
        assert!(product.items.iter().all(|i| i["tagged"] == true));
    }

    #[test]
    fn configure_reaches_every_rule_and_the_fallback() {
        struct Fails;
        impl Leg for Fails {
            fn configure(&mut self, _config: &CrawlConfig) -> Result<(), LegError> {
                Err(LegError::Invalid {
                    leg: "fails",
                    message: "always".into(),
                })
            }
        }
        let mut in_fallback = CallbackRules::new()
            .rule("/a", Emit("a"))
            .unwrap()
            .otherwise(Fails);
        assert!(in_fallback.configure(&CrawlConfig::default()).is_err());
        let mut in_rule = CallbackRules::new().rule("/b", Fails).unwrap();
        assert!(in_rule.configure(&CrawlConfig::default()).is_err());
    }

    #[test]
    fn bad_pattern_names_the_leg_and_pattern() {
        let error = CallbackRules::new().rule("[", Emit("x")).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("leg callback_rules: bad regex \"[\"")
        );
    }
}
