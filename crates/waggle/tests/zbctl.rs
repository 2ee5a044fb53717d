//! zbctl 8.5.8 (the real CLI) against the real binary: every flow of the single-node issue.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{client_models, json_key, peers, run_with_timeout, Node};
use serde_json::Value;

struct Zbctl {
    address: String,
}

impl Zbctl {
    fn bin() -> PathBuf {
        let bin = peers().join("bin/zbctl");
        assert!(bin.exists(), "{} missing: run scripts/install-clients.sh", bin.display());
        bin
    }

    /// Runs zbctl; Ok(stdout) on success, Err(stderr) on a non-zero exit.
    fn try_run(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new(Self::bin());
        cmd.args(["--insecure", "--address", &self.address]).args(args);
        let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!("{stderr}{stdout}"))
        }
    }

    fn run(&self, args: &[&str]) -> String {
        self.try_run(args).unwrap_or_else(|e| panic!("zbctl {args:?} failed: {e}"))
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("zbctl {args:?} printed no JSON ({e}): {out}"))
    }

    /// Activates one job of `job_type`, waiting up to 10 s for it.
    fn activate_one(&self, job_type: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = self.json(&["activate", "jobs", job_type, "--maxJobsToActivate", "1", "--timeout", "1m", "--worker", "zbctl-test"]);
            if let Some(job) = out["jobs"].as_array().and_then(|j| j.first()) {
                return job.clone();
            }
            assert!(Instant::now() < deadline, "no {job_type} job to activate");
        }
    }
}

fn variables_of(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).expect("variables JSON"),
        other => other.clone(),
    }
}

#[test]
fn zbctl_drives_the_whole_single_node_flow() {
    let node = Node::start(&[]);
    let zb = Zbctl { address: node.address() };
    let models = client_models();

    // status (Topology)
    let status = zb.run(&["status"]);
    assert!(status.contains("Cluster size: 1"), "{status}");
    assert!(status.contains("Partition 1 : Leader, Healthy"), "{status}");

    // deploy
    let order = models.join("order.bpmn");
    let fail = models.join("fail.bpmn");
    let deployed = zb.json(&["deploy", "resource", order.to_str().unwrap(), fail.to_str().unwrap()]);
    let processes: Vec<&str> =
        deployed["deployments"].as_array().unwrap().iter().filter_map(|d| d["process"]["bpmnProcessId"].as_str()).collect();
    assert_eq!(processes, vec!["order", "fail"]);

    // create, worker completes with variables; the gateway default path ends the instance
    let created = zb.json(&["create", "instance", "order", "--variables", r#"{"orderId": "o-1", "amount": 5}"#]);
    let instance = json_key(&created["processInstanceKey"]);
    assert!(instance > 0);
    let job = zb.activate_one("reserve");
    assert_eq!(json_key(&job["processInstanceKey"]), instance);
    let vars = variables_of(&job["variables"]);
    assert_eq!(vars["id"], "o-1", "input mapping: {vars}");
    assert_eq!(vars["amount"], 5);
    let headers = variables_of(&job["customHeaders"]);
    assert_eq!(headers["warehouse"], "north");
    zb.run(&["complete", "job", &json_key(&job["key"]).to_string(), "--variables", r#"{"reserved": true}"#]);

    // create with result: a big order goes through approve; zbctl waits for the end
    let approver = {
        let address = node.address();
        std::thread::spawn(move || {
            let zb = Zbctl { address };
            let reserve = zb.activate_one("reserve");
            zb.run(&["complete", "job", &json_key(&reserve["key"]).to_string(), "--variables", r#"{"reserved": true}"#]);
            let approve = zb.activate_one("approve");
            zb.run(&["complete", "job", &json_key(&approve["key"]).to_string(), "--variables", r#"{"approved": true}"#]);
        })
    };
    let result = zb.json(&["create", "instance", "order", "--withResult", "--variables", r#"{"orderId": "o-2", "amount": 500}"#]);
    approver.join().expect("approver");
    let vars = variables_of(&result["variables"]);
    assert_eq!((vars["reserved"].clone(), vars["approved"].clone()), (Value::Bool(true), Value::Bool(true)), "{result}");

    // fail down to 0 retries → incident; update retries + resolve → the job is back
    let created = zb.json(&["create", "instance", "fail"]);
    let instance = json_key(&created["processInstanceKey"]);
    let job = zb.activate_one("flaky");
    let job_key = json_key(&job["key"]).to_string();
    zb.run(&["fail", "job", &job_key, "--retries", "1", "--errorMessage", "first"]);
    let job = zb.activate_one("flaky");
    assert_eq!(json_key(&job["key"]).to_string(), job_key);
    zb.run(&["fail", "job", &job_key, "--retries", "0", "--errorMessage", "boom"]);
    let (code, body) = node.get(&format!("/v1/incidents?processInstanceKey={instance}"));
    assert_eq!(code, 200);
    let incidents: Value = serde_json::from_str(&body).unwrap();
    let incident = &incidents["items"][0];
    assert_eq!(incident["errorType"], "JOB_NO_RETRIES", "{body}");
    assert_eq!(incident["errorMessage"], "boom");
    zb.run(&["update", "retries", &job_key, "--retries", "1"]);
    zb.run(&["resolve", "incident", incident["key"].as_str().unwrap()]);
    let job = zb.activate_one("flaky");
    zb.run(&["complete", "job", &json_key(&job["key"]).to_string()]);
    let again = zb.try_run(&["complete", "job", &job_key]);
    assert!(again.as_ref().is_err_and(|e| e.contains("NotFound")), "completing twice: {again:?}");

    // set variables, seen by the next activation
    let created = zb.json(&["create", "instance", "order", "--variables", r#"{"orderId": "o-3", "amount": 1}"#]);
    let instance = json_key(&created["processInstanceKey"]).to_string();
    zb.run(&["set", "variables", &instance, "--variables", r#"{"extra": 42}"#]);
    let job = zb.activate_one("reserve");
    assert_eq!(variables_of(&job["variables"])["extra"], 42);

    // cancel: the job goes with the instance
    zb.run(&["cancel", "instance", &instance]);
    let gone = zb.try_run(&["complete", "job", &json_key(&job["key"]).to_string()]);
    assert!(gone.as_ref().is_err_and(|e| e.contains("NotFound")), "job of a cancelled instance: {gone:?}");
    let twice = zb.try_run(&["cancel", "instance", &instance]);
    assert!(twice.as_ref().is_err_and(|e| e.contains("NotFound")), "cancel twice: {twice:?}");

    // publish a message; the same message id again is a duplicate
    let publish = ["publish", "message", "ping", "--correlationKey", "k-1", "--ttl", "1m", "--messageId", "m-1"];
    zb.run(&publish);
    let duplicate = zb.try_run(&publish);
    assert!(duplicate.as_ref().is_err_and(|e| e.contains("AlreadyExists")), "duplicate message: {duplicate:?}");

    // bad input
    let unknown = zb.try_run(&["create", "instance", "no-such-process"]);
    assert!(unknown.as_ref().is_err_and(|e| e.contains("NotFound")), "{unknown:?}");
    let bad = tempfile::NamedTempFile::with_suffix(".bpmn").unwrap();
    std::fs::write(bad.path(), "<not-xml").unwrap();
    let rejected = zb.try_run(&["deploy", "resource", bad.path().to_str().unwrap()]);
    assert!(rejected.as_ref().is_err_and(|e| e.contains("InvalidArgument")), "{rejected:?}");
}
