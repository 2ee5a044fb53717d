//! The Zeebe gRPC client: connecting, deploying, waiting until the server is ready.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::{partition, DeployResourceRequest, Resource, TopologyRequest};

use crate::secure;

pub type Client = GatewayClient<InterceptedService<Channel, Authorize>>;

/// Adds the bearer token of [`secure`] to every call, when there is one.
#[derive(Clone)]
pub struct Authorize(Option<MetadataValue<Ascii>>);

impl Interceptor for Authorize {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A client on its own HTTP/2 connection to `address` (`host:port`, loopback), over TLS and with
/// a token when [`secure`] says so.
pub async fn connect(address: &str) -> anyhow::Result<Client> {
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .with_context(|| format!("bad address {address:?}"))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true);
    let settings = secure::get();
    let channel = match &settings.tls {
        None => endpoint.connect().await,
        Some(tls) => {
            let (tls, target) = (tls.clone(), address.to_string());
            let connector = tower::service_fn(move |_: tonic::transport::Uri| {
                let (tls, target) = (tls.clone(), target.clone());
                async move {
                    let tcp = tokio::net::TcpStream::connect(&target).await?;
                    tcp.set_nodelay(true)?;
                    let stream = secure::handshake(&tls, &target, tcp).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            });
            endpoint.connect_with_connector(connector).await
        }
    }
    .with_context(|| format!("connecting to {address}"))?;
    let authorize = match &settings.authorization {
        Some(value) => Some(value.parse().context("the bearer token is not a header value")?),
        None => None,
    };
    Ok(GatewayClient::with_interceptor(channel, Authorize(authorize))
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20))
}

/// Refuses anything but loopback: the bench must not load a shared server by accident.
pub fn check_loopback(address: &str) -> anyhow::Result<()> {
    let host = address.rsplit_once(':').map(|(h, _)| h).unwrap_or(address);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
        Ok(())
    } else {
        bail!("the bench runs on loopback only; {address:?} is not a loopback address")
    }
}

/// Whether the topology shows a healthy leader for every partition.
pub async fn is_ready(client: &mut Client) -> bool {
    let Ok(topology) = client.topology(TopologyRequest {}).await else { return false };
    let t = topology.into_inner();
    if t.partitions_count <= 0 {
        return false;
    }
    let healthy_leaders: std::collections::BTreeSet<i32> = t
        .brokers
        .iter()
        .flat_map(|b| &b.partitions)
        .filter(|p| p.role == partition::PartitionBrokerRole::Leader as i32 && p.health == partition::PartitionBrokerHealth::Healthy as i32)
        .map(|p| p.partition_id)
        .collect();
    healthy_leaders.len() >= t.partitions_count as usize
}

/// Polls Topology until every partition has a healthy leader; returns when it did.
pub async fn wait_ready(address: &str, timeout: Duration) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + timeout;
    let mut client = None;
    loop {
        if client.is_none() {
            client = connect(address).await.ok();
        }
        if let Some(c) = client.as_mut() {
            if is_ready(c).await {
                return Ok(Instant::now());
            }
        }
        if Instant::now() > deadline {
            bail!("{address} not ready (no healthy leader for every partition) after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A deployment the server refused: the workload uses something the server does not support.
#[derive(Debug)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "workload not supported by the server: {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

/// Deploys the model; a rejection becomes [`Unsupported`].
pub async fn deploy(client: &mut Client, name: &str, model: &str) -> anyhow::Result<i64> {
    deploy_all(client, &[(name, model)]).await
}

/// Deploys resources (name, content) in one deployment; a rejection becomes [`Unsupported`].
pub async fn deploy_all(client: &mut Client, resources: &[(&str, &str)]) -> anyhow::Result<i64> {
    let name = resources.first().map(|r| r.0).unwrap_or_default();
    let request = DeployResourceRequest {
        resources: resources
            .iter()
            .map(|(name, content)| Resource { name: (*name).into(), content: content.as_bytes().to_vec() })
            .collect(),
        tenant_id: String::new(),
    };
    match client.deploy_resource(request).await {
        Ok(r) => Ok(r.into_inner().key),
        Err(s) if matches!(s.code(), tonic::Code::InvalidArgument | tonic::Code::Unimplemented | tonic::Code::FailedPrecondition) => {
            Err(anyhow!(Unsupported(s.message().to_string())))
        }
        Err(s) => Err(anyhow!("deploying {name}: {:?}: {}", s.code(), s.message())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only() {
        assert!(check_loopback("127.0.0.1:26500").is_ok());
        assert!(check_loopback("localhost:26500").is_ok());
        assert!(check_loopback("[::1]:26500").is_ok());
        assert!(check_loopback("10.0.0.5:26500").is_err());
        assert!(check_loopback("example.com:26500").is_err());
    }
}
