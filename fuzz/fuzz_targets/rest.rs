//! REST bodies: the first byte picks one of the v1/v2 endpoints that take a body (the command
//! endpoints, the searches, the multipart deployment), the second the key in its path, the rest
//! is the body; the request goes through the real router of a node in the process
//! (`waggle_fuzz::node`): body parsing, validation, the gateway, the engine or the query store.
//! Property: no panic anywhere in the node, no hang, bounded memory; the answer is never a 5xx
//! other than 503 (an unavailable store or back pressure) or 504.
#![no_main]

use axum::body::Body;
use axum::http::{Method, Request};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;
use waggle_fuzz::{node, CALL_LIMIT};

const JSON: &str = "application/json";
const MULTIPART: &str = "multipart/form-data; boundary=X";

/// (method, path with `{}` for the key, content type)
const ROUTES: &[(&str, &str, &str)] = &[
    ("POST", "/v2/process-instances", JSON),
    ("POST", "/v2/process-instances/search", JSON),
    ("POST", "/v2/process-instances/{}/cancellation", JSON),
    ("POST", "/v2/process-instances/{}/modification", JSON),
    ("POST", "/v2/process-instances/{}/migration", JSON),
    ("POST", "/v2/process-definitions/search", JSON),
    ("POST", "/v2/process-definitions/{}/statistics/element-instances", JSON),
    ("POST", "/v2/element-instances/search", JSON),
    ("PUT", "/v2/element-instances/{}/variables", JSON),
    ("POST", "/v2/variables/search", JSON),
    ("POST", "/v2/incidents/search", JSON),
    ("POST", "/v2/incidents/{}/resolution", JSON),
    ("POST", "/v2/jobs/search", JSON),
    ("POST", "/v2/jobs/activation", JSON),
    ("PATCH", "/v2/jobs/{}", JSON),
    ("POST", "/v2/jobs/{}/completion", JSON),
    ("POST", "/v2/jobs/{}/failure", JSON),
    ("POST", "/v2/jobs/{}/error", JSON),
    ("POST", "/v2/user-tasks/search", JSON),
    ("POST", "/v2/user-tasks/{}/completion", JSON),
    ("POST", "/v2/user-tasks/{}/assignment", JSON),
    ("PATCH", "/v2/user-tasks/{}", JSON),
    ("POST", "/v1/user-tasks/{}/completion", JSON),
    ("POST", "/v1/user-tasks/{}/assignment", JSON),
    ("PATCH", "/v1/user-tasks/{}", JSON),
    ("POST", "/v2/messages/publication", JSON),
    ("POST", "/v2/messages/correlation", JSON),
    ("POST", "/v2/signals/broadcast", JSON),
    ("POST", "/v2/decision-definitions/evaluation", JSON),
    ("POST", "/v2/decision-definitions/search", JSON),
    ("POST", "/v2/decision-requirements/search", JSON),
    ("POST", "/v2/decision-instances/search", JSON),
    ("POST", "/v2/resources/{}/deletion", JSON),
    ("POST", "/v2/deployments", MULTIPART),
];

/// Keys a path takes: the first instance's, the first job's, none, junk.
const KEYS: &[&str] = &["2251799813685249", "2251799813685251", "2251799813685255", "1", "0", "-1", "x", "9223372036854775807"];

fuzz_target!(|data: &[u8]| {
    let [route, key, body @ ..] = data else { return };
    let (method, path, content_type) = ROUTES[*route as usize % ROUTES.len()];
    let path = path.replace("{}", KEYS[*key as usize % KEYS.len()]);
    let request = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).expect("method"))
        .uri(path.as_str())
        .header("content-type", content_type)
        .body(Body::from(body.to_vec()))
        .expect("request");
    let node = node();
    let router = node.rest.clone();
    node.runtime.block_on(async move {
        let Ok(answer) = tokio::time::timeout(CALL_LIMIT, router.oneshot(request)).await else { return };
        let status = answer.expect("infallible").status();
        if path.contains("/deletion") {
            // what later inputs reach stays deployed
            let _ = node.deploy_seeds().await;
        }
        if std::env::var_os("WAGGLE_FUZZ_DEBUG").is_some() {
            eprintln!("{status} {method} {path}");
        }
        assert!(!status.is_server_error() || status == 503 || status == 504, "{status} for {method} {path}");
    });
});
