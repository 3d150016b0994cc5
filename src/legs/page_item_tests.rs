//! Unit tests of [`PageItem`] and its RFC 3339 formatter.

use serde_json::json;

use super::*;
use crate::legs::{run, test_response};

fn item_of(response: &Response) -> Item {
    let mut out = run(&PageItem::new(), response);
    assert_eq!(out.items.len(), 1);
    assert!(out.requests.is_empty());
    out.items.remove(0)
}

fn title_of(html: &str) -> Value {
    item_of(&test_response(
        "http://e.com/",
        Some("text/html"),
        html.to_owned(),
    ))["title"]
        .clone()
}

#[test]
fn every_field_of_an_html_page() {
    let mut response = test_response(
        "http://e.com/final",
        Some("text/html; charset=UTF-8"),
        "<title>Hi</title>",
    );
    response.request = crate::request::Request::follow(
        &crate::request::Request::get("http://e.com/"),
        "http://e.com/x",
    );
    response.status = 203;
    let item = item_of(&response);
    assert_eq!(
        Value::Object(item),
        json!({
            "url": "http://e.com/final",
            "status": 203,
            "title": "Hi",
            "fetched_at": "2021-01-01T00:00:00.000Z",
            "depth": 1,
            "referer": "http://e.com/",
            "content_type": "text/html",
            "bytes": 17,
        })
    );
}

#[test]
fn non_html_and_error_responses_still_get_an_item() {
    let mut response = test_response("http://e.com/a.png", Some("image/png"), vec![0u8; 10]);
    response.truncated = true;
    response.status = 404;
    let item = item_of(&response);
    assert_eq!(item["title"], Value::Null);
    assert_eq!(item["content_type"], "image/png");
    assert_eq!(item["status"], 404);
    assert_eq!(item["truncated"], true);
    assert_eq!(item["referer"], Value::Null);
    let item = item_of(&test_response("http://e.com/", None, "plain text"));
    assert_eq!(
        (item["content_type"].clone(), item["title"].clone()),
        (Value::Null, Value::Null)
    );
    assert!(!item.contains_key("truncated"));
}

#[test]
fn title_text_is_decoded_and_collapsed() {
    assert_eq!(
        title_of("<html><head><title>\n  A &amp;\tB &lt;i&gt;  </title>"),
        "A & B <i>"
    );
    assert_eq!(
        title_of("<TITLE>x <b>bold</b> y</TITLE>"),
        "x <b>bold</b> y"
    );
    assert_eq!(
        title_of("<title>first</title><title>second</title>"),
        "first"
    );
    assert_eq!(title_of("<title></title>"), "");
    assert_eq!(title_of("<p>no title</p>"), Value::Null);
    assert_eq!(
        title_of("<svg><title>icon</title></svg><title>real</title>"),
        "real"
    );
    assert_eq!(title_of("<body><p>late <title>in body</title>"), "in body");
    // Non-breaking spaces are not ASCII whitespace and stay.
    assert_eq!(title_of("<title>a&nbsp;b</title>"), "a\u{a0}b");
}

#[test]
fn broken_markup_titles() {
    assert_eq!(
        title_of("<title>never closed <a href=x>link"),
        "never closed <a href=x>link"
    );
    assert_eq!(title_of("<!-- <title>no</title> --><title>yes"), "yes");
    assert_eq!(
        title_of("<script>'<title>no</title>'</script><title>yes</title>"),
        "yes"
    );
    assert_eq!(title_of("<title"), Value::Null);
    assert_eq!(title_of("<<title>>x</title>"), ">x");
    let long = format!("<title>{}</title>", "é ".repeat(2 * MAX_TITLE_BYTES));
    let title = title_of(&long);
    let title = title.as_str().unwrap();
    assert!(title.len() <= MAX_TITLE_BYTES && title.len() > MAX_TITLE_BYTES - 4);
}

#[test]
fn russian_titles_in_legacy_encodings() {
    let html = "<html><head><title>Привет, мир</title></head></html>";
    for (encoding, label) in [
        (encoding_rs::WINDOWS_1251, "windows-1251"),
        (encoding_rs::KOI8_R, "koi8-r"),
    ] {
        let (bytes, _, _) = encoding.encode(html);
        let by_header = test_response(
            "http://e.com/",
            Some(&format!("text/html; charset={label}")),
            bytes.to_vec(),
        );
        assert_eq!(
            item_of(&by_header)["title"],
            "Привет, мир",
            "{label} via header"
        );
        let mut with_meta = format!("<meta charset=\"{label}\">").into_bytes();
        with_meta.extend_from_slice(&bytes);
        let by_meta = test_response("http://e.com/", Some("text/html"), with_meta);
        assert_eq!(
            item_of(&by_meta)["title"],
            "Привет, мир",
            "{label} via meta"
        );
    }
}

#[test]
fn bom_overrides_a_wrong_header_charset() {
    let mut body = b"\xEF\xBB\xBF".to_vec();
    body.extend_from_slice("<title>Привет</title>".as_bytes());
    let response = test_response("http://e.com/", Some("text/html; charset=koi8-r"), body);
    assert_eq!(item_of(&response)["title"], "Привет");
}
