//! Multi-tenancy at the gateway: which tenant a request acts for, as Zeebe 8.5's gateway
//! decides it (`RequestMapper.ensureTenantIdSet` / `ensureTenantIdsSet`, camunda/camunda
//! `zeebe/gateway-grpc/src/main/java/io/camunda/zeebe/gateway/RequestMapper.java`), and whether
//! the caller may act for it (the gateway's `IllegalTenantRequestException`, PERMISSION_DENIED;
//! `MultiTenancyEnabledTest`, `MultiTenancyDisabledTest` and `MultiTenancyOverIdentityIT` in
//! camunda/zeebe 8.5).
//!
//! - Off: a request naming a tenant other than `<default>` is refused INVALID_ARGUMENT ("...
//!   but multi-tenancy is disabled"); one naming none acts for `<default>`.
//! - On: a request must name its tenant (INVALID_ARGUMENT "... but no tenant identifier was
//!   provided."), of at most 31 characters of `[A-Za-z0-9_.-]` (or `<default>`).
//! - On, with a [`Caller`] (authentication on): a tenant the caller may not use is refused
//!   PERMISSION_DENIED ("... but tenant is not authorized to perform this request"). Without a
//!   `Caller` (authentication off) every tenant is allowed.

use tonic::Status;
use waggle_protocol::DEFAULT_TENANT;

use crate::caller::Caller;

/// The longest tenant id Zeebe takes.
const MAX_TENANT_LEN: usize = 31;

/// The tenant a request for `rpc` (Zeebe's gRPC method name, e.g. `DeployResource`) acts for.
pub fn tenant_of(enabled: bool, caller: Option<&Caller>, rpc: &str, tenant_id: &str) -> Result<String, Status> {
    let given = !tenant_id.trim().is_empty();
    if !enabled {
        if given && tenant_id != DEFAULT_TENANT {
            return Err(invalid(rpc, tenant_id, "multi-tenancy is disabled"));
        }
        return Ok(DEFAULT_TENANT.to_string());
    }
    if !given {
        return Err(invalid(rpc, tenant_id, "no tenant identifier was provided."));
    }
    if tenant_id.chars().count() > MAX_TENANT_LEN {
        return Err(invalid(rpc, tenant_id, "tenant identifier is longer than 31 characters"));
    }
    if tenant_id != DEFAULT_TENANT && !tenant_id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
        return Err(invalid(rpc, tenant_id, "tenant identifier contains illegal characters"));
    }
    authorize(caller, rpc, tenant_id)?;
    Ok(tenant_id.to_string())
}

/// The tenants a request for `rpc` taking several (`ActivateJobs`, `StreamActivatedJobs`)
/// acts for: off, none given means `<default>`; on, at least one must be given. Each is
/// checked as by [`tenant_of`].
pub fn tenants_of(enabled: bool, caller: Option<&Caller>, rpc: &str, tenant_ids: &[String]) -> Result<Vec<String>, Status> {
    if tenant_ids.is_empty() {
        if !enabled {
            return Ok(vec![DEFAULT_TENANT.to_string()]);
        }
        return Err(Status::invalid_argument(format!(
            "Expected to handle gRPC request {rpc} with tenant identifiers '[]', but no tenant identifiers were provided."
        )));
    }
    let mut tenants = Vec::with_capacity(tenant_ids.len());
    for t in tenant_ids {
        let tenant = tenant_of(enabled, caller, rpc, t)?;
        if !tenants.contains(&tenant) {
            tenants.push(tenant);
        }
    }
    Ok(tenants)
}

/// Refuses a tenant the caller may not use (no caller: authentication is off, any tenant).
fn authorize(caller: Option<&Caller>, rpc: &str, tenant_id: &str) -> Result<(), Status> {
    match caller {
        Some(caller) if !caller.may_use(tenant_id) => Err(Status::permission_denied(format!(
            "Expected to handle gRPC request {rpc} with tenant identifier '{tenant_id}', but tenant is not authorized to perform this request"
        ))),
        _ => Ok(()),
    }
}

fn invalid(rpc: &str, tenant_id: &str, reason: &str) -> Status {
    Status::invalid_argument(format!("Expected to handle gRPC request {rpc} with tenant identifier '{tenant_id}', but {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn caller(tenants: &[&str]) -> Caller {
        Caller { name: "worker".into(), tenants: tenants.iter().map(|t| t.to_string()).collect() }
    }

    #[test]
    fn off_only_the_default_tenant() {
        assert_eq!(tenant_of(false, None, "DeployResource", "").unwrap(), "<default>");
        assert_eq!(tenant_of(false, None, "DeployResource", "<default>").unwrap(), "<default>");
        let e = tenant_of(false, None, "DeployResource", "tenant-a").unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Expected to handle gRPC request DeployResource with tenant identifier 'tenant-a', but multi-tenancy is disabled"
        );
        assert_eq!(tenants_of(false, None, "ActivateJobs", &[]).unwrap(), vec!["<default>"]);
        assert!(tenants_of(false, None, "ActivateJobs", &["a".into()]).is_err());
    }

    #[test]
    fn on_a_valid_tenant_must_be_named() {
        let e = tenant_of(true, None, "CreateProcessInstance", "").unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Expected to handle gRPC request CreateProcessInstance with tenant identifier '', but no tenant identifier was provided."
        );
        let long = "a".repeat(32);
        assert!(tenant_of(true, None, "PublishMessage", &long).unwrap_err().message().ends_with("is longer than 31 characters"));
        assert!(tenant_of(true, None, "PublishMessage", &"a".repeat(31)).is_ok());
        assert!(tenant_of(true, None, "PublishMessage", "a b").unwrap_err().message().ends_with("contains illegal characters"));
        assert_eq!(tenant_of(true, None, "PublishMessage", "Tenant_1.x-y").unwrap(), "Tenant_1.x-y");
        assert_eq!(tenant_of(true, None, "PublishMessage", "<default>").unwrap(), "<default>");
        let e = tenants_of(true, None, "ActivateJobs", &[]).unwrap_err();
        assert_eq!(
            e.message(),
            "Expected to handle gRPC request ActivateJobs with tenant identifiers '[]', but no tenant identifiers were provided."
        );
    }

    #[test]
    fn on_a_caller_uses_only_its_tenants() {
        let c = caller(&["tenant-a", "<default>"]);
        assert_eq!(tenant_of(true, Some(&c), "DeployResource", "tenant-a").unwrap(), "tenant-a");
        let e = tenant_of(true, Some(&c), "DeployResource", "tenant-b").unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        assert_eq!(
            e.message(),
            "Expected to handle gRPC request DeployResource with tenant identifier 'tenant-b', but tenant is not authorized to perform this request"
        );
        let e = tenants_of(true, Some(&c), "ActivateJobs", &["tenant-a".into(), "tenant-b".into()]).unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        assert_eq!(tenants_of(true, Some(&c), "ActivateJobs", &["tenant-a".into(), "tenant-a".into()]).unwrap(), vec!["tenant-a"]);
        // no caller: authentication is off, every tenant may be used
        assert_eq!(tenant_of(true, None, "DeployResource", "tenant-b").unwrap(), "tenant-b");
    }
}
