//! The built-in web UI (issue 28): pages to see and repair processes in the browser, served on
//! the REST port at `/`, with every asset embedded in the binary (no CDN, no build step).
//!
//! - [`pages`]: the HTML pages (`/`, `/processes/{key}`, `/instances`, `/instances/{key}`,
//!   `/incidents`): a
//!   server-rendered frame whose script (`assets/app.js`) fills it from JSON and refreshes it
//!   when the store changes ([`live`]), without reloading the page.
//! - [`api`]: the JSON the pages read beyond the `/v2` searches (counts per definition and per
//!   element, one instance with its elements, variables and incidents in one answer) and the
//!   Retry action; the pages' other commands (cancel, set variables) are the `/v2` endpoints.
//! - [`live`]: `/ui/api/changes`, server-sent events after the store's commits, on which the
//!   pages refresh (polling only when the events are not available).
//! - [`assets`]: the script, the style sheet and bpmn-js's NavigatedViewer, vendored by
//!   `scripts/vendor-bpmn-js.sh` (its licence asks that the bpmn.io watermark stay visible);
//!   `instance.js` / `instance.css`: the instance page's element instance tree, taken flows and
//!   modification controls (move, add, cancel a token).

mod api;
mod assets;
mod live;
mod pages;

use std::sync::Arc;

use axum::Router;

use crate::RestState;

/// The UI's routes, merged into the REST API's router.
pub fn routes() -> Router<Arc<RestState>> {
    Router::new().merge(pages::routes()).merge(assets::routes()).merge(api::routes()).merge(live::routes())
}
