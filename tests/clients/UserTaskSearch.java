// The Camunda 8.8 Java client (io.camunda:camunda-client-java 8.8) with Zeebe user tasks over
// Waggle's REST API v2: deploys review.bpmn over gRPC, creates two instances, searches their
// user tasks (by process instance, state, assignee), gets one by key, assigns and completes one
// through /v2/user-tasks, and sees the search follow. Run by crates/waggle/tests/user_tasks.rs:
//   java -cp '<8.8 client jars>/*' UserTaskSearch.java <grpc port> <rest port> <review.bpmn>
// Prints OK and exits 0, or throws.

import io.camunda.client.CamundaClient;
import io.camunda.client.api.search.enums.UserTaskState;
import io.camunda.client.api.search.response.UserTask;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

public class UserTaskSearch {
  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  /** Polls `search` until `until` holds (the store follows the log). */
  static List<UserTask> await(Supplier<List<UserTask>> search, java.util.function.Predicate<List<UserTask>> until) throws Exception {
    List<UserTask> items = null;
    for (int i = 0; i < 200; i++) {
      items = search.get();
      if (until.test(items)) return items;
      Thread.sleep(25);
    }
    throw new AssertionError("the search never showed it: " + items);
  }

  public static void main(String[] args) throws Exception {
    try (CamundaClient client =
        CamundaClient.newClientBuilder()
            .grpcAddress(URI.create("http://127.0.0.1:" + args[0]))
            .restAddress(URI.create("http://127.0.0.1:" + args[1]))
            .preferRestOverGrpc(true)
            .defaultRequestTimeout(Duration.ofSeconds(10))
            .build()) {
      client.newDeployResourceCommand().useGrpc().addResourceBytes(Files.readAllBytes(Path.of(args[2])), "review.bpmn").send().join();
      long first = client.newCreateInstanceCommand().bpmnProcessId("review").latestVersion().send().join().getProcessInstanceKey();
      long second = client.newCreateInstanceCommand().bpmnProcessId("review").latestVersion().send().join().getProcessInstanceKey();

      var mine = await(
          () -> client.newUserTaskSearchRequest().filter(f -> f.processInstanceKey(first)).send().join().items(), l -> l.size() == 1);
      UserTask task = mine.get(0);
      check(task.getState() == UserTaskState.CREATED && task.getElementId().equals("approve"), "created: " + task);
      check(task.getCandidateGroups().equals(List.of("managers")), "candidate groups: " + task.getCandidateGroups());
      check(task.getDueDate() != null && task.getDueDate().getYear() == 2030, "due date: " + task.getDueDate());
      long key = task.getUserTaskKey();
      check(client.newUserTaskGetRequest(key).send().join().getProcessInstanceKey() == first, "get by key");

      client.newAssignUserTaskCommand(key).assignee("ann").send().join();
      await(() -> client.newUserTaskSearchRequest().filter(f -> f.assignee("ann")).send().join().items(),
          l -> l.size() == 1 && l.get(0).getUserTaskKey() == key);

      client.newCompleteUserTaskCommand(key).variables(Map.of("approved", true)).send().join();
      var open = await(() -> client.newUserTaskSearchRequest().filter(f -> f.state(UserTaskState.CREATED)).send().join().items(),
          l -> l.size() == 1);
      check(open.get(0).getProcessInstanceKey() == second, "the other task is open: " + open);
      var done = client.newUserTaskSearchRequest().filter(f -> f.state(UserTaskState.COMPLETED)).send().join().items();
      check(done.size() == 1 && done.get(0).getCompletionDate() != null, "the completed task: " + done);
      System.out.println("OK");
    }
  }
}
