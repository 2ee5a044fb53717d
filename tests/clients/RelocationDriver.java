// Messages through a growing partition count, with the Java client 8.5.8: correlation keys move
// to the new layout while instances wait and messages are buffered (issue 31).
// Run in source-file mode:
//   java -cp "$PEERS/java-client/lib/*" RelocationDriver.java --address HOST:PORT --keys N \
//        --ready FILE --grown FILE --report FILE
// 1. Deploys `relocating` (a message catch on `go` with correlation key `key`, then a task), creates
//    N instances waiting for keys `waiting-i` (their subscriptions open before the growth) and
//    publishes N messages `go` for keys `buffered-i` with a time to live of 10 minutes and no
//    subscriber yet; then writes FILE --ready.
// 2. Until FILE --grown exists (the test writes it once the partition count grew), two lanes
//    create an instance and publish its message for fresh keys `during-*`.
// 3. Publishes the messages of `waiting-i` and creates the instances of `buffered-i`.
// Every publication carries its key as message id, so a try that failed but was taken is not
// published twice (ALREADY_EXISTS counts as published). A worker completes the task after the
// catch and records which element instance each key's message reached. Waits (at most 120 s)
// until every published key reached its instance, then writes a JSON report and exits 0 only
// when each published message reached exactly one instance. Failures are counted by status.

import io.camunda.zeebe.client.ZeebeClient;
import io.camunda.zeebe.client.api.command.ClientStatusException;
import io.camunda.zeebe.client.api.worker.JobWorker;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

public class RelocationDriver {
  static final String MODEL =
      """
      <?xml version="1.0" encoding="UTF-8"?>
      <bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
          xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="waggle">
        <bpmn:message id="go" name="go">
          <bpmn:extensionElements><zeebe:subscription correlationKey="=key" /></bpmn:extensionElements>
        </bpmn:message>
        <bpmn:process id="relocating" isExecutable="true">
          <bpmn:startEvent id="start" />
          <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="wait" />
          <bpmn:intermediateCatchEvent id="wait"><bpmn:messageEventDefinition messageRef="go" /></bpmn:intermediateCatchEvent>
          <bpmn:sequenceFlow id="f2" sourceRef="wait" targetRef="after" />
          <bpmn:serviceTask id="after">
            <bpmn:extensionElements><zeebe:taskDefinition type="after-go" /></bpmn:extensionElements>
          </bpmn:serviceTask>
          <bpmn:sequenceFlow id="f3" sourceRef="after" targetRef="end" />
          <bpmn:endEvent id="end" />
        </bpmn:process>
      </bpmn:definitions>
      """;

  static final Map<String, AtomicLong> failures = new ConcurrentHashMap<>();
  /** The element instances each key's message reached (the task after the catch had a job). */
  static final Map<String, Set<Long>> correlatedTo = new ConcurrentHashMap<>();
  /** Acknowledged publications by the partition of their message key (key >> 51). */
  static final Map<Long, AtomicLong> publishedByPartition = new ConcurrentHashMap<>();
  static final Set<String> published = ConcurrentHashMap.newKeySet();
  static final Set<String> created = ConcurrentHashMap.newKeySet();

  public static void main(String[] argv) throws Exception {
    String address = null, ready = null, grown = null, report = null;
    int keys = 100;
    for (int i = 0; i < argv.length; i++) {
      switch (argv[i]) {
        case "--address" -> address = argv[++i];
        case "--keys" -> keys = Integer.parseInt(argv[++i]);
        case "--ready" -> ready = argv[++i];
        case "--grown" -> grown = argv[++i];
        case "--report" -> report = argv[++i];
        default -> throw new IllegalArgumentException("unknown argument " + argv[i]);
      }
    }
    if (address == null || ready == null || grown == null || report == null) {
      throw new IllegalArgumentException("--address, --ready, --grown and --report are required");
    }
    int code;
    try (ZeebeClient client =
        ZeebeClient.newClientBuilder().gatewayAddress(address).usePlaintext().defaultRequestTimeout(Duration.ofSeconds(15)).build()) {
      code = run(client, keys, Path.of(ready), Path.of(grown), Path.of(report));
    }
    System.exit(code);
  }

  static void failed(Throwable t) {
    failures.computeIfAbsent(status(t), k -> new AtomicLong()).incrementAndGet();
  }

  static String status(Throwable t) {
    Throwable cause = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
    return cause instanceof ClientStatusException e ? e.getStatusCode().name() : cause.getClass().getSimpleName();
  }

  /** Publishes `go` for `key` (its id the key), trying again for up to 60 s. */
  static void publish(ZeebeClient client, String key) {
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try {
        long messageKey =
            client.newPublishMessageCommand().messageName("go").correlationKey(key).messageId(key).timeToLive(Duration.ofMinutes(10)).send().join().getMessageKey();
        publishedByPartition.computeIfAbsent(messageKey >> 51, k -> new AtomicLong()).incrementAndGet();
        published.add(key);
        return;
      } catch (Throwable e) {
        failed(e);
        // an earlier try was taken after all (its answer lost)
        if (status(e).equals("ALREADY_EXISTS")) {
          published.add(key);
          return;
        }
        if (System.nanoTime() > giveUp) return;
        sleep(100);
      }
    }
  }

  /** Creates an instance waiting for `key`'s message, trying again for up to 60 s. */
  static void create(ZeebeClient client, String key) {
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try {
        client.newCreateInstanceCommand().bpmnProcessId("relocating").latestVersion().variables(Map.of("key", key)).send().join();
        created.add(key);
        return;
      } catch (Throwable e) {
        failed(e);
        if (System.nanoTime() > giveUp) return;
        sleep(100);
      }
    }
  }

  static int run(ZeebeClient client, int keys, Path ready, Path grown, Path report) throws Exception {
    long deployDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try {
        client.newDeployResourceCommand().addResourceBytes(MODEL.getBytes(StandardCharsets.UTF_8), "relocating.bpmn").send().join();
        break;
      } catch (Throwable e) {
        if (System.nanoTime() > deployDeadline) throw e;
        sleep(500);
      }
    }
    JobWorker worker =
        client.newWorker()
            .jobType("after-go")
            .handler(
                (jobs, job) -> {
                  String key = String.valueOf(job.getVariablesAsMap().get("key"));
                  correlatedTo.computeIfAbsent(key, k -> ConcurrentHashMap.newKeySet()).add(job.getElementInstanceKey());
                  for (int i = 0; i < 50; i++) {
                    try {
                      jobs.newCompleteCommand(job.getKey()).send().join();
                      return;
                    } catch (Throwable e) {
                      if (status(e).equals("NOT_FOUND")) return;
                      sleep(100);
                    }
                  }
                })
            .name("relocation-driver")
            .timeout(Duration.ofSeconds(30))
            .streamEnabled(true)
            .open();

    // 1. before the growth: waiting instances and buffered messages
    ExecutorService pool = Executors.newFixedThreadPool(8);
    for (int i = 0; i < keys; i++) {
      final int n = i;
      pool.submit(() -> create(client, "waiting-" + n));
      pool.submit(() -> publish(client, "buffered-" + n));
    }
    pool.shutdown();
    pool.awaitTermination(300, TimeUnit.SECONDS);
    Files.writeString(ready, "ready");

    // 2. while the count grows: instances and their messages for fresh keys
    ExecutorService lanes = Executors.newFixedThreadPool(2);
    for (int t = 0; t < 2; t++) {
      lanes.submit(
          () -> {
            while (!Files.exists(grown)) {
              String key = "during-" + UUID.randomUUID();
              create(client, key);
              publish(client, key);
              sleep(20);
            }
            return null;
          });
    }
    lanes.shutdown();
    lanes.awaitTermination(600, TimeUnit.SECONDS);

    // 3. after: the messages of the waiting instances, the instances of the buffered messages
    ExecutorService after = Executors.newFixedThreadPool(8);
    for (int i = 0; i < keys; i++) {
      final int n = i;
      after.submit(() -> publish(client, "waiting-" + n));
      after.submit(() -> create(client, "buffered-" + n));
    }
    after.shutdown();
    after.awaitTermination(300, TimeUnit.SECONDS);

    // every published key whose instance was created must reach it, once
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    Set<String> expected = published.stream().filter(created::contains).collect(Collectors.toSet());
    while (!expected.stream().allMatch(correlatedTo::containsKey) && System.nanoTime() < deadline) {
      sleep(250);
    }
    sleep(2000); // a second correlation would show by now
    worker.close();
    var missing = expected.stream().filter(k -> !correlatedTo.containsKey(k)).sorted().collect(Collectors.toList());
    var twice = correlatedTo.entrySet().stream().filter(e -> e.getValue().size() > 1).map(Map.Entry::getKey).sorted().collect(Collectors.toList());
    String json =
        String.format(
            "{\"published\": %d, \"created\": %d, \"expected\": %d, \"correlated\": %d, \"missingCorrelations\": %s,"
                + " \"correlatedTwice\": %s, \"failures\": %s, \"publishedByPartition\": %s}",
            published.size(),
            created.size(),
            expected.size(),
            correlatedTo.size(),
            missing.stream().limit(20).map(k -> "\"" + k + "\"").collect(Collectors.joining(", ", "[", "]")),
            twice.stream().limit(20).map(k -> "\"" + k + "\"").collect(Collectors.joining(", ", "[", "]")),
            failures.entrySet().stream().map(e -> "\"" + e.getKey() + "\": " + e.getValue().get()).collect(Collectors.joining(", ", "{", "}")),
            publishedByPartition.entrySet().stream()
                .sorted(Map.Entry.comparingByKey())
                .map(e -> "\"" + e.getKey() + "\": " + e.getValue().get())
                .collect(Collectors.joining(", ", "{", "}")));
    Files.writeString(report, json);
    System.out.println(json);
    boolean ok = missing.isEmpty() && twice.isEmpty() && expected.size() == published.size() && published.size() >= 2 * keys;
    return ok ? 0 : 1;
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
