//! A broker's management API as the cluster benchmarks read it: `/v1/partitions` (each replica's
//! role, the leader it knows of, its applied index) and `/health`, over a minimal HTTP/1.0 GET on
//! loopback.

use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest wait for one answer of the management API.
const TIMEOUT: Duration = Duration::from_secs(3);

/// One replica of a partition as its broker's `/v1/partitions` shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replica {
    pub partition_id: u16,
    /// `LEADER` while this broker leads the partition and takes commands for it, else `FOLLOWER`.
    pub role: String,
    /// The node id of the leader this broker knows of.
    pub leader: Option<u64>,
    pub term: u64,
    pub applied_index: u64,
}

impl Replica {
    pub fn is_leader(&self) -> bool {
        self.role == "LEADER"
    }
}

#[derive(Debug, Deserialize)]
struct Partitions {
    items: Vec<Replica>,
}

/// `GET path` on `127.0.0.1:port`: the status code and the body.
pub async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    request(port, "GET", path, "").await
}

/// `method path` with a JSON `body` on `127.0.0.1:port` (HTTP/1.0): the status code and the body.
pub async fn request(port: u16, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let head = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        anyhow::Ok(response)
    };
    let response =
        tokio::time::timeout(TIMEOUT, exchange).await.with_context(|| format!("{method} {path} on port {port}: no answer"))??;
    let text = String::from_utf8_lossy(&response);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).with_context(|| format!("{method} {path}: not HTTP"))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

/// The replicas the broker whose management API listens on `port` holds.
pub async fn partitions(port: u16) -> anyhow::Result<Vec<Replica>> {
    let (status, body) = get(port, "/v1/partitions").await?;
    if status != 200 {
        bail!("GET /v1/partitions on port {port}: {status} {body}");
    }
    parse_partitions(&body)
}

/// Parses a `/v1/partitions` answer.
pub fn parse_partitions(body: &str) -> anyhow::Result<Vec<Replica>> {
    Ok(serde_json::from_str::<Partitions>(body).with_context(|| format!("parsing /v1/partitions: {body}"))?.items)
}

/// Whether the broker's `/health` says every partition it holds is healthy.
pub async fn healthy(port: u16) -> bool {
    matches!(get(port, "/health").await, Ok((200, _)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_partitions_of_a_broker() {
        let body = r#"{"nodeId":1,"items":[{"partitionId":1,"role":"LEADER","leader":1,"term":3,"appliedIndex":42},
            {"partitionId":2,"role":"FOLLOWER","leader":null,"term":2,"appliedIndex":7}]}"#;
        let replicas = parse_partitions(body).unwrap();
        assert_eq!(replicas.len(), 2);
        assert!(replicas[0].is_leader() && replicas[0].leader == Some(1) && replicas[0].applied_index == 42);
        assert!(!replicas[1].is_leader() && replicas[1].leader.is_none());
        assert!(parse_partitions("{}").is_err());
    }
}
