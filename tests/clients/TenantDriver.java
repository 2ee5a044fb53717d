// Multi-tenancy with the Java client 8.5.8's own tenant settings (`.tenantId(...)`, `.tenantIds(...)`),
// against a node with multi-tenancy on (--mode on) or off (--mode off):
//   java -cp "$PEERS/java-client/lib/*" TenantDriver.java --address HOST:PORT --models DIR --mode on|off
// Prints "OK <step>" per step verified; any failure is an exception (exit code 1).
// What it checks is Zeebe 8.5's behaviour as `MultiTenancyOverIdentityIT` (camunda/zeebe
// qa/integration-tests, io.camunda.zeebe.it.multitenancy) and the gateway's
// `MultiTenancyDisabledTest` describe it.

import io.camunda.zeebe.client.ZeebeClient;
import io.camunda.zeebe.client.api.command.ClientStatusException;
import io.camunda.zeebe.client.api.response.ActivatedJob;
import io.camunda.zeebe.client.api.response.DeploymentEvent;
import io.camunda.zeebe.client.api.response.ProcessInstanceEvent;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

public class TenantDriver {
  static void check(boolean condition, String what) {
    if (!condition) throw new IllegalStateException("failed: " + what);
  }

  public static void main(String[] args) {
    String address = null, models = null, mode = null;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--address" -> address = args[i + 1];
        case "--models" -> models = args[i + 1];
        case "--mode" -> mode = args[i + 1];
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    String model = Path.of(models, "one_task.bpmn").toString();
    try (ZeebeClient client =
        ZeebeClient.newClientBuilder()
            .gatewayAddress(address)
            .usePlaintext()
            .defaultRequestTimeout(Duration.ofSeconds(20))
            .build()) {
      if (mode.equals("on")) {
        on(client, model);
      } else {
        off(client, model);
      }
    }
  }

  static void on(ZeebeClient client, String model) {
    DeploymentEvent a = client.newDeployResourceCommand().addResourceFile(model).tenantId("tenant-a").send().join();
    DeploymentEvent b = client.newDeployResourceCommand().addResourceFile(model).tenantId("tenant-b").send().join();
    check(a.getTenantId().equals("tenant-a") && b.getTenantId().equals("tenant-b"), "deployments carry their tenant");
    check(a.getProcesses().get(0).getVersion() == 1 && b.getProcesses().get(0).getVersion() == 1, "versions per tenant");
    check(a.getProcesses().get(0).getTenantId().equals("tenant-a"), "the process carries its tenant");
    check(
        a.getProcesses().get(0).getProcessDefinitionKey() != b.getProcesses().get(0).getProcessDefinitionKey(),
        "two processes");
    System.out.println("OK deploy-per-tenant");

    ProcessInstanceEvent ia =
        client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().tenantId("tenant-a").send().join();
    ProcessInstanceEvent ib =
        client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().tenantId("tenant-b").send().join();
    check(ia.getTenantId().equals("tenant-a") && ib.getTenantId().equals("tenant-b"), "instances carry their tenant");
    check(ia.getProcessDefinitionKey() == a.getProcesses().get(0).getProcessDefinitionKey(), "tenant-a's process");
    System.out.println("OK create-per-tenant");

    // the client's default tenant has no such process
    try {
      client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().send().join();
      throw new IllegalStateException("an instance of another tenant's process was created");
    } catch (ClientStatusException e) {
      check(e.getStatusCode() == io.grpc.Status.Code.NOT_FOUND, "NOT_FOUND, not " + e.getStatusCode());
    }
    System.out.println("OK other-tenants-invisible");

    List<ActivatedJob> jobsA =
        client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(10).tenantId("tenant-a")
            .requestTimeout(Duration.ofSeconds(5)).send().join().getJobs();
    check(jobsA.size() == 1, "one job for tenant-a, not " + jobsA.size());
    check(jobsA.get(0).getTenantId().equals("tenant-a"), "the job is tenant-a's");
    check(jobsA.get(0).getProcessInstanceKey() == ia.getProcessInstanceKey(), "tenant-a's instance");
    List<ActivatedJob> defaults =
        client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(10)
            .requestTimeout(Duration.ofMillis(200)).send().join().getJobs();
    check(defaults.isEmpty(), "a worker of the default tenant gets no job of the others");
    List<ActivatedJob> jobsB =
        client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(10)
            .tenantIds(List.of("tenant-a", "tenant-b")).requestTimeout(Duration.ofSeconds(5)).send().join().getJobs();
    check(jobsB.size() == 1 && jobsB.get(0).getTenantId().equals("tenant-b"), "tenant-b's job");
    client.newCompleteCommand(jobsA.get(0)).send().join();
    client.newCompleteCommand(jobsB.get(0)).send().join();
    System.out.println("OK jobs-by-tenant");

    var published =
        client.newPublishMessageCommand().messageName("m").correlationKey("k").tenantId("tenant-a").send().join();
    check(published.getTenantId().equals("tenant-a"), "the message carries its tenant");
    var signal = client.newBroadcastSignalCommand().signalName("s").tenantId("tenant-b").send().join();
    check(signal.getTenantId().equals("tenant-b"), "the signal carries its tenant");
    System.out.println("OK message-and-signal");

    try {
      client.newDeployResourceCommand().addResourceFile(model).tenantId("not a tenant!").send().join();
      throw new IllegalStateException("an illegal tenant id was taken");
    } catch (ClientStatusException e) {
      check(e.getStatusCode() == io.grpc.Status.Code.INVALID_ARGUMENT, "INVALID_ARGUMENT");
      check(e.getMessage().contains("but tenant identifier contains illegal characters"), e.getMessage());
    }
    System.out.println("OK invalid-tenant");
  }

  static void off(ZeebeClient client, String model) {
    try {
      client.newDeployResourceCommand().addResourceFile(model).tenantId("tenant-a").send().join();
      throw new IllegalStateException("a tenant was taken with multi-tenancy off");
    } catch (ClientStatusException e) {
      check(e.getStatusCode() == io.grpc.Status.Code.INVALID_ARGUMENT, "INVALID_ARGUMENT, not " + e.getStatusCode());
      check(
          e.getMessage()
              .contains(
                  "Expected to handle gRPC request DeployResource with tenant identifier 'tenant-a', but multi-tenancy is disabled"),
          e.getMessage());
    }
    System.out.println("OK refused");
    DeploymentEvent d = client.newDeployResourceCommand().addResourceFile(model).send().join();
    check(d.getTenantId().equals("<default>"), "the default tenant");
    ProcessInstanceEvent i = client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().send().join();
    check(i.getTenantId().equals("<default>"), "the default tenant's instance");
    try {
      client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(1).tenantId("tenant-a").send().join();
      throw new IllegalStateException("a tenant was taken with multi-tenancy off");
    } catch (ClientStatusException e) {
      check(e.getMessage().contains("but multi-tenancy is disabled"), e.getMessage());
    }
    List<ActivatedJob> jobs =
        client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(1)
            .requestTimeout(Duration.ofSeconds(5)).send().join().getJobs();
    check(jobs.size() == 1 && jobs.get(0).getTenantId().equals("<default>"), "the default tenant's job");
    System.out.println("OK default");
  }
}
