//! Commands on Zeebe user tasks for the REST API (Zeebe 8.5 has no gRPC call for them): routed
//! by the task's key and answered as any command, a rejection as Zeebe's gateway reports it.

use tonic::Status;
use waggle_protocol::value::UserTaskRecord;
use waggle_protocol::{Intent, Record, RecordValue};

use crate::{Caller, GatewayService};

impl GatewayService {
    /// Submits USER_TASK `intent` (COMPLETE, ASSIGN, CLAIM or UPDATE) for task `key`; the
    /// committed event, or the rejection as a status (NOT_FOUND, FAILED_PRECONDITION for
    /// INVALID_STATE, ...).
    /// `caller`: the REST request's; a task of a tenant it may not use is NOT_FOUND.
    pub async fn user_task_command(
        &self,
        key: i64,
        intent: Intent,
        value: UserTaskRecord,
        caller: Option<&Caller>,
    ) -> Result<Record, Status> {
        let tenants = self.authorized_tenants(caller);
        self.measured("UserTaskCommand", async {
            let partition = self.partition_of(key, intent.as_str())?;
            self.submit_as(partition, key, intent, RecordValue::UserTask(value), tenants).await
        })
        .await
    }
}
