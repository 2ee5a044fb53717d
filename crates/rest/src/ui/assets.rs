//! The UI's static files, embedded at compile time and served under `/ui/assets/`.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::RestState;

/// (name, content type, bytes).
const FILES: &[(&str, &str, &[u8])] = &[
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("assets/app.js")),
    ("app.css", "text/css; charset=utf-8", include_bytes!("assets/app.css")),
    ("instance.js", "text/javascript; charset=utf-8", include_bytes!("assets/instance.js")),
    ("instance.css", "text/css; charset=utf-8", include_bytes!("assets/instance.css")),
    (
        "bpmn-navigated-viewer.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/vendor/bpmn-js/bpmn-navigated-viewer.production.min.js"),
    ),
    ("diagram-js.css", "text/css; charset=utf-8", include_bytes!("assets/vendor/bpmn-js/diagram-js.css")),
    ("bpmn-js.css", "text/css; charset=utf-8", include_bytes!("assets/vendor/bpmn-js/bpmn-js.css")),
    ("bpmn-js-LICENSE.txt", "text/plain; charset=utf-8", include_bytes!("assets/vendor/bpmn-js/LICENSE")),
];

pub fn routes() -> Router<Arc<RestState>> {
    Router::new().route("/ui/assets/:name", get(asset))
}

async fn asset(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, bytes)) => {
            ([(header::CONTENT_TYPE, *content_type), (header::CACHE_CONTROL, "no-cache")], *bytes).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
