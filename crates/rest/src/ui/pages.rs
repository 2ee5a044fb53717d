//! The HTML pages (`/`, `/processes/{key}`, `/instances`, `/instances/{key}`, `/incidents`): one frame (navigation, a status line, the view's container) per view; the
//! script fills the container from the JSON endpoints and keeps it current.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::RestState;

pub fn routes() -> Router<Arc<RestState>> {
    Router::new()
        .route("/", get(|| async { page("Processes", "processes", None) }))
        .route("/processes/:key", get(|Path(k): Path<String>| async move { keyed("Process", "process", &k) }))
        .route("/instances", get(|| async { page("Instances", "instances", None) }))
        .route("/instances/:key", get(|Path(k): Path<String>| async move { keyed("Instance", "instance", &k) }))
        .route("/incidents", get(|| async { page("Incidents", "incidents", None) }))
}

fn keyed(title: &str, view: &str, key: &str) -> Response {
    // keys are decimal digits: nothing to escape once checked
    if key.is_empty() || key.len() > 19 || !key.bytes().all(|b| b.is_ascii_digit()) {
        return (StatusCode::NOT_FOUND, Html(format!("<!doctype html><title>Not found</title><p>'{}' is not a key.</p>", escape(key))))
            .into_response();
    }
    page(&format!("{title} {key}"), view, Some(key))
}

/// The frame of a view; `key` is checked to be digits.
fn page(title: &str, view: &str, key: Option<&str>) -> Response {
    let nav = |href: &str, label: &str, views: &[&str]| {
        let current = if views.contains(&view) { " aria-current=\"page\"" } else { "" };
        format!("<a href=\"{href}\"{current}>{label}</a>")
    };
    let html = format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · Waggle</title>
<link rel="stylesheet" href="/ui/assets/diagram-js.css">
<link rel="stylesheet" href="/ui/assets/bpmn-js.css">
<link rel="stylesheet" href="/ui/assets/app.css">
<link rel="stylesheet" href="/ui/assets/instance.css">
</head>
<body>
<header>
<span class="brand">Waggle</span>
<nav aria-label="Main">{processes} {instances} {incidents}</nav>
<span id="live" class="live" aria-label="Live updates">live</span>
</header>
<div id="flash" role="status" aria-live="polite"></div>
<main id="app" data-view="{view}" data-key="{key}">
<h1>{title}</h1>
<noscript>This page needs JavaScript; the same data is served by the REST API under /v2.</noscript>
</main>
<script src="/ui/assets/bpmn-navigated-viewer.js"></script>
<script src="/ui/assets/instance.js"></script>
<script src="/ui/assets/app.js"></script>
</body>
</html>
"#,
        title = escape(title),
        processes = nav("/", "Processes", &["processes", "process"]),
        instances = nav("/instances", "Instances", &["instances", "instance"]),
        incidents = nav("/incidents", "Incidents", &["incidents"]),
        key = key.unwrap_or(""),
    );
    Html(html).into_response()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
