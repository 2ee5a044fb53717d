// The Zeebe 8.5.8 Java client's user task commands against Waggle: they go over REST (Zeebe
// 8.5's /v1/user-tasks, at the client's restAddress). Deploys review.bpmn (a Zeebe user task),
// creates an instance, finds the task's key through the REST API's user task search, then
// assigns, claims (refused: someone else has it), unassigns, updates and completes it, and
// checks each effect through GET /v2/user-tasks/{key}. Run by crates/waggle/tests/user_tasks.rs:
//   java -cp '<8.5 client jars>/*' UserTasks.java <grpc port> <rest port> <review.bpmn>
// Prints the task key and OK, exits 0, or throws.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.camunda.zeebe.client.ZeebeClient;
import io.camunda.zeebe.client.api.command.ProblemException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

public class UserTasks {
  static final ObjectMapper JSON = new ObjectMapper();
  static final HttpClient HTTP = HttpClient.newHttpClient();
  static String rest;

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static JsonNode http(String method, String path, String body) throws Exception {
    var request = HttpRequest.newBuilder(URI.create(rest + path)).header("Content-Type", "application/json")
        .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body)).build();
    var response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
    check(response.statusCode() == 200, method + " " + path + ": " + response.statusCode() + " " + response.body());
    return JSON.readTree(response.body());
  }

  /** The task as the store shows it, once `until` holds (the exporter runs after the commit). */
  static JsonNode task(long key, Predicate<JsonNode> until) throws Exception {
    JsonNode t = null;
    for (int i = 0; i < 200; i++) {
      var search = http("POST", "/v2/user-tasks/search", "{\"filter\":{\"userTaskKey\":\"" + key + "\"}}");
      if (search.get("items").size() == 1) {
        t = search.get("items").get(0);
        if (until.test(t)) return t;
      }
      Thread.sleep(25);
    }
    throw new AssertionError("the task never showed the change: " + t);
  }

  /** The problem answer behind a failed command (join() may wrap it). */
  static ProblemException problem(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof ProblemException p) return p;
    }
    throw new AssertionError("not a problem answer: " + e, e);
  }

  public static void main(String[] args) throws Exception {
    rest = "http://127.0.0.1:" + args[1];
    try (ZeebeClient client = ZeebeClient.newClientBuilder()
        .gatewayAddress("127.0.0.1:" + args[0])
        .restAddress(URI.create(rest))
        .usePlaintext()
        .defaultRequestTimeout(Duration.ofSeconds(10))
        .build()) {
      client.newDeployResourceCommand().addResourceFile(args[2]).send().join();
      long instance = client.newCreateInstanceCommand().bpmnProcessId("review").latestVersion().send().join().getProcessInstanceKey();

      long key = -1;
      for (int i = 0; i < 200 && key < 0; i++) {
        var found = http("POST", "/v2/user-tasks/search", "{\"filter\":{\"processInstanceKey\":\"" + instance + "\"}}").get("items");
        if (found.size() == 1) key = Long.parseLong(found.get(0).get("userTaskKey").asText());
        else Thread.sleep(25);
      }
      check(key > 0, "the user task was not found");
      System.out.println("task " + key);
      var created = task(key, t -> true);
      check(created.get("state").asText().equals("CREATED") && created.get("candidateGroups").toString().equals("[\"managers\"]"), "created: " + created);
      check(created.get("dueDate").asText().equals("2030-01-01T09:00Z"), "due date: " + created);

      client.newUserTaskAssignCommand(key).assignee("ann").send().join();
      task(key, t -> "ann".equals(t.path("assignee").asText()));

      try {
        client.newUserTaskAssignCommand(key).assignee("bob").allowOverride(false).send().join();
        throw new AssertionError("claiming a task someone else has was accepted");
      } catch (RuntimeException e) {
        var p = problem(e);
        check(p.code() == 409 && p.details().getDetail().contains("already been assigned"), "claim refused: " + p.getMessage());
      }

      client.newUserTaskUnassignCommand(key).send().join();
      task(key, t -> t.path("assignee").isMissingNode() || t.path("assignee").isNull());

      client.newUserTaskUpdateCommand(key).candidateUsers(List.of("carl", "dora")).dueDate("2031-02-03T04:05:06+01:00").send().join();
      var updated = task(key, t -> t.path("candidateUsers").toString().equals("[\"carl\",\"dora\"]"));
      check(updated.get("dueDate").asText().equals("2031-02-03T04:05:06+01:00"), "updated due date: " + updated);

      try {
        client.newUserTaskCompleteCommand(123L).send().join();
        throw new AssertionError("completing an unknown task was accepted");
      } catch (RuntimeException e) {
        check(problem(e).code() == 404, "unknown task: " + e);
      }

      client.newUserTaskCompleteCommand(key).variables(Map.of("approved", true)).send().join();
      var done = task(key, t -> t.get("state").asText().equals("COMPLETED"));
      check(!done.path("completionDate").isNull(), "completion date: " + done);
      var vars = http("POST", "/v2/variables/search", "{\"filter\":{\"processInstanceKey\":\"" + instance + "\",\"name\":\"approved\"}}");
      check(vars.get("items").size() == 1, "the completion's variable: " + vars);
      System.out.println("OK");
    }
  }
}
