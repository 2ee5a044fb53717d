// Drives a Zeebe gateway (Waggle, or any server of the protocol) with the Java client 8.5.8 through the
// single-node flows. Run in source-file mode:
//   java -cp "$PEERS/java-client/lib/*" Driver.java --address HOST:PORT --models DIR --management URL [--stream]
// Prints "OK <step>" after each step; exits 1 with the reason at the first failure. The incident
// key is read from Waggle's management API (GET <management>/v1/incidents).

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.camunda.zeebe.client.ZeebeClient;
import io.camunda.zeebe.client.api.command.ClientStatusException;
import io.camunda.zeebe.client.api.response.ActivatedJob;
import io.camunda.zeebe.client.api.response.PartitionBrokerHealth;
import io.camunda.zeebe.client.api.response.PartitionInfo;
import io.camunda.zeebe.client.api.response.Process;
import io.camunda.zeebe.client.api.response.ProcessInstanceEvent;
import io.camunda.zeebe.client.api.response.ProcessInstanceResult;
import io.camunda.zeebe.client.api.response.Topology;
import io.camunda.zeebe.client.api.worker.JobWorker;
import io.grpc.Status;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

public class Driver {
  static final ObjectMapper JSON = new ObjectMapper();

  static void ok(String step) {
    System.out.println("OK " + step);
    System.out.flush();
  }

  static void check(boolean condition, String message) {
    if (!condition) throw new AssertionError(message);
  }

  static <T> T eventually(Supplier<T> probe, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      T value = probe.get();
      if (value != null) return value;
      check(System.nanoTime() < deadline, "timed out waiting for " + what);
      Thread.sleep(100);
    }
  }

  /** Activates, until one comes, a job of the benchmark process's task in instance {@code instance}. */
  static ActivatedJob benchmarkJobOf(ZeebeClient client, long instance, String what) throws InterruptedException {
    return eventually(
        () ->
            client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(10).timeout(Duration.ofMinutes(1)).workerName("java-driver")
                .requestTimeout(Duration.ofSeconds(1)).send().join().getJobs().stream()
                .filter(j -> j.getProcessInstanceKey() == instance)
                .findFirst()
                .orElse(null),
        what);
  }

  static void expectStatus(Runnable call, Status.Code code, String what) {
    try {
      call.run();
    } catch (ClientStatusException e) {
      check(e.getStatusCode() == code, what + ": expected " + code + ", got " + e.getStatusCode() + " (" + e.getMessage() + ")");
      return;
    }
    throw new AssertionError(what + ": expected " + code + ", but the call succeeded");
  }

  static JsonNode incidentOf(String management, long processInstanceKey) {
    try {
      HttpResponse<String> response =
          HttpClient.newHttpClient()
              .send(HttpRequest.newBuilder(URI.create(management + "/v1/incidents")).build(), HttpResponse.BodyHandlers.ofString());
      for (JsonNode item : JSON.readTree(response.body()).get("items")) {
        if (Long.parseLong(item.get("processInstanceKey").asText()) == processInstanceKey) return item;
      }
      return null;
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }

  public static void main(String[] argv) throws Exception {
    String address = null, models = null, management = null;
    boolean stream = false;
    for (int i = 0; i < argv.length; i++) {
      switch (argv[i]) {
        case "--address" -> address = argv[++i];
        case "--models" -> models = argv[++i];
        case "--management" -> management = argv[++i];
        case "--stream" -> stream = true;
        default -> throw new IllegalArgumentException("unknown argument " + argv[i]);
      }
    }
    try (ZeebeClient client = ZeebeClient.newClientBuilder().gatewayAddress(address).usePlaintext().build()) {
      run(client, Path.of(models), management, stream);
    } catch (Throwable t) {
      System.err.println("FAILED: " + t);
      t.printStackTrace();
      System.exit(1);
    }
    ok("all");
    System.exit(0);
  }

  static void run(ZeebeClient client, Path models, String management, boolean stream) throws Exception {
    Topology topology = client.newTopologyRequest().send().join();
    check(topology.getClusterSize() == 1, "cluster size " + topology.getClusterSize());
    List<PartitionInfo> partitions = topology.getBrokers().get(0).getPartitions();
    check(partitions.size() == topology.getPartitionsCount(), "partitions " + partitions);
    for (PartitionInfo p : partitions) check(p.isLeader() && p.getHealth() == PartitionBrokerHealth.HEALTHY, "partition " + p);
    ok("topology");

    List<String> ids =
        client.newDeployResourceCommand()
            .addResourceFile(models.resolve("order.bpmn").toString())
            .addResourceFile(models.resolve("fail.bpmn").toString())
            .addResourceFile(models.resolve("one_task.bpmn").toString())
            .send()
            .join()
            .getProcesses()
            .stream()
            .map(Process::getBpmnProcessId)
            .toList();
    check(ids.equals(List.of("order", "fail", "benchmark")), "deployed " + ids);
    ok("deploy");

    Map<String, ActivatedJob> seen = new ConcurrentHashMap<>();
    AtomicBoolean fixed = new AtomicBoolean(false);
    AtomicInteger attempts = new AtomicInteger();
    CompletableFuture<Long> flakyDone = new CompletableFuture<>();
    List<JobWorker> workers =
        List.of(
            client.newWorker()
                .jobType("reserve")
                .handler(
                    (jobs, job) -> {
                      seen.put(String.valueOf(job.getVariablesAsMap().get("orderId")), job);
                      jobs.newCompleteCommand(job.getKey()).variables(Map.of("reserved", true)).send().join();
                    })
                .name("java-driver")
                .streamEnabled(stream)
                .open(),
            client.newWorker()
                .jobType("approve")
                .handler((jobs, job) -> jobs.newCompleteCommand(job.getKey()).variables(Map.of("approved", true)).send().join())
                .streamEnabled(stream)
                .open(),
            client.newWorker()
                .jobType("flaky")
                .handler(
                    (jobs, job) -> {
                      attempts.incrementAndGet();
                      if (!fixed.get()) {
                        jobs.newFailCommand(job.getKey()).retries(job.getRetries() - 1).errorMessage("boom").send().join();
                        return;
                      }
                      jobs.newCompleteCommand(job.getKey()).variables(Map.of("fixed", true)).send().join();
                      flakyDone.complete(job.getProcessInstanceKey());
                    })
                .timeout(Duration.ofMinutes(1))
                .streamEnabled(stream)
                .open());
    try {
      ProcessInstanceEvent created =
          client.newCreateInstanceCommand().bpmnProcessId("order").latestVersion().variables(Map.of("orderId", "j-1", "amount", 5)).send().join();
      ActivatedJob job = eventually(() -> seen.get("j-1"), "the reserve job of j-1");
      check(job.getProcessInstanceKey() == created.getProcessInstanceKey(), "job of another instance");
      check("j-1".equals(job.getVariablesAsMap().get("id")), "input mapping: " + job.getVariables());
      check("north".equals(job.getCustomHeaders().get("warehouse")), "headers: " + job.getCustomHeaders());
      check(job.getElementId().equals("reserve") && job.getBpmnProcessId().equals("order"), "job " + job);
      ok("create-and-complete");

      ProcessInstanceResult result =
          client.newCreateInstanceCommand()
              .bpmnProcessId("order")
              .latestVersion()
              .variables(Map.of("orderId", "j-2", "amount", 500))
              .withResult()
              .requestTimeout(Duration.ofSeconds(20))
              .send()
              .join();
      check(Boolean.TRUE.equals(result.getVariablesAsMap().get("reserved")), "result " + result.getVariables());
      check(Boolean.TRUE.equals(result.getVariablesAsMap().get("approved")), "result " + result.getVariables());
      ProcessInstanceResult fetched =
          client.newCreateInstanceCommand()
              .bpmnProcessId("order")
              .latestVersion()
              .variables(Map.of("orderId", "j-3", "amount", 1))
              .withResult()
              .fetchVariables("orderId")
              .requestTimeout(Duration.ofSeconds(20))
              .send()
              .join();
      check(fetched.getVariablesAsMap().equals(Map.of("orderId", "j-3")), "fetchVariables: " + fetched.getVariables());
      ok("create-with-result");

      ProcessInstanceEvent failing = client.newCreateInstanceCommand().bpmnProcessId("fail").latestVersion().send().join();
      JsonNode incident = eventually(() -> incidentOf(management, failing.getProcessInstanceKey()), "the incident of the failing job");
      check(incident.get("errorType").asText().equals("JOB_NO_RETRIES"), "incident " + incident);
      check(incident.get("errorMessage").asText().equals("boom"), "incident " + incident);
      check(attempts.get() == 2, "attempts before the incident: " + attempts.get());
      fixed.set(true);
      client.newUpdateRetriesCommand(Long.parseLong(incident.get("jobKey").asText())).retries(1).send().join();
      client.newResolveIncidentCommand(Long.parseLong(incident.get("key").asText())).send().join();
      check(flakyDone.get(30, TimeUnit.SECONDS) == failing.getProcessInstanceKey(), "another instance completed");
      check(incidentOf(management, failing.getProcessInstanceKey()) == null, "the incident is still listed");
      ok("incident");

      operations(client);
      decisions(client, models);
      badInput(client);
    } finally {
      workers.forEach(JobWorker::close);
    }
  }

  static void operations(ZeebeClient client) throws Exception {
    ProcessInstanceEvent idle =
        client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().variables(Map.of("n", 1)).send().join();
    client.newSetVariablesCommand(idle.getProcessInstanceKey()).variables(Map.of("extra", 42)).send().join();
    ActivatedJob job =
        benchmarkJobOf(client, idle.getProcessInstanceKey(), "the benchmark job");
    check(job.getVariablesAsMap().equals(Map.of("n", 1, "extra", 42)), "variables after SetVariables: " + job.getVariables());
    ok("set-variables");

    // ModifyProcessInstance: the task once more, with a variable local to it, and the first
    // one terminated (its job is gone)
    client.newModifyProcessInstanceCommand(idle.getProcessInstanceKey())
        .activateElement("task")
        .withVariables(Map.of("again", true), "task")
        .and()
        .terminateElement(job.getElementInstanceKey())
        .send()
        .join();
    expectStatus(() -> client.newCompleteCommand(job.getKey()).send().join(), Status.Code.NOT_FOUND, "job of a terminated task");
    ActivatedJob again =
        benchmarkJobOf(client, idle.getProcessInstanceKey(), "the job of the task activated by the modification");
    check(again.getVariablesAsMap().equals(Map.of("n", 1, "extra", 42, "again", true)), "variables after ModifyProcessInstance: " + again.getVariables());
    expectStatus(
        () -> client.newModifyProcessInstanceCommand(idle.getProcessInstanceKey()).activateElement("no-such-element").send().join(),
        Status.Code.INVALID_ARGUMENT,
        "modification activating an unknown element");
    ok("modify-process-instance");

    // MigrateProcessInstance: to another process whose task has another id; the job follows
    // (failed once with a retry left, it is activated again as the target's)
    String target =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><bpmn:definitions xmlns:bpmn=\"http://www.omg.org/spec/BPMN/20100524/MODEL\" "
            + "xmlns:zeebe=\"http://camunda.org/schema/zeebe/1.0\" id=\"d\" targetNamespace=\"t\"><bpmn:process id=\"benchmark-v2\" isExecutable=\"true\">"
            + "<bpmn:startEvent id=\"start\"/><bpmn:sequenceFlow id=\"f1\" sourceRef=\"start\" targetRef=\"task2\"/>"
            + "<bpmn:serviceTask id=\"task2\"><bpmn:extensionElements><zeebe:taskDefinition type=\"benchmark-task\"/></bpmn:extensionElements></bpmn:serviceTask>"
            + "<bpmn:sequenceFlow id=\"f2\" sourceRef=\"task2\" targetRef=\"end\"/><bpmn:endEvent id=\"end\"/></bpmn:process></bpmn:definitions>";
    long targetKey =
        client.newDeployResourceCommand().addResourceStringUtf8(target, "benchmark-v2.bpmn").send().join().getProcesses().get(0).getProcessDefinitionKey();
    client.newMigrateProcessInstanceCommand(idle.getProcessInstanceKey()).migrationPlan(targetKey).addMappingInstruction("task", "task2").send().join();
    client.newFailCommand(again.getKey()).retries(1).errorMessage("once more").send().join();
    ActivatedJob migrated =
        benchmarkJobOf(client, idle.getProcessInstanceKey(), "the job of the migrated task");
    check(migrated.getKey() == again.getKey(), "the migrated job keeps its key: " + migrated.getKey());
    check(migrated.getElementId().equals("task2") && migrated.getBpmnProcessId().equals("benchmark-v2"), "migrated job " + migrated);
    check(migrated.getProcessDefinitionKey() == targetKey, "migrated job's definition " + migrated.getProcessDefinitionKey());
    expectStatus(
        () -> client.newMigrateProcessInstanceCommand(idle.getProcessInstanceKey()).migrationPlan(2251799813999999L).addMappingInstruction("task2", "task").send().join(),
        Status.Code.NOT_FOUND,
        "migration to an unknown process definition");
    ok("migrate-process-instance");

    client.newCancelInstanceCommand(idle.getProcessInstanceKey()).send().join();
    expectStatus(() -> client.newCompleteCommand(migrated.getKey()).send().join(), Status.Code.NOT_FOUND, "job of a cancelled instance");
    expectStatus(() -> client.newCancelInstanceCommand(idle.getProcessInstanceKey()).send().join(), Status.Code.NOT_FOUND, "cancel twice");
    ok("cancel");

    long key =
        client.newPublishMessageCommand().messageName("order-paid").correlationKey("j-1").messageId("pay-j").timeToLive(Duration.ofMinutes(1))
            .variables(Map.of("paid", true)).send().join().getMessageKey();
    check(key > 0, "message key " + key);
    expectStatus(
        () -> client.newPublishMessageCommand().messageName("order-paid").correlationKey("j-1").messageId("pay-j").send().join(),
        Status.Code.ALREADY_EXISTS,
        "duplicate messageId");
    ok("publish-message");
  }

  // DMN: a DRG, a process with a business rule task and a form in one deployment; the task
  // evaluates the decision; EvaluateDecision by id and by key, a failure, an unknown id;
  // DeleteResource of the form and the graph
  static void decisions(ZeebeClient client, Path models) throws Exception {
    var deployment =
        client.newDeployResourceCommand()
            .addResourceFile(models.resolve("dish.dmn").toString())
            .addResourceFile(models.resolve("dinner.bpmn").toString())
            .addResourceFile(models.resolve("order.form").toString())
            .send()
            .join();
    List<String> decisionIds = deployment.getDecisions().stream().map(d -> d.getDmnDecisionId() + " v" + d.getVersion()).toList();
    check(decisionIds.equals(List.of("season v1", "dish v1", "greeting v1")), "deployed decisions " + decisionIds);
    check(deployment.getDecisionRequirements().size() == 1 && deployment.getDecisionRequirements().get(0).getDmnDecisionRequirementsId().equals("dinnerDecisions"),
        "deployed decision requirements " + deployment.getDecisionRequirements());
    check(deployment.getForm().size() == 1 && deployment.getForm().get(0).getFormId().equals("order-form") && deployment.getForm().get(0).getVersion() == 1,
        "deployed forms " + deployment.getForm());
    check(deployment.getProcesses().size() == 1 && deployment.getProcesses().get(0).getBpmnProcessId().equals("dinner"), "deployed processes " + deployment.getProcesses());
    long dishKey = deployment.getDecisions().stream().filter(d -> d.getDmnDecisionId().equals("dish")).findFirst().orElseThrow().getDecisionKey();

    ProcessInstanceEvent dinner =
        client.newCreateInstanceCommand().bpmnProcessId("dinner").latestVersion().variables(Map.of("month", 10, "guestCount", 4)).send().join();
    ActivatedJob serve =
        eventually(
            () ->
                client.newActivateJobsCommand().jobType("serve").maxJobsToActivate(10).timeout(Duration.ofMinutes(1)).workerName("java-driver")
                    .requestTimeout(Duration.ofSeconds(1)).send().join().getJobs().stream()
                    .filter(j -> j.getProcessInstanceKey() == dinner.getProcessInstanceKey())
                    .findFirst()
                    .orElse(null),
            "the job after the business rule task");
    check("Spareribs".equals(serve.getVariablesAsMap().get("meal")), "result variable of the business rule task: " + serve.getVariables());
    client.newCompleteCommand(serve.getKey()).send().join();

    var byId = client.newEvaluateDecisionCommand().decisionId("dish").variables(Map.of("month", 12, "guestCount", 2)).send().join();
    check(byId.getDecisionOutput().equals("\"Roastbeef\"") && byId.getDecisionVersion() == 1 && byId.getDecisionKey() == dishKey, "evaluated by id " + byId);
    check(byId.getDecisionRequirementsId().equals("dinnerDecisions") && byId.getFailedDecisionId().isEmpty(), "evaluated by id " + byId);
    List<String> evaluated = byId.getEvaluatedDecisions().stream().map(d -> d.getDecisionId() + ":" + d.getDecisionType() + "=" + d.getDecisionOutput()).toList();
    check(evaluated.equals(List.of("season:DECISION_TABLE=\"Winter\"", "dish:DECISION_TABLE=\"Roastbeef\"")), "evaluated decisions " + evaluated);
    var dish = byId.getEvaluatedDecisions().get(1);
    check(dish.getMatchedRules().size() == 1 && dish.getMatchedRules().get(0).getRuleId().equals("r2") && dish.getMatchedRules().get(0).getRuleIndex() == 2,
        "matched rules " + dish.getMatchedRules());
    check(dish.getEvaluatedInputs().size() == 2 && dish.getEvaluatedInputs().get(1).getInputValue().equals("2"), "evaluated inputs " + dish.getEvaluatedInputs());
    var byKey = client.newEvaluateDecisionCommand().decisionKey(dishKey).variables(Map.of("month", 7, "guestCount", 30)).send().join();
    check(byKey.getFailedDecisionId().equals("dish") && byKey.getFailureMessage().startsWith("Expected to evaluate decision 'dish', but multiple values aren't allowed"),
        "failed evaluation " + byKey);
    expectStatus(
        () -> client.newEvaluateDecisionCommand().decisionId("no-such-decision").send().join(), Status.Code.NOT_FOUND, "evaluation of an unknown decision");
    // DeleteResource: the form, then the graph with its decisions
    long formKey = deployment.getForm().get(0).getFormKey();
    client.newDeleteResourceCommand(formKey).send().join();
    expectStatus(() -> client.newDeleteResourceCommand(formKey).send().join(), Status.Code.NOT_FOUND, "deleting a deleted form");
    client.newDeleteResourceCommand(deployment.getDecisionRequirements().get(0).getDecisionRequirementsKey()).send().join();
    expectStatus(
        () -> client.newEvaluateDecisionCommand().decisionKey(dishKey).send().join(), Status.Code.NOT_FOUND, "evaluation of a deleted decision");
    ok("decisions");
  }

  static void badInput(ZeebeClient client) {
    expectStatus(() -> client.newCreateInstanceCommand().bpmnProcessId("no-such-process").latestVersion().send().join(), Status.Code.NOT_FOUND, "unknown process");
    expectStatus(
        () -> client.newCreateInstanceCommand().bpmnProcessId("order").latestVersion().variables("[1, 2]").send().join(),
        Status.Code.INVALID_ARGUMENT,
        "variables that are not a JSON object");
    expectStatus(
        () -> client.newDeployResourceCommand().addResourceStringUtf8("<definitions", "broken.bpmn").send().join(),
        Status.Code.INVALID_ARGUMENT,
        "invalid XML");
    expectStatus(
        () -> client.newUpdateRetriesCommand(2251799813999999L).retries(0).send().join(), Status.Code.INVALID_ARGUMENT, "update retries to 0");
    // as on Zeebe 8.5.8 (docs/compatibility.md): a negative maxJobsToActivate activates nothing
    // and is no error
    var none = client.newActivateJobsCommand().jobType("reserve").maxJobsToActivate(-1).send().join();
    check(none.getJobs().isEmpty(), "maxJobsToActivate -1 activated " + none.getJobs().size() + " jobs");
    ok("bad-input");
  }
}
