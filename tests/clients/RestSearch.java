// The Camunda 8.8 Java client (io.camunda:camunda-client-java 8.8) against Waggle's REST API v2
// with preferRestOverGrpc(true): deploys, creates and cancels over REST and searches every
// entity the query store holds (RestCommands.java drives the other commands).
// Run by crates/waggle/tests/clients.rs: java -cp '<8.8 client jars>/*' RestSearch.java
// <grpc port> <rest port> <one_task.bpmn>; prints OK and exits 0, or throws.

import io.camunda.client.CamundaClient;
import io.camunda.client.api.command.ProblemException;
import io.camunda.client.api.search.enums.ElementInstanceType;
import io.camunda.client.api.search.enums.ProcessInstanceState;
import io.camunda.client.api.search.response.ProcessInstance;
import io.camunda.client.api.search.response.SearchResponse;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

public class RestSearch {
  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  public static void main(String[] args) throws Exception {
    try (CamundaClient client =
        CamundaClient.newClientBuilder()
            .grpcAddress(URI.create("http://127.0.0.1:" + args[0]))
            .restAddress(URI.create("http://127.0.0.1:" + args[1]))
            .preferRestOverGrpc(true)
            .defaultRequestTimeout(Duration.ofSeconds(10))
            .build()) {
      var topology = client.newTopologyRequest().send().join();
      check(topology.getPartitionsCount() == 1, "partitions: " + topology);
      check(topology.getBrokers().get(0).getPartitions().get(0).isLeader(), "leader: " + topology);

      client.newDeployResourceCommand().addResourceBytes(Files.readAllBytes(Path.of(args[2])), "one_task.bpmn").send().join();
      List<Long> keys = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        var created = client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().variables(Map.of("i", i)).send().join();
        keys.add(created.getProcessInstanceKey());
      }
      client.newCancelInstanceCommand(keys.get(0)).send().join();

      // wait for the query store
      SearchResponse<ProcessInstance> all = null;
      for (int tries = 0; tries < 200; tries++) {
        all = client.newProcessInstanceSearchRequest().filter(f -> f.processDefinitionId("benchmark")).send().join();
        if (all.page().totalItems() == 5 && client.newProcessInstanceSearchRequest().filter(f -> f.state(ProcessInstanceState.TERMINATED)).send().join().items().size() == 1) break;
        Thread.sleep(50);
      }
      check(all.page().totalItems() == 5, "5 instances: " + all.page().totalItems());

      var desc = client.newProcessInstanceSearchRequest().sort(s -> s.processInstanceKey().desc()).page(p -> p.limit(2)).send().join();
      check(desc.items().size() == 2 && desc.items().get(0).getProcessInstanceKey().equals(keys.get(4)), "sorted descending: " + desc.items());
      var next = client.newProcessInstanceSearchRequest().sort(s -> s.processInstanceKey().desc()).page(p -> p.limit(2).after(desc.page().endCursor())).send().join();
      check(next.items().get(0).getProcessInstanceKey().equals(keys.get(2)), "the next page: " + next.items());

      var terminated = client.newProcessInstanceSearchRequest().filter(f -> f.state(ProcessInstanceState.TERMINATED)).send().join();
      check(terminated.singleItem().getProcessInstanceKey().equals(keys.get(0)), "the cancelled instance: " + terminated.items());
      check(terminated.singleItem().getEndDate() != null, "an end date");
      var some = client.newProcessInstanceSearchRequest().filter(f -> f.processInstanceKey(k -> k.in(keys.get(1), keys.get(3)))).send().join();
      check(some.page().totalItems() == 2, "$in: " + some.items());

      var one = client.newProcessInstanceGetRequest(keys.get(1)).send().join();
      check(one.getProcessDefinitionId().equals("benchmark") && one.getState() == ProcessInstanceState.ACTIVE, "get: " + one);

      var definition = client.newProcessDefinitionSearchRequest().filter(f -> f.processDefinitionId("benchmark")).send().join().singleItem();
      var xml = client.newProcessDefinitionGetXmlRequest(definition.getProcessDefinitionKey()).send().join();
      check(xml.contains("benchmark-task"), "the XML");

      var tasks = client.newElementInstanceSearchRequest().filter(f -> f.processInstanceKey(keys.get(1)).type(ElementInstanceType.SERVICE_TASK)).send().join();
      check(tasks.items().size() == 1 && tasks.items().get(0).getElementId() != null, "the service task: " + tasks.items());
      var vars = client.newVariableSearchRequest().filter(f -> f.name("i")).send().join();
      check(vars.page().totalItems() == 5, "variables: " + vars.items());
      var jobs = client.newJobSearchRequest().filter(f -> f.type("benchmark-task")).send().join();
      check(jobs.page().totalItems() == 5, "jobs: " + jobs.items());
      var incidents = client.newIncidentSearchRequest().send().join();
      check(incidents.items().isEmpty(), "incidents: " + incidents.items());

      try {
        client.newProcessInstanceGetRequest(1L).send().join();
        throw new AssertionError("an unknown key was found");
      } catch (ProblemException e) {
        check(e.code() == 404, "404: " + e);
      }
      System.out.println("OK");
    }
  }
}
