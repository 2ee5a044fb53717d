//! Live updates (issue 28): `GET /ui/api/changes`, server-sent events telling a page that the
//! query store committed something new, so it refetches what it shows instead of polling.
//!
//! The source is the store exporter's commit counter ([`waggle_store::Changes`], a watch
//! channel: the latest value, never a queue). Each subscription sends `hello` at once, then a
//! `change` event (data: the counter) after a commit, at most one per [`MIN_GAP`]: the commits
//! between are merged into the next event, so a store committing hundreds of times a second
//! makes a page refetch at most 1 / [`MIN_GAP`] times a second (the page also never runs two
//! refreshes at once). Resources are bounded: at most [`MAX_SUBSCRIBERS`] subscriptions at once
//! (more are refused with 503, and the page polls), a subscription holds a watch receiver and
//! nothing else (a client that stops reading stops being polled: nothing piles up), and it
//! ends after [`MAX_AGE`] (the browser's `EventSource` reconnects by itself), which also ends
//! one whose client vanished unnoticed; keep-alive comments every [`KEEP_ALIVE`] find a closed
//! connection sooner.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::time::Instant;

use crate::{Problem, RestState};

/// Events to one subscriber are at least this far apart.
pub const MIN_GAP: Duration = Duration::from_millis(100);
/// Subscriptions open at once, at most.
pub const MAX_SUBSCRIBERS: usize = 256;
/// A subscription ends after this long (the browser reconnects).
pub const MAX_AGE: Duration = Duration::from_secs(300);
/// A comment is sent on an idle subscription this often.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// What the browser waits before reconnecting a dropped subscription.
const RECONNECT: Duration = Duration::from_secs(1);

static SUBSCRIBERS: AtomicUsize = AtomicUsize::new(0);

/// One of the [`MAX_SUBSCRIBERS`] places, given back when the subscription's stream is dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        SUBSCRIBERS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_SUBSCRIBERS).then_some(n + 1)).ok().map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        SUBSCRIBERS.fetch_sub(1, Ordering::AcqRel);
    }
}

pub fn routes() -> Router<Arc<RestState>> {
    Router::new().route("/ui/api/changes", get(changes))
}

/// What a subscription's stream carries between events.
struct Subscription {
    rx: tokio::sync::watch::Receiver<u64>,
    _slot: Slot,
    /// When the last event went out (`None`: `hello` is still to be sent).
    sent: Option<Instant>,
    ends: Instant,
}

/// `GET /ui/api/changes`: `text/event-stream` of `hello` then `change` events; 503 when the
/// node has no store or its exporter's commits are not known here, or too many subscribe.
async fn changes(State(state): State<Arc<RestState>>) -> Response {
    let Some(changes) = state.store.as_ref().and_then(|s| s.changes()) else {
        return Problem::new(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", "no live updates on this node: poll").into_response();
    };
    let Some(slot) = Slot::take() else {
        return Problem::new(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", "too many live subscriptions: poll").into_response();
    };
    let start = Subscription { rx: changes.subscribe(), _slot: slot, sent: None, ends: Instant::now() + MAX_AGE };
    let stream = futures::stream::unfold(start, |mut s| async move {
        let Some(sent) = s.sent else {
            let n = *s.rx.borrow_and_update();
            s.sent = Some(Instant::now());
            let hello = Event::default().event("hello").retry(RECONNECT).data(n.to_string());
            return Some((Ok::<_, Infallible>(hello), s));
        };
        // merge what comes within the gap into one event
        tokio::time::sleep_until((sent + MIN_GAP).min(s.ends)).await;
        tokio::select! {
            changed = s.rx.changed() => changed.ok()?,
            _ = tokio::time::sleep_until(s.ends) => return None,
        }
        let n = *s.rx.borrow_and_update();
        s.sent = Some(Instant::now());
        Some((Ok(Event::default().event("change").data(n.to_string())), s))
    });
    let mut response = Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    // no proxy may hold the events back
    response.headers_mut().insert("x-accel-buffering", axum::http::HeaderValue::from_static("no"));
    response
}
