//! The DevTools protocol over the browser's WebSocket: commands answered by
//! id, events routed to the page session they belong to (flat sessions,
//! `Target.attachToTarget` with `flatten`). JSON in, JSON out: rendering
//! sends ten methods, so there are no generated protocol types. Depends on
//! `tokio-tungstenite` and `serde_json` only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use super::RenderError;

/// An event the browser sent to a page session.
#[derive(Debug)]
pub(super) struct Event {
    /// `Domain.event`, e.g. `Fetch.requestPaused`.
    pub method: String,
    /// Its parameters.
    pub params: Value,
}

type Replies = HashMap<u64, oneshot::Sender<Result<Value, String>>>;

/// State shared by the connection's two tasks and its callers.
#[derive(Default)]
struct Routes {
    replies: Mutex<Replies>,
    sessions: Mutex<HashMap<String, mpsc::UnboundedSender<Event>>>,
    /// The socket ended: nothing will be answered.
    closed: std::sync::atomic::AtomicBool,
}

/// The longest a command may wait for its answer: past it, the browser is
/// taken for stuck.
const ANSWER_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// One WebSocket connection to the browser.
pub(super) struct Cdp {
    out: mpsc::UnboundedSender<Message>,
    routes: Arc<Routes>,
    next: AtomicU64,
}

impl Cdp {
    /// Connects to the browser's DevTools endpoint `url` (`ws://127.0.0.1:…`).
    pub async fn connect(url: &str) -> Result<Cdp, RenderError> {
        let (socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .map_err(|e| RenderError::Browser(format!("cannot reach its DevTools socket: {e}")))?;
        let (mut sink, mut stream) = socket.split();
        let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = outgoing.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
        });
        let routes = Arc::new(Routes::default());
        let reader = Arc::clone(&routes);
        tokio::spawn(async move {
            let why = loop {
                match stream.next().await {
                    Some(Ok(Message::Text(text))) => reader.route(text.as_str()),
                    Some(Ok(_)) => {}
                    Some(Err(error)) => break error.to_string(),
                    None => break "it closed the socket".to_owned(),
                }
            };
            tracing::debug!(%why, "the browser's DevTools socket ended");
            // The browser went away: every waiting call ends with an error,
            // and every later one at once.
            reader.closed.store(true, Ordering::SeqCst);
            lock(&reader.replies).clear();
            lock(&reader.sessions).clear();
        });
        Ok(Cdp {
            out,
            routes,
            next: AtomicU64::new(1),
        })
    }

    /// Sends `method` with `params` to `session` (the browser itself when
    /// `None`) and waits for its answer.
    pub async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, RenderError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::String(session.to_owned());
        }
        let (tx, rx) = oneshot::channel();
        lock(&self.routes.replies).insert(id, tx);
        let closed = || RenderError::Browser(format!("it closed its DevTools socket ({method})"));
        if self.routes.closed.load(Ordering::SeqCst) {
            lock(&self.routes.replies).remove(&id);
            return Err(closed());
        }
        self.out
            .send(Message::text(message.to_string()))
            .map_err(|_| closed())?;
        match tokio::time::timeout(ANSWER_LIMIT, rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(RenderError::Protocol(format!("{method}: {error}"))),
            Ok(Err(_)) => Err(closed()),
            Err(_) => {
                lock(&self.routes.replies).remove(&id);
                Err(RenderError::Browser(format!(
                    "no answer to {method} within {ANSWER_LIMIT:?}"
                )))
            }
        }
    }

    /// The events of `session` from now on.
    pub fn subscribe(&self, session: &str) -> mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.routes.sessions).insert(session.to_owned(), tx);
        rx
    }

    /// Stops routing the events of `session`.
    pub fn unsubscribe(&self, session: &str) {
        lock(&self.routes.sessions).remove(session);
    }
}

impl Routes {
    /// Hands one message from the browser to whoever waits for it.
    fn route(&self, text: &str) {
        let Ok(message) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            let Some(reply) = lock(&self.replies).remove(&id) else {
                return;
            };
            let answer = match message.get("error") {
                Some(error) => Err(error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error without a message")
                    .to_owned()),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = reply.send(answer);
            return;
        }
        let (Some(method), Some(session)) = (
            message.get("method").and_then(Value::as_str),
            message.get("sessionId").and_then(Value::as_str),
        ) else {
            return;
        };
        if let Some(events) = lock(&self.sessions).get(session) {
            let _ = events.send(Event {
                method: method.to_owned(),
                params: message.get("params").cloned().unwrap_or(Value::Null),
            });
        }
    }
}

/// A lock that a panicking holder did not leave unusable (the maps stay
/// consistent: each operation is one insert or remove).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
