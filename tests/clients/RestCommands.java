// The Camunda 8.8 Java client (io.camunda:camunda-client-java 8.8) driving Waggle's REST API v2
// command endpoints with preferRestOverGrpc(true) and a gRPC address where nothing listens, so
// every command below can only succeed over REST: deploy (multipart), create, activate jobs,
// fail a job to an incident, update its retries, resolve the incident, update retries and
// timeout in one JOB UPDATE (and a 400 for retries 0), set variables, complete,
// publish a message, broadcast a signal, throw an error, modify an instance, evaluate a
// decision, delete a resource; correlate a message to a waiting catch event (the answer names
// its process instance), and one nothing waits for (404, Zeebe's NOT_FOUND). Also the reads
// of what they left: element statistics of an instance and of a definition, and the
// evaluation's decision instances (search, get) and decision definition (search, XML).
// Run by crates/waggle/tests/rest.rs: java -cp '<8.8 client jars>/*' RestCommands.java
// <rest port> <models dir>; prints OK and exits 0, or throws.

import io.camunda.client.CamundaClient;
import io.camunda.client.api.command.ProblemException;
import io.camunda.client.api.response.ActivatedJob;
import io.camunda.client.api.search.enums.ProcessInstanceState;
import io.camunda.client.api.search.response.DecisionInstanceState;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

public class RestCommands {
  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static <T> T eventually(Supplier<T> f, String what) throws InterruptedException {
    for (int i = 0; i < 400; i++) {
      T t = f.get();
      if (t != null) return t;
      Thread.sleep(50);
    }
    throw new AssertionError("never: " + what);
  }

  static List<ActivatedJob> activate(CamundaClient client, String type) {
    return client.newActivateJobsCommand().jobType(type).maxJobsToActivate(5).timeout(Duration.ofSeconds(30))
        .workerName("rest-commands").requestTimeout(Duration.ofSeconds(5)).send().join().getJobs();
  }

  public static void main(String[] args) throws Exception {
    int deadPort;
    try (ServerSocket s = new ServerSocket(0)) {
      deadPort = s.getLocalPort(); // closed again: no gRPC server there
    }
    Path models = Path.of(args[1]);
    try (CamundaClient client =
        CamundaClient.newClientBuilder()
            .grpcAddress(URI.create("http://127.0.0.1:" + deadPort))
            .restAddress(URI.create("http://127.0.0.1:" + args[0]))
            .preferRestOverGrpc(true)
            .defaultRequestTimeout(Duration.ofSeconds(15))
            .build()) {
      // deployment: multipart, three resources
      var deployment = client.newDeployResourceCommand()
          .addResourceFile(models.resolve("rest_commands.bpmn").toString())
          .addResourceFile(models.resolve("fail.bpmn").toString())
          .addResourceFile(models.resolve("dish.dmn").toString())
          .send().join();
      check(deployment.getKey() > 0, "deployment key");
      check(deployment.getProcesses().size() == 2, "processes: " + deployment.getProcesses());
      check(deployment.getDecisions().size() == 3, "decisions: " + deployment.getDecisions());
      check(deployment.getDecisionRequirements().size() == 1, "drg: " + deployment.getDecisionRequirements());
      check(deployment.getProcesses().get(0).getBpmnProcessId().equals("rest_commands"), "process id");

      // create, activate, fail to an incident, update retries, resolve, set variables, complete
      long instance = client.newCreateInstanceCommand().bpmnProcessId("rest_commands").latestVersion()
          .variables(Map.of("orderId", "o-1")).send().join().getProcessInstanceKey();
      List<ActivatedJob> jobs = activate(client, "rest-work");
      check(jobs.size() == 1, "one job: " + jobs);
      ActivatedJob job = jobs.get(0);
      check(job.getProcessInstanceKey() == instance && "o-1".equals(job.getVariablesAsMap().get("orderId")), "the job: " + job);
      client.newFailCommand(job.getKey()).retries(0).errorMessage("boom").send().join();
      var incident = eventually(() -> {
        var items = client.newIncidentSearchRequest().filter(f -> f.processInstanceKey(instance)).send().join().items();
        return items.isEmpty() ? null : items.get(0);
      }, "the incident of the failed job");
      check("boom".equals(incident.getErrorMessage()), "incident message: " + incident);
      client.newUpdateJobCommand(job.getKey()).updateRetries(1).send().join();
      client.newResolveIncidentCommand(incident.getIncidentKey()).send().join();
      jobs = activate(client, "rest-work");
      check(jobs.size() == 1 && jobs.get(0).getKey() == job.getKey(), "the job again: " + jobs);
      client.newUpdateJobCommand(job.getKey()).updateTimeout(Duration.ofMinutes(2)).send().join();
      // one JOB UPDATE for both; a changeset with an invalid part changes nothing (400)
      client.newUpdateJobCommand(job.getKey()).update(3, 120_000L).send().join();
      try {
        client.newUpdateJobCommand(job.getKey()).update(0, 60_000L).send().join();
        throw new AssertionError("retries 0 were accepted");
      } catch (ProblemException e) {
        check(e.code() == 400 && e.getMessage().contains("positive amount of retries"), "400: " + e);
      }
      eventually(() -> client.newJobSearchRequest().filter(f -> f.jobKey(job.getKey())).send().join()
          .items().stream().anyMatch(j -> j.getRetries() == 3) ? true : null, "the job's retries updated to 3");
      client.newSetVariablesCommand(instance).variables(Map.of("extra", 7)).send().join();
      client.newCompleteCommand(job.getKey()).variables(Map.of("done", true)).send().join();

      // publish and broadcast: the instance completes
      var published = client.newPublishMessageCommand().messageName("paid").correlationKey("o-1")
          .timeToLive(Duration.ofMinutes(1)).variables(Map.of("paid", true)).send().join();
      check(published.getMessageKey() > 0, "message key");
      var signal = client.newBroadcastSignalCommand().signalName("go").send().join();
      check(signal.getKey() > 0, "signal key");
      eventually(() -> client.newProcessInstanceSearchRequest()
          .filter(f -> f.processInstanceKey(instance).state(ProcessInstanceState.COMPLETED)).send().join().items().isEmpty() ? null : true,
          "the instance completed");
      // element statistics of the completed instance, and of its definition's completed instances
      var stats = client.newProcessInstanceElementStatisticsRequest(instance).send().join();
      check(stats.stream().anyMatch(s -> s.getElementId().equals("work") && s.getCompleted() == 1 && s.getActive() == 0), "stats: " + stats);
      long definitionKey = deployment.getProcesses().get(0).getProcessDefinitionKey();
      var definitionStats = client.newProcessDefinitionElementStatisticsRequest(definitionKey)
          .filter(f -> f.state(ProcessInstanceState.COMPLETED).elementId("work")).send().join();
      check(definitionStats.size() == 1 && definitionStats.get(0).getCompleted() == 1, "definition stats: " + definitionStats);
      var vars = client.newVariableSearchRequest().filter(f -> f.processInstanceKey(instance)).send().join().items();
      check(vars.stream().anyMatch(v -> v.getName().equals("extra") && v.getValue().equals("7")), "extra: " + vars);
      check(vars.stream().anyMatch(v -> v.getName().equals("paid") && v.getValue().equals("true")), "paid: " + vars);

      // correlation: nothing waits for o-2 (404); the catch event of o-3 takes the message
      try {
        client.newCorrelateMessageCommand().messageName("paid").correlationKey("o-2").send().join();
        throw new AssertionError("a correlation reached nothing but answered");
      } catch (ProblemException e) {
        check(e.code() == 404 && e.getMessage().contains("Expected to find subscription for message with name 'paid'"), "404: " + e);
      }
      long third = client.newCreateInstanceCommand().bpmnProcessId("rest_commands").latestVersion()
          .variables(Map.of("orderId", "o-3")).send().join().getProcessInstanceKey();
      jobs = activate(client, "rest-work");
      check(jobs.size() == 1 && jobs.get(0).getProcessInstanceKey() == third, "the third job: " + jobs);
      client.newCompleteCommand(jobs.get(0).getKey()).send().join();
      var correlated = eventually(() -> {
        try {
          return client.newCorrelateMessageCommand().messageName("paid").correlationKey("o-3")
              .variables(Map.of("correlated", true)).send().join();
        } catch (ProblemException e) {
          check(e.code() == 404, "404 until the catch event waits: " + e);
          return null;
        }
      }, "the correlation to the catch event");
      check(correlated.getProcessInstanceKey() == third, "correlated to the third instance: " + correlated.getProcessInstanceKey());
      check(correlated.getMessageKey() > 0 && "<default>".equals(correlated.getTenantId()), "message key, tenant: " + correlated);
      eventually(() -> client.newVariableSearchRequest().filter(f -> f.processInstanceKey(third)).send().join()
          .items().stream().anyMatch(v -> v.getName().equals("correlated")) ? true : null, "the correlated message's variable");

      // modification: terminate the job's element, activate the signal catch, broadcast
      long second = client.newCreateInstanceCommand().bpmnProcessId("rest_commands").latestVersion()
          .variables(Map.of("orderId", "o-2")).send().join().getProcessInstanceKey();
      jobs = activate(client, "rest-work");
      check(jobs.size() == 1 && jobs.get(0).getProcessInstanceKey() == second, "the second job: " + jobs);
      client.newModifyProcessInstanceCommand(second).activateElement("wait_go").and()
          .terminateElement(jobs.get(0).getElementInstanceKey()).send().join();
      client.newBroadcastSignalCommand().signalName("go").send().join();
      eventually(() -> client.newProcessInstanceSearchRequest()
          .filter(f -> f.processInstanceKey(second).state(ProcessInstanceState.COMPLETED)).send().join().items().isEmpty() ? null : true,
          "the modified instance completed");

      // a thrown error without a catch event: accepted (the engine raises an incident)
      client.newCreateInstanceCommand().bpmnProcessId("fail").latestVersion().send().join();
      jobs = activate(client, "flaky");
      check(jobs.size() == 1, "the flaky job: " + jobs);
      client.newThrowErrorCommand(jobs.get(0).getKey()).errorCode("E-1").errorMessage("thrown").send().join();

      // decision evaluation
      var evaluated = client.newEvaluateDecisionCommand().decisionId("dish")
          .variables(Map.of("month", 10, "guestCount", 4)).send().join();
      check(evaluated.getDecisionOutput().equals("\"Spareribs\""), "output: " + evaluated.getDecisionOutput());
      check(evaluated.getEvaluatedDecisions().size() == 2, "evaluated: " + evaluated.getEvaluatedDecisions());
      check(evaluated.getDecisionEvaluationKey() > 0, "evaluation key");

      // the evaluation in the query store: a decision instance per evaluated decision
      var decisionInstances = eventually(() -> {
        var items = client.newDecisionInstanceSearchRequest()
            .filter(f -> f.decisionInstanceKey(evaluated.getDecisionEvaluationKey())).send().join().items();
        return items.size() == 2 ? items : null;
      }, "the evaluation's decision instances");
      var dish = decisionInstances.stream().filter(d -> d.getDecisionDefinitionId().equals("dish")).findFirst().orElseThrow();
      check(dish.getState() == DecisionInstanceState.EVALUATED && dish.getResult().equals("\"Spareribs\""), "dish: " + dish);
      var fetched = client.newDecisionInstanceGetRequest(dish.getDecisionInstanceId()).send().join();
      check(!fetched.getMatchedRules().isEmpty() && !fetched.getEvaluatedInputs().isEmpty(), "inputs and rules: " + fetched);
      var dishDefinition = client.newDecisionDefinitionSearchRequest().filter(f -> f.decisionDefinitionId("dish")).send().join().singleItem();
      check(dishDefinition.getDecisionKey() == dish.getDecisionDefinitionKey(), "the definition: " + dishDefinition);
      check(client.newDecisionDefinitionGetXmlRequest(dishDefinition.getDecisionKey()).send().join().contains("season"), "the DRG's XML");

      // deletion of the decision requirements, then evaluation fails with 404
      client.newDeleteResourceCommand(deployment.getDecisionRequirements().get(0).getDecisionRequirementsKey()).send().join();
      try {
        client.newEvaluateDecisionCommand().decisionId("dish").variables(Map.of("month", 10)).send().join();
        throw new AssertionError("a deleted decision was evaluated");
      } catch (ProblemException e) {
        check(e.code() == 404, "404 after deletion: " + e);
      }

      // an unknown job is 404
      try {
        client.newCompleteCommand(2251799813685249L).send().join();
        throw new AssertionError("an unknown job was completed");
      } catch (ProblemException e) {
        check(e.code() == 404, "404: " + e);
      }
      System.out.println("OK");
    }
  }
}
