use serde_json::json;

use super::*;
use crate::legs::{run, test_response};

const DMOZ: &str = include_str!("../../tests/fixtures/legs/dmoz.html");
const PAGE: &str = "http://www.dmoz.example/Computers/Programming/Languages/Python/Books/";

fn field(name: &str, selector: &str) -> FieldSettings {
    FieldSettings {
        name: name.into(),
        selector: selector.into(),
        ..FieldSettings::default()
    }
}

/// The scrapy-redis dmoz example's `parse_directory`.
fn dmoz() -> CssItemsSettings {
    CssItemsSettings {
        item: Some(".title-and-desc".into()),
        fields: vec![
            field("name", ".site-title"),
            field("description", ".site-descr"),
            FieldSettings {
                attr: Some("href".into()),
                ..field("link", "a")
            },
        ],
    }
}

fn items(
    settings: CssItemsSettings,
    content_type: Option<&str>,
    body: impl Into<bytes::Bytes>,
) -> Vec<Item> {
    let leg = CssItems::new(settings).unwrap();
    let out = run(&leg, &test_response(PAGE, content_type, body));
    assert!(out.requests.is_empty());
    out.items
}

#[test]
fn dmoz_directory_page() {
    let found = items(dmoz(), Some("text/html"), DMOZ);
    assert_eq!(found.len(), 4);
    assert_eq!(
        serde_json::Value::Object(found[0].clone()),
        json!({
            "name": "Dive Into Python 3",
            "description": "By Mark Pilgrim, Guide to Python 3 and its differences from Python 2. \
                            Each chapter starts with a real, complete code sample.",
            "link": "http://www.diveintopython.example/",
            "url": PAGE,
        })
    );
    // Entities decoded, inline markup flattened, links resolved against <base href>.
    assert_eq!(found[1]["name"], "Free & Open Python Books");
    assert_eq!(
        found[1]["link"],
        "http://www.dmoz.example/Computers/Programming/Languages/Python/Books/free-python"
    );
    // No match is null; an empty element is an empty text.
    assert_eq!(found[2]["link"], serde_json::Value::Null);
    assert_eq!(found[2]["description"], "");
    // Unclosed markup: html5ever's recovery nests the description in the title.
    assert_eq!(
        found[3]["link"],
        "http://www.dmoz.example/Reference/Python-Cookbook"
    );
    assert_eq!(found[3]["description"], "Recipes, unclosed");
    assert!(
        found[3]["name"]
            .as_str()
            .unwrap()
            .starts_with("Python Cookbook")
    );
}

#[test]
fn required_fields_drop_items() {
    let mut settings = dmoz();
    settings.fields[2].required = true;
    let found = items(settings, Some("text/html"), DMOZ);
    assert_eq!(found.len(), 3);
    assert!(found.iter().all(|item| item["link"].is_string()));
}

#[test]
fn one_item_per_page_with_all_and_own_url_field() {
    let settings = CssItemsSettings {
        item: None,
        fields: vec![
            field("title", "title"),
            FieldSettings {
                all: true,
                ..field("names", ".site-title")
            },
            FieldSettings {
                all: true,
                attr: Some("HREF".into()),
                ..field("links", "a[href]")
            },
            FieldSettings {
                all: true,
                ..field("none", "table")
            },
            FieldSettings {
                attr: Some("lang".into()),
                ..field("url", "html")
            },
        ],
    };
    let found = items(settings, Some("text/html"), DMOZ);
    assert_eq!(found.len(), 1);
    let item = &found[0];
    assert!(
        item["title"]
            .as_str()
            .unwrap()
            .starts_with("DMOZ - Computers")
    );
    assert_eq!(item["names"].as_array().unwrap().len(), 4);
    assert_eq!(
        item["links"][2],
        "http://www.dmoz.example/Reference/Python-Cookbook"
    );
    assert_eq!(item["none"], json!([]));
    // A field named `url` replaces the response URL.
    assert_eq!(item["url"], "en");
}

#[test]
fn koi8r_page_decoded_by_meta() {
    let html = "<html><head><meta charset=koi8-r></head><body>\
                <div class=t><h2> Привет,\n  мир </h2><a href='/статья'>x</a></div></body></html>";
    let (body, _, unmappable) = encoding_rs::KOI8_R.encode(html);
    assert!(!unmappable);
    let settings = CssItemsSettings {
        item: Some(".t".into()),
        fields: vec![
            field("h", "h2"),
            FieldSettings {
                attr: Some("href".into()),
                ..field("a", "a")
            },
        ],
    };
    let found = items(settings, None, body.into_owned());
    assert_eq!(found[0]["h"], "Привет, мир");
    let expected = Url::parse("http://www.dmoz.example/статья").unwrap();
    assert_eq!(found[0]["a"], expected.as_str());
}

#[test]
fn only_successful_html() {
    assert!(items(dmoz(), Some("application/json"), DMOZ).is_empty());
    let leg = CssItems::new(dmoz()).unwrap();
    let mut response = test_response(PAGE, Some("text/html"), DMOZ);
    response.status = 404;
    assert!(run(&leg, &response).items.is_empty());
}

#[test]
fn empty_and_garbage_documents() {
    assert!(items(dmoz(), Some("text/html"), "").is_empty());
    assert!(items(dmoz(), Some("text/html"), "<<<>>><div class=").is_empty());
    let page = CssItemsSettings {
        item: None,
        fields: vec![field("h1", "h1")],
    };
    let found = items(page, Some("text/html"), "");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["h1"], serde_json::Value::Null);
    assert_eq!(found[0]["url"], PAGE);
}

#[test]
fn many_items() {
    let mut html = String::from("<ul>");
    for i in 0..5_000 {
        html.push_str(&format!("<li><a href='/p/{i}'>item {i}</a></li>"));
    }
    let settings = CssItemsSettings {
        item: Some("li".into()),
        fields: vec![FieldSettings {
            attr: Some("href".into()),
            ..field("href", "a")
        }],
    };
    let found = items(settings, Some("text/html"), html);
    assert_eq!(found.len(), 5_000);
    assert_eq!(found[4_999]["href"], "http://www.dmoz.example/p/4999");
}

#[test]
fn invalid_settings_are_named() {
    let error = |settings: CssItemsSettings| CssItems::new(settings).unwrap_err().to_string();
    let mut bad = dmoz();
    bad.fields[1].selector = "div[".into();
    let message = error(bad);
    assert!(
        message.starts_with("leg css_items: field \"description\": bad selector \"div[\""),
        "{message}"
    );
    let message = error(CssItemsSettings {
        item: Some("..".into()),
        ..dmoz()
    });
    assert!(
        message.starts_with("leg css_items: item: bad selector \"..\""),
        "{message}"
    );
    let mut twice = dmoz();
    twice.fields.push(field("name", "h1"));
    assert_eq!(error(twice), "leg css_items: field \"name\" is given twice");
    assert!(error(CssItemsSettings::default()).contains("fields is empty"));
    let mut nameless = dmoz();
    nameless.fields[0].name.clear();
    assert!(error(nameless).contains("has no name"));
}

#[test]
fn bad_selectors_say_what_is_wrong_in_one_line() {
    let cases = [
        ("a[=x]", "attribute name"),
        ("div >", "nothing on one side"),
        ("a[href x]", "[name=value]"),
        ("a[href=]", "missing"),
        ("a:", "missing"),
        ("a:nosuch", "unsupported pseudo-class"),
        ("p.", "missing"),
        ("p.1x", "unexpected"),
        ("", "empty"),
        ("svg|rect", "namespace"),
    ];
    for (selector, reason) in cases {
        let mut bad = dmoz();
        bad.fields[0].selector = selector.into();
        let message = CssItems::new(bad).unwrap_err().to_string();
        assert!(
            message.contains(&format!("bad selector {selector:?}: ")) && message.contains(reason),
            "{selector:?}: {message}"
        );
        assert!(
            !message.contains('\n') && !message.contains("developer"),
            "{message}"
        );
    }
}

#[test]
fn settings_deserialize() {
    let settings: CssItemsSettings = serde_json::from_value(json!({
        "item": ".title-and-desc",
        "fields": [{"name": "link", "selector": "a", "attr": "href", "required": true}],
    }))
    .unwrap();
    assert!(settings.fields[0].required && !settings.fields[0].all);
    assert!(CssItems::new(settings).is_ok());
    assert!(
        serde_json::from_value::<CssItemsSettings>(json!({"fields": [{"name": "x"}]})).is_err()
    );
    assert!(
        serde_json::from_value::<FieldSettings>(json!({"name": "x", "selector": "a", "css": 1}))
            .is_err()
    );
}
