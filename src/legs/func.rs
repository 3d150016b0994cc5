//! Closures as legs (axum's `from_fn` idea): a plain function instead of a type.
//!
//! Each constructor wraps one closure in a leg that uses exactly one hook; the
//! other hooks keep their pass-through defaults.

use super::{Leg, Output};
use crate::item::Item;
use crate::request::Request;
use crate::response::Response;

/// A leg whose `process_response` is `f`.
pub fn from_fn<F>(f: F) -> impl Leg
where
    F: Fn(&Response, &mut Output) + Send + Sync,
{
    FromFn(f)
}

/// A leg whose `process_request` keeps the requests for which `f` is true.
pub fn filter_requests<F>(f: F) -> impl Leg
where
    F: Fn(&Request) -> bool + Send + Sync,
{
    FilterRequests(f)
}

/// A leg whose `process_item` is `f` (return `None` to drop the item).
pub fn map_items<F>(f: F) -> impl Leg
where
    F: Fn(Item) -> Option<Item> + Send + Sync,
{
    MapItems(f)
}

struct FromFn<F>(F);

impl<F: Fn(&Response, &mut Output) + Send + Sync> Leg for FromFn<F> {
    fn process_response(&self, response: &Response, out: &mut Output) {
        (self.0)(response, out);
    }

    fn rewrites_requests(&self) -> bool {
        false
    }
}

struct FilterRequests<F>(F);

impl<F: Fn(&Request) -> bool + Send + Sync> Leg for FilterRequests<F> {
    fn process_request(&self, request: Request, _response: &Response) -> Option<Request> {
        (self.0)(&request).then_some(request)
    }
}

struct MapItems<F>(F);

impl<F: Fn(Item) -> Option<Item> + Send + Sync> Leg for MapItems<F> {
    fn process_item(&self, item: Item, _response: &Response) -> Option<Item> {
        (self.0)(item)
    }

    fn rewrites_requests(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legs::{run, test_response};

    #[test]
    fn closures_use_only_their_hook() {
        let response = test_response("http://e.com/", Some("text/html"), "<p>");
        let emit = from_fn(|response, out| {
            out.requests
                .push(Request::follow(&response.request, "http://e.com/a"));
            out.items.push(Item::new());
        });
        let out = run(&emit, &response);
        assert_eq!((out.requests.len(), out.items.len()), (1, 1));

        let keep_none = filter_requests(|_| false);
        assert!(
            keep_none
                .process_request(Request::get("http://e.com/"), &response)
                .is_none()
        );
        assert_eq!(
            keep_none.process_item(Item::new(), &response),
            Some(Item::new())
        );

        let tag = map_items(|mut item| {
            item.insert("k".into(), 1.into());
            Some(item)
        });
        assert_eq!(tag.process_item(Item::new(), &response).unwrap()["k"], 1);
        let request = Request::get("http://e.com/b");
        assert_eq!(
            tag.process_request(request.clone(), &response),
            Some(request)
        );
    }
}
