//! Issue 29's OAuth 2 slice against the real binary, the real clients and a real Keycloak (the
//! authorization server, started once for this test binary by `scripts/keycloak.sh`, which
//! stops it when the binary exits; its realm is `tests/keycloak/realm.json`): zbctl, the Java
//! client, pyzeebe and the Node SDK each get a token with their own OAuth settings (the
//! client-credentials grant) and run deploy → create → complete over TLS; a wrong client secret,
//! no token, an expired token, a token for another audience, a forged signature and a token of
//! another issuer are each refused, on the gRPC gateway (UNAUTHENTICATED) and the REST API (401),
//! with the reason; Basic credentials of a configured user work over gRPC too; and a key the
//! issuer rotated in is taken after one refetch of its key set.

mod common;

use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::certs::Certs;
use common::{client_models, drive_steps, free_port, peers, repo_root, run_with_timeout, Node};
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::TopologyRequest;

/// The audience Waggle takes (the realm's audience mapper puts it in the clients' tokens).
const AUDIENCE: &str = "waggle-api";

/// The Keycloak this test binary shares.
struct Keycloak {
    url: String,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Keycloak {
    fn issuer(&self, realm: &str) -> String {
        format!("{}/realms/{realm}", self.url)
    }

    fn token_url(&self, realm: &str) -> String {
        format!("{}/protocol/openid-connect/token", self.issuer(realm))
    }

    /// A client-credentials token of `client` (panics if Keycloak refuses).
    fn token(&self, realm: &str, client: &str, secret: &str) -> String {
        let output = run_with_timeout(
            Command::new("curl").args(["-s", "--max-time", "20", "-d", "grant_type=client_credentials"]).args([
                "-d",
                &format!("client_id={client}"),
                "-d",
                &format!("client_secret={secret}"),
                &self.token_url(realm),
            ]),
            Duration::from_secs(30),
        );
        let body: serde_json::Value = serde_json::from_slice(&output.stdout).expect("Keycloak's token answer");
        body["access_token"].as_str().unwrap_or_else(|| panic!("no token for {client}: {body}")).to_string()
    }

    fn script(&self, args: &[&str]) {
        let output = run_with_timeout(Command::new(repo_root().join("scripts/keycloak.sh")).args(args), Duration::from_secs(60));
        assert!(output.status.success(), "keycloak.sh {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

fn keycloak() -> &'static Keycloak {
    static KEYCLOAK: OnceLock<Keycloak> = OnceLock::new();
    KEYCLOAK.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let script = repo_root().join("scripts/keycloak.sh");
        let output = run_with_timeout(
            Command::new(&script)
                .args(["start", "--port", &port.to_string(), "--management-port", &free_port().to_string()])
                .arg("--dir")
                .arg(dir.path())
                .args(["--watch", &std::process::id().to_string()]),
            Duration::from_secs(240),
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let url = stdout.lines().find_map(|l| l.strip_prefix("KEYCLOAK_URL=")).map(str::to_string);
        let log = std::fs::read_to_string(dir.path().join("keycloak.log")).unwrap_or_default();
        let url = url.unwrap_or_else(|| {
            panic!(
                "Keycloak did not start (install it: scripts/install-clients.sh keycloak)\n{}\n{}",
                String::from_utf8_lossy(&output.stderr),
                &log[log.len().saturating_sub(3000)..]
            )
        });
        Keycloak { url, port, _dir: dir }
    })
}

/// The node's flags for OAuth 2 against `realm`, and `extra`.
fn oidc_args(realm: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--security-authentication-method".into(),
        "oidc".into(),
        "--security-authentication-oidc-issuer-uri".into(),
        keycloak().issuer(realm),
        "--security-authentication-oidc-audiences".into(),
        AUDIENCE.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn start(args: &[String]) -> Node {
    Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A TLS node taking tokens of the realm `waggle`.
fn tls_node(certs: &Certs) -> Node {
    let mut args = certs.node_args();
    args.extend(oidc_args("waggle", &[]));
    start(&args)
}

/// The drivers' OAuth arguments for `client`.
fn oauth_args(client: &str, secret: &str) -> Vec<String> {
    ["--client-id", client, "--client-secret", secret, "--token-url", &keycloak().token_url("waggle"), "--audience", AUDIENCE]
        .map(String::from)
        .to_vec()
}

const FLOW: &[&str] = &["deploy", "create", "complete", "result"];

/// zbctl over TLS with `oauth` as its environment (its `ZEEBE_*` OAuth variables) or flags, and a
/// home of its own (it caches tokens under `~/.camunda`).
fn zbctl(node: &Node, certs: &Certs, oauth: &[(&str, &str)], flags: &[&str], args: &[&str]) -> Result<String, String> {
    let bin = peers().join("bin/zbctl");
    assert!(bin.exists(), "{} missing: run scripts/install-clients.sh", bin.display());
    let home = tempfile::tempdir().expect("tempdir");
    let mut command = Command::new(bin);
    command.env("HOME", home.path()).env("ZEEBE_CLIENT_CONFIG_PATH", home.path().join("credentials"));
    command.envs(oauth.iter().copied()).arg("--certPath").arg(certs.ca()).args(["--address", &node.address()]).args(flags).args(args);
    let output = run_with_timeout(&mut command, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    match output.status.success() {
        true => Ok(stdout),
        false => Err(format!("{}{stdout}", String::from_utf8_lossy(&output.stderr))),
    }
}

#[test]
fn zbctl_gets_a_token_from_keycloak_and_runs_a_flow_over_tls_and_a_wrong_secret_gets_none() {
    let kc = keycloak();
    let certs = Certs::new();
    let node = tls_node(&certs);
    let token_url = kc.token_url("waggle");
    // zbctl's OAuth flags
    let flags = ["--clientId", "zeebe", "--clientSecret", "zeebe-secret", "--audience", AUDIENCE, "--authzUrl", &token_url];
    let model = client_models().join("one_task.bpmn");
    zbctl(&node, &certs, &[], &flags, &["deploy", &model.display().to_string()]).expect("deploy with a token");
    let created = zbctl(&node, &certs, &[], &flags, &["create", "instance", "benchmark"]).expect("create with a token");
    let created: serde_json::Value = serde_json::from_str(&created).expect("creation JSON");
    let instance = common::json_key(&created["processInstanceKey"]);
    // and its environment variables
    let env = [
        ("ZEEBE_CLIENT_ID", "zeebe"),
        ("ZEEBE_CLIENT_SECRET", "zeebe-secret"),
        ("ZEEBE_TOKEN_AUDIENCE", AUDIENCE),
        ("ZEEBE_AUTHORIZATION_SERVER_URL", token_url.as_str()),
    ];
    let activate = ["activate", "jobs", "benchmark-task", "--maxJobsToActivate", "1", "--timeout", "1m"];
    let activated = zbctl(&node, &certs, &env, &[], &activate).expect("activate with a token");
    let jobs: serde_json::Value = serde_json::from_str(&activated).expect("jobs JSON");
    assert_eq!(common::json_key(&jobs["jobs"][0]["processInstanceKey"]), instance, "{activated}");
    let key = common::json_key(&jobs["jobs"][0]["key"]).to_string();
    zbctl(&node, &certs, &env, &[], &["complete", "job", &key]).expect("complete with a token");
    // no credentials: UNAUTHENTICATED, saying so
    let none = zbctl(&node, &certs, &[], &[], &["status"]).expect_err("refused without a token");
    assert!(none.contains("Unauthenticated") && none.contains("no credentials"), "{none}");
    // a wrong client secret: Keycloak gives no token, so no call is made
    let wrong = [("ZEEBE_CLIENT_SECRET", "wrong-secret"), env[0], env[2], env[3]];
    let refused = zbctl(&node, &certs, &wrong, &[], &["status"]).expect_err("no token for a wrong secret");
    assert!(refused.contains("401") || refused.contains("unauthorized_client"), "{refused}");
    // a token for another audience: Waggle refuses it. zbctl's OAuth provider answers an
    // UNAUTHENTICATED by fetching a fresh token and retrying (the Go client's
    // `OAuthCredentialsProvider.ShouldRetryRequest`), so on a loaded machine it may reach its
    // own deadline before it prints Waggle's reason; `each_bad_token_is_refused_with_its_reason_
    // on_grpc_and_rest` checks that reason on every path
    let other = [("ZEEBE_CLIENT_ID", "other-api-client"), ("ZEEBE_CLIENT_SECRET", "other-secret"), env[2], env[3]];
    let refused = zbctl(&node, &certs, &other, &[], &["status"]).expect_err("another audience refused");
    assert!(
        (refused.contains("Unauthenticated") && refused.contains("does not include 'waggle-api'")) || refused.contains("DeadlineExceeded"),
        "{refused}"
    );
}

#[test]
fn the_java_client_gets_a_token_with_its_oauth_credentials_provider_over_tls() {
    let lib = peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let certs = Certs::new();
    let node = tls_node(&certs);
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}/*", lib.display())).arg(repo_root().join("tests/clients/TlsFlow.java"));
    command.args(["--address", &node.address(), "--ca", &certs.ca_str()]).arg("--models").arg(client_models());
    command.args(oauth_args("zeebe", "zeebe-secret"));
    drive_steps(&mut command, &node, Duration::from_secs(180), FLOW);
}

#[test]
fn pyzeebe_gets_a_token_with_its_oauth_channel_over_tls() {
    let python = peers().join("py/bin/python");
    assert!(python.exists(), "{} missing: run scripts/install-clients.sh", python.display());
    let certs = Certs::new();
    let node = tls_node(&certs);
    // oauthlib takes a token endpoint over plain HTTP (Keycloak on loopback here) only when told
    let driver = |secret: &str| {
        let mut command = Command::new(&python);
        command.env("OAUTHLIB_INSECURE_TRANSPORT", "1").arg(repo_root().join("tests/clients/tls_flow.py"));
        command.args(["--address", &node.address(), "--ca", &certs.ca_str()]).arg("--models").arg(client_models());
        command.args(oauth_args("zeebe", secret));
        command
    };
    drive_steps(&mut driver("zeebe-secret"), &node, Duration::from_secs(180), FLOW);
    // a wrong secret: Keycloak gives no token, and no call is made
    let output = run_with_timeout(&mut driver("wrong-secret"), Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("unauthorized_client"), "{output:?}");
}

#[test]
fn the_node_sdk_gets_a_token_with_its_oauth_settings_over_tls() {
    let modules = peers().join("node/node_modules");
    assert!(modules.join("@camunda8/sdk").exists(), "{} missing: run scripts/install-clients.sh", modules.display());
    let certs = Certs::new();
    let node = tls_node(&certs);
    let mut command = Command::new("node");
    command.env("NODE_PATH", &modules).arg(repo_root().join("tests/clients/tls_flow.cjs"));
    command.args(["--address", &node.address(), "--ca", &certs.ca_str()]).arg("--models").arg(client_models());
    command.args(oauth_args("zeebe", "zeebe-secret"));
    drive_steps(&mut command, &node, Duration::from_secs(180), FLOW);
}

/// A gRPC call (Topology) with `authorization` as its header, on a plaintext node.
async fn topology(node: &Node, authorization: Option<&str>) -> Result<(), tonic::Status> {
    let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
    let mut request = tonic::Request::new(TopologyRequest {});
    if let Some(value) = authorization {
        request.metadata_mut().insert("authorization", value.parse().expect("header value"));
    }
    client.topology(request).await.map(|_| ())
}

fn assert_unauthenticated(answer: Result<(), tonic::Status>, says: &str) {
    let status = answer.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains(says), "{:?} does not say {says:?}", status.message());
}

/// curl's (status, headers, body) of a REST GET with `authorization`.
fn rest_get(node: &Node, path: &str, authorization: Option<&str>) -> (u16, String, String) {
    let mut command = Command::new("curl");
    command.args(["-s", "-i", "--max-time", "10"]);
    if let Some(value) = authorization {
        command.args(["-H", &format!("Authorization: {value}")]);
    }
    let output = run_with_timeout(command.arg(format!("http://127.0.0.1:{}{path}", node.rest_port)), Duration::from_secs(20));
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn assert_401(answer: (u16, String, String), says: &str) {
    let (status, head, body) = answer;
    assert_eq!(status, 401, "{head}\n{body}");
    assert!(head.contains("www-authenticate: bearer realm=\"waggle\""), "{head}");
    let problem: serde_json::Value = serde_json::from_str(&body).expect("a JSON problem");
    assert_eq!(problem["title"], "UNAUTHORIZED", "{body}");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains(says)), "{body} does not say {says:?}");
}

/// `token` with its payload changed (tenants added) and its signature kept.
fn forged(token: &str) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: serde_json::Value = serde_json::from_slice(&b64.decode(parts[1]).expect("base64url")).expect("claims");
    claims["tenants"] = serde_json::json!(["<default>", "tenant-a", "tenant-b"]);
    format!("{}.{}.{}", parts[0], b64.encode(claims.to_string()), parts[2])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_token_is_refused_with_its_reason_on_grpc_and_rest() {
    let kc = keycloak();
    // no clock skew: the 1-second tokens of `short-lived` expire at once; a Basic user beside
    let node = start(&oidc_args(
        "waggle",
        &["--security-authentication-oidc-clock-skew-secs", "0", "--security-initialization-users", "demo:s3cret"],
    ));
    let good = format!("Bearer {}", kc.token("waggle", "zeebe", "zeebe-secret"));
    topology(&node, Some(&good)).await.expect("a good token");
    assert_eq!(rest_get(&node, "/v2/topology", Some(&good)).0, 200);
    // Basic credentials of a configured user, over gRPC as over REST
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("demo:s3cret"));
    topology(&node, Some(&basic)).await.expect("Basic over gRPC");
    assert_eq!(rest_get(&node, "/v2/topology", Some(&basic)).0, 200);
    let wrong_basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("demo:wrong"));
    assert_unauthenticated(topology(&node, Some(&wrong_basic)).await, "the username or the password is wrong");
    // no token, on a call of the fast path too
    assert_unauthenticated(topology(&node, None).await, "no credentials");
    let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
    assert_unauthenticated(client.create_process_instance(common::one_task_creation()).await.map(|_| ()), "no credentials");
    assert_401(rest_get(&node, "/v2/topology", None), "no credentials");
    // another audience
    let other = format!("Bearer {}", kc.token("waggle", "other-api-client", "other-secret"));
    assert_unauthenticated(topology(&node, Some(&other)).await, "\"other-api\"");
    assert_unauthenticated(topology(&node, Some(&other)).await, "does not include 'waggle-api'");
    assert_401(rest_get(&node, "/v2/topology", Some(&other)), "does not include 'waggle-api'");
    // a forged signature: the payload changed under Keycloak's signature
    let forged = format!("Bearer {}", forged(&good["Bearer ".len()..]));
    assert_unauthenticated(topology(&node, Some(&forged)).await, "signature does not verify");
    assert_401(rest_get(&node, "/v2/topology", Some(&forged)), "signature does not verify");
    // expired: a token of `short-lived` (1 s) after 2 s
    let short = format!("Bearer {}", kc.token("waggle", "short-lived", "short-secret"));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_unauthenticated(topology(&node, Some(&short)).await, "the token expired at");
    assert_401(rest_get(&node, "/v2/topology", Some(&short)), "the token expired at");
    // a token of another issuer (another realm of the same Keycloak)
    kc.script(&["realm", "--port", &kc.port.to_string(), "--name", "elsewhere"]);
    let foreign = format!("Bearer {}", kc.token("elsewhere", "zeebe", "zeebe-secret"));
    assert_unauthenticated(topology(&node, Some(&foreign)).await, "is not the configured issuer");
    // garbage
    assert_unauthenticated(topology(&node, Some("Bearer not-a-jwt")).await, "not a well-formed JWT");
    // the management port's changes take the token too
    let rebalance = |auth: Option<&str>| {
        let mut command = Command::new("curl");
        command.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "--max-time", "10"]);
        if let Some(value) = auth {
            command.args(["-H", &format!("Authorization: {value}")]);
        }
        let output = run_with_timeout(command.arg(format!("{}/actuator/rebalance", node.management_url())), Duration::from_secs(20));
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    assert_eq!(rebalance(None), "401");
    assert_eq!(rebalance(Some(&good)), "200");
    // after all that, the good token still works
    topology(&node, Some(&good)).await.expect("the good token again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_issuer_rotated_in_is_taken_after_one_refetch() {
    let kc = keycloak();
    // a realm of its own: rotating the shared realm's key would race the other tests
    let realm = format!("rotation-{}", std::process::id());
    kc.script(&["realm", "--port", &kc.port.to_string(), "--name", &realm]);
    let started = Instant::now();
    let node = start(&oidc_args(&realm, &[]));
    let kid = |token: &str| -> String {
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap();
        serde_json::from_slice::<serde_json::Value>(&header).unwrap()["kid"].as_str().unwrap().to_string()
    };
    let before = kc.token(&realm, "zeebe", "zeebe-secret");
    topology(&node, Some(&format!("Bearer {before}"))).await.expect("the first key");
    // past the refetch interval since the node fetched the set at start-up
    let wait = Duration::from_secs(11).saturating_sub(started.elapsed());
    tokio::time::sleep(wait).await;
    kc.script(&["rotate-key", "--port", &kc.port.to_string(), "--realm", &realm]);
    let after = kc.token(&realm, "zeebe", "zeebe-secret");
    assert_ne!(kid(&before), kid(&after), "Keycloak signs with the new key");
    topology(&node, Some(&format!("Bearer {after}"))).await.expect("the rotated key, after a refetch");
    topology(&node, Some(&format!("Bearer {before}"))).await.expect("the old key, still published");
    let fetches = node.log().matches("fetched the issuer's signing keys").count();
    assert_eq!(fetches, 2, "the set is fetched at start and once for the new key:\n{}", node.log());
}

/// The node's start-up log names the issuer; a node whose issuer cannot be reached still starts
/// and answers UNAVAILABLE until it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_issuer_is_unavailable_not_unauthenticated() {
    let port = free_port();
    let args = [
        "--security-authentication-method",
        "oidc",
        "--security-authentication-oidc-issuer-uri",
        &format!("http://127.0.0.1:{port}/realms/none"),
        "--security-authentication-oidc-audiences",
        AUDIENCE,
    ];
    let node = Node::start(&args);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims = serde_json::json!({"iss": format!("http://127.0.0.1:{port}/realms/none"), "aud": AUDIENCE, "exp": 4_000_000_000u64});
    let token = format!("{}.{}.{}", b64.encode(r#"{"alg":"RS256","kid":"k"}"#), b64.encode(claims.to_string()), b64.encode("sig"));
    let status = topology(&node, Some(&format!("Bearer {token}"))).await.expect_err("no keys");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("the issuer's signing keys could not be fetched"), "{}", status.message());
    let log = node.log();
    assert!(log.contains("oauth_issuer=") && log.contains(&format!("http://127.0.0.1:{port}/realms/none")), "{log}");
}

/// A gRPC request carrying `token` as its bearer token.
fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().expect("header value"));
    request
}

/// Multi-tenancy with tenants from the token (issue 29): Keycloak's `tenant-a` and `tenant-b`
/// clients carry a `tenants` claim of their one tenant. Each deploys and starts a one-task
/// process in its own tenant; neither may deploy into, or ask for jobs of, the other's
/// (PERMISSION_DENIED, as Zeebe 8.5's gateway answers); the worker authorised for tenant A gets
/// tenant A's job and never tenant B's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_authorised_for_tenant_a_never_receives_tenant_bs_jobs() {
    use waggle_protocol::gateway as pb;
    let kc = keycloak();
    let node = start(&oidc_args("waggle", &["--multi-tenancy", "true"]));
    let a = kc.token("waggle", "tenant-a", "tenant-a-secret");
    let b = kc.token("waggle", "tenant-b", "tenant-b-secret");
    let model = std::fs::read(client_models().join("one_task.bpmn")).expect("one_task.bpmn");
    let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
    let deploy = |tenant: &str| pb::DeployResourceRequest {
        resources: vec![pb::Resource { name: "one_task.bpmn".into(), content: model.clone() }],
        tenant_id: tenant.into(),
    };
    let denied = client.deploy_resource(with_token(deploy("tenant-b"), &a)).await.expect_err("tenant A's token, tenant B");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    assert!(denied.message().contains("tenant is not authorized"), "{denied:?}");
    for (tenant, token) in [("tenant-a", &a), ("tenant-b", &b)] {
        client.deploy_resource(with_token(deploy(tenant), token)).await.unwrap_or_else(|e| panic!("deploy to {tenant}: {e:?}"));
        let create = pb::CreateProcessInstanceRequest {
            bpmn_process_id: "benchmark".into(),
            version: -1,
            tenant_id: tenant.into(),
            ..Default::default()
        };
        client.create_process_instance(with_token(create, token)).await.unwrap_or_else(|e| panic!("create in {tenant}: {e:?}"));
    }
    let activate = |tenants: &[&str]| pb::ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "w".into(),
        timeout: 60_000,
        max_jobs_to_activate: 10,
        request_timeout: 2_000,
        tenant_ids: tenants.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    };
    let denied = client.activate_jobs(with_token(activate(&["tenant-b"]), &a)).await.expect_err("tenant A's worker, tenant B's jobs");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    let denied =
        client.activate_jobs(with_token(activate(&["tenant-a", "tenant-b"]), &a)).await.expect_err("tenant A's worker, both tenants");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    // tenant A's worker: its tenant's one job, then nothing more (tenant B's job stays)
    let mut got = Vec::new();
    for _ in 0..2 {
        let mut stream = client.activate_jobs(with_token(activate(&["tenant-a"]), &a)).await.expect("activate for tenant A").into_inner();
        while let Some(batch) = stream.message().await.expect("a batch") {
            got.extend(batch.jobs.into_iter().map(|j| j.tenant_id));
        }
    }
    assert_eq!(got, ["tenant-a"], "tenant A's worker got tenant A's job only");
    let mut stream = client.activate_jobs(with_token(activate(&["tenant-b"]), &b)).await.expect("activate for tenant B").into_inner();
    let mut got = Vec::new();
    while let Some(batch) = stream.message().await.expect("a batch") {
        got.extend(batch.jobs.into_iter().map(|j| j.tenant_id));
    }
    assert_eq!(got, ["tenant-b"], "tenant B's job was waiting for tenant B's worker");
}

/// zbctl (plaintext, `--insecure`) with `client`'s OAuth flags.
fn zbctl_insecure(node: &Node, client: &str, secret: &str, args: &[&str]) -> Result<String, String> {
    let bin = peers().join("bin/zbctl");
    assert!(bin.exists(), "{} missing: run scripts/install-clients.sh", bin.display());
    let home = tempfile::tempdir().expect("tempdir");
    let token_url = keycloak().token_url("waggle");
    let mut command = Command::new(bin);
    command.env("HOME", home.path()).env("ZEEBE_CLIENT_CONFIG_PATH", home.path().join("credentials"));
    command.args(["--insecure", "--address", &node.address()]);
    command.args(["--clientId", client, "--clientSecret", secret, "--audience", AUDIENCE, "--authzUrl", &token_url]).args(args);
    let output = run_with_timeout(&mut command, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    match output.status.success() {
        true => Ok(stdout),
        false => Err(format!("{}{stdout}", String::from_utf8_lossy(&output.stderr))),
    }
}

/// Commands by key carry the caller's tenants (issue 29): zbctl with tenant B's Keycloak
/// client gets NOT_FOUND, with Zeebe's usual reason, completing, failing or updating tenant A's
/// job and cancelling or setting variables on tenant A's instance, as if they did not exist
/// (Zeebe 8.5's engine checks a command's authorized tenants); the REST API with tenant B's
/// token finds none of tenant A's instances. zbctl with tenant A's client completes the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zbctl_of_tenant_b_gets_not_found_for_tenant_as_job_and_instance() {
    use waggle_protocol::gateway as pb;
    let kc = keycloak();
    let node = start(&oidc_args("waggle", &["--multi-tenancy", "true"]));
    let a = kc.token("waggle", "tenant-a", "tenant-a-secret");
    let b = kc.token("waggle", "tenant-b", "tenant-b-secret");
    let model = std::fs::read(client_models().join("one_task.bpmn")).expect("one_task.bpmn");
    let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
    let deploy = pb::DeployResourceRequest {
        resources: vec![pb::Resource { name: "one_task.bpmn".into(), content: model }],
        tenant_id: "tenant-a".into(),
    };
    client.deploy_resource(with_token(deploy, &a)).await.expect("deploy to tenant A");
    let create = pb::CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        tenant_id: "tenant-a".into(),
        ..Default::default()
    };
    let instance = client.create_process_instance(with_token(create, &a)).await.expect("create").into_inner().process_instance_key;
    let activate = pb::ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "w".into(),
        timeout: 60_000,
        max_jobs_to_activate: 1,
        request_timeout: 5_000,
        tenant_ids: vec!["tenant-a".into()],
        ..Default::default()
    };
    let mut stream = client.activate_jobs(with_token(activate, &a)).await.expect("activate").into_inner();
    let job = stream.message().await.unwrap().expect("a batch").jobs[0].key.to_string();
    let instance = instance.to_string();
    for (args, says) in [
        (vec!["complete", "job", &job], format!("Expected to complete job with key '{job}', but no such job was found")),
        (vec!["fail", "job", &job, "--retries", "0"], format!("Expected to fail job with key '{job}', but no such job was found")),
        (
            vec!["update", "retries", &job, "--retries", "5"],
            format!("Expected to update retries for job with key '{job}', but no such job was found"),
        ),
        (
            vec!["cancel", "instance", &instance],
            format!("Expected to cancel a process instance with key '{instance}', but no such process was found"),
        ),
        (
            vec!["set", "variables", &instance, "--variables", r#"{"x":1}"#],
            format!("Expected to update variables for element with key '{instance}', but no such element was found"),
        ),
    ] {
        let refused = zbctl_insecure(&node, "tenant-b", "tenant-b-secret", &args).expect_err("tenant B's zbctl refused");
        assert!(refused.contains("NotFound") && refused.contains(&says), "zbctl {args:?}: {refused}");
    }
    // REST: tenant B's token sees none of tenant A's instances, nor the one by key
    let (status, _, body) = rest_get(&node, &format!("/v2/process-instances/{instance}"), Some(&format!("Bearer {b}")));
    assert_eq!(status, 404, "{body}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while rest_get(&node, &format!("/v2/process-instances/{instance}"), Some(&format!("Bearer {a}"))).0 != 200 {
        assert!(Instant::now() < deadline, "tenant A never found its instance over REST");
        std::thread::sleep(Duration::from_millis(100));
    }
    zbctl_insecure(&node, "tenant-a", "tenant-a-secret", &["complete", "job", &job]).expect("tenant A's zbctl completes its job");
}
