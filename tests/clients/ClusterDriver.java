// Load through faults, with the Java client 8.5.8, accounting for every acknowledged command.
// Run in source-file mode:
//   java -cp "$PEERS/java-client/lib/*" ClusterDriver.java --address HOST:PORT --models DIR \
//        --seconds N --report FILE
// For N seconds it creates `benchmark` instances (one_task.bpmn) with and without awaiting their
// result, and `awaiting` instances (a message catch, then a task) whose message it publishes;
// streaming workers complete every job. Then it waits (at most 90 s) until each acknowledged
// creation has had a job and each acknowledged publication has reached the task after the
// catch. It writes a JSON report and exits 0 only when nothing acknowledged is missing, no job
// was handed out twice within its time-out, and none came back after its completion was
// acknowledged. Commands that fail (the cluster may be
// electing a leader) are counted by status, never as acknowledged.

import io.camunda.zeebe.client.ZeebeClient;
import io.camunda.zeebe.client.api.command.ClientStatusException;
import io.camunda.zeebe.client.api.response.ActivatedJob;
import io.camunda.zeebe.client.api.worker.JobWorker;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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

public class ClusterDriver {
  static final Duration JOB_TIMEOUT = Duration.ofSeconds(20);
  static final String AWAITING =
      """
      <?xml version="1.0" encoding="UTF-8"?>
      <bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
          xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="waggle">
        <bpmn:message id="go" name="go">
          <bpmn:extensionElements><zeebe:subscription correlationKey="=key" /></bpmn:extensionElements>
        </bpmn:message>
        <bpmn:process id="awaiting" isExecutable="true">
          <bpmn:startEvent id="start" />
          <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="wait" />
          <bpmn:intermediateCatchEvent id="wait"><bpmn:messageEventDefinition messageRef="go" /></bpmn:intermediateCatchEvent>
          <bpmn:sequenceFlow id="f2" sourceRef="wait" targetRef="after" />
          <bpmn:serviceTask id="after">
            <bpmn:extensionElements><zeebe:taskDefinition type="after-message" /></bpmn:extensionElements>
          </bpmn:serviceTask>
          <bpmn:sequenceFlow id="f3" sourceRef="after" targetRef="end" />
          <bpmn:endEvent id="end" />
        </bpmn:process>
      </bpmn:definitions>
      """;

  /**
   * What the workers saw: instances that had a job, message keys whose task after the catch had
   * a job, each job's latest deadline, acknowledged completions.
   */
  static final Set<Long> instancesWithJob = ConcurrentHashMap.newKeySet();
  static final Set<String> correlatedKeys = ConcurrentHashMap.newKeySet();
  static final Map<Long, Long> activatedUntil = new ConcurrentHashMap<>();
  static final List<String> doubleHandouts = new ArrayList<>();
  static final Set<Long> completedJobs = ConcurrentHashMap.newKeySet();
  static final List<String> lostCompletions = new ArrayList<>();
  static final Map<String, AtomicLong> failures = new ConcurrentHashMap<>();
  /** The first few failures of each kind, as the client described them (what a test shows). */
  static final Map<String, List<String>> failureSamples = new ConcurrentHashMap<>();
  static final AtomicLong completions = new AtomicLong();
  /** Acknowledged creations and streamed jobs by partition (a key's partition: key >> 51). */
  static final Map<Long, AtomicLong> createdByPartition = new ConcurrentHashMap<>();
  static final Map<Long, AtomicLong> jobsByPartition = new ConcurrentHashMap<>();
  /** The element instances each message key's task after the catch had a job for. */
  static final Map<String, Set<Long>> correlatedTo = new ConcurrentHashMap<>();

  static void count(Map<Long, AtomicLong> byPartition, long key) {
    byPartition.computeIfAbsent(key >> 51, k -> new AtomicLong()).incrementAndGet();
  }

  static String counts(Map<Long, AtomicLong> byPartition) {
    return byPartition.entrySet().stream()
        .sorted(Map.Entry.comparingByKey())
        .map(e -> "\"" + e.getKey() + "\": " + e.getValue().get())
        .collect(Collectors.joining(", ", "{", "}"));
  }

  public static void main(String[] argv) throws Exception {
    String address = null, models = null, report = null;
    int seconds = 30;
    for (int i = 0; i < argv.length; i++) {
      switch (argv[i]) {
        case "--address" -> address = argv[++i];
        case "--models" -> models = argv[++i];
        case "--seconds" -> seconds = Integer.parseInt(argv[++i]);
        case "--report" -> report = argv[++i];
        default -> throw new IllegalArgumentException("unknown argument " + argv[i]);
      }
    }
    if (address == null || models == null || report == null) throw new IllegalArgumentException("--address, --models and --report are required");
    int code;
    try (ZeebeClient client =
        ZeebeClient.newClientBuilder().gatewayAddress(address).usePlaintext().defaultRequestTimeout(Duration.ofSeconds(10)).numJobWorkerExecutionThreads(8).build()) {
      code = run(client, Path.of(models), seconds, Path.of(report));
    }
    System.exit(code);
  }

  static void failed(Throwable t) {
    Throwable cause = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
    String kind = cause instanceof ClientStatusException e ? e.getStatusCode().name() : cause.getClass().getSimpleName();
    failures.computeIfAbsent(kind, k -> new AtomicLong()).incrementAndGet();
    List<String> samples = failureSamples.computeIfAbsent(kind, k -> new ArrayList<>());
    synchronized (samples) {
      if (samples.size() < 3) samples.add(String.valueOf(cause.getMessage()));
    }
  }

  /** A string as a JSON string literal. */
  static String quoted(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }

  /**
   * Records an activation; a job handed out again before the deadline of its earlier activation
   * is a double handout. Both times are the server's (a job carries its deadline): the handler
   * may run well after the job arrived, so the time it runs says little.
   */
  static void activated(ActivatedJob job) {
    // when the server activated it: its deadline less the time-out the worker asked for
    long activatedAt = job.getDeadline() - JOB_TIMEOUT.toMillis();
    if (completedJobs.contains(job.getKey())) {
      synchronized (lostCompletions) {
        lostCompletions.add("job " + job.getKey() + " of instance " + job.getProcessInstanceKey() + " handed out after its completion was acknowledged");
      }
    }
    Long until = activatedUntil.put(job.getKey(), job.getDeadline());
    // the second activation must come after the first one's deadline (100 ms of slack)
    if (until != null && activatedAt + 100 < until) {
      synchronized (doubleHandouts) {
        doubleHandouts.add("job " + job.getKey() + " of instance " + job.getProcessInstanceKey() + " again " + (until - activatedAt) + " ms before its time-out");
      }
    }
  }

  /**
   * Completes a job, trying again for a while when the cluster is electing a leader; an
   * acknowledged completion is remembered, so the job must never return. The handler never
   * throws: the Java client would fail the job (FailJob, retries - 1), which hands it out again at
   * once, as it should, but is not what this driver measures. A job it cannot complete returns
   * at its time-out.
   */
  static void complete(io.camunda.zeebe.client.api.worker.JobClient jobs, ActivatedJob job) {
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (true) {
      try {
        jobs.newCompleteCommand(job.getKey()).send().join();
        completedJobs.add(job.getKey());
        completions.incrementAndGet();
        return;
      } catch (Throwable e) {
        failed(e);
        // NOT_FOUND: an earlier try was taken after all (its answer lost); done
        Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
        if (cause instanceof ClientStatusException c && c.getStatusCode() == io.grpc.Status.Code.NOT_FOUND) return;
        if (System.nanoTime() > giveUp) return;
        sleep(100);
      }
    }
  }

  static int run(ZeebeClient client, Path models, int seconds, Path report) throws Exception {
    deploy(client, models);
    List<JobWorker> workers =
        List.of(
            client.newWorker()
                .jobType("benchmark-task")
                .handler(
                    (jobs, job) -> {
                      activated(job);
                      // the job exists, so its instance's creation was kept (recorded before
                      // completing: a completion whose answer is lost may still have happened)
                      instancesWithJob.add(job.getProcessInstanceKey());
                      count(jobsByPartition, job.getKey());
                      complete(jobs, job);
                    })
                .name("cluster-driver")
                .timeout(JOB_TIMEOUT)
                .maxJobsActive(64)
                .streamEnabled(true)
                .open(),
            client.newWorker()
                .jobType("after-message")
                .handler(
                    (jobs, job) -> {
                      activated(job);
                      // the task after the catch has a job: the message was correlated
                      String key = String.valueOf(job.getVariablesAsMap().get("key"));
                      correlatedKeys.add(key);
                      correlatedTo.computeIfAbsent(key, k -> ConcurrentHashMap.newKeySet()).add(job.getElementInstanceKey());
                      count(jobsByPartition, job.getKey());
                      complete(jobs, job);
                    })
                .name("cluster-driver")
                .timeout(JOB_TIMEOUT)
                .streamEnabled(true)
                .open());

    Set<Long> created = ConcurrentHashMap.newKeySet();
    Set<Long> createdWithResult = ConcurrentHashMap.newKeySet();
    Set<String> published = ConcurrentHashMap.newKeySet();
    ExecutorService load = Executors.newFixedThreadPool(8);
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    for (int t = 0; t < 8; t++) {
      final int lane = t;
      load.submit(
          () -> {
            long n = 0;
            while (System.nanoTime() < end) {
              n++;
              try {
                if (lane == 0) {
                  var result = client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().withResult().requestTimeout(Duration.ofSeconds(20)).send().join();
                  createdWithResult.add(result.getProcessInstanceKey());
                  count(createdByPartition, result.getProcessInstanceKey());
                } else if (lane == 1) {
                  String key = UUID.randomUUID().toString();
                  long instance = client.newCreateInstanceCommand().bpmnProcessId("awaiting").latestVersion().variables(Map.of("key", key)).send().join().getProcessInstanceKey();
                  count(createdByPartition, instance);
                  client.newPublishMessageCommand().messageName("go").correlationKey(key).timeToLive(Duration.ofMinutes(5)).send().join();
                  published.add(key);
                } else {
                  long instance = client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().send().join().getProcessInstanceKey();
                  created.add(instance);
                  count(createdByPartition, instance);
                  // a steady load (~50 creations per second per lane), not a growing backlog of jobs
                  sleep(20);
                }
              } catch (Throwable e) {
                failed(e);
                sleep(50);
              }
            }
            return n;
          });
    }
    load.shutdown();
    load.awaitTermination(seconds + 60L, TimeUnit.SECONDS);

    // everything acknowledged must show up at the workers
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    List<Long> missingJobs;
    List<String> missingCorrelations;
    while (true) {
      missingJobs = created.stream().filter(k -> !instancesWithJob.contains(k)).sorted().collect(Collectors.toList());
      missingCorrelations = published.stream().filter(k -> !correlatedKeys.contains(k)).sorted().collect(Collectors.toList());
      if ((missingJobs.isEmpty() && missingCorrelations.isEmpty()) || System.nanoTime() > deadline) break;
      sleep(250);
    }
    workers.forEach(JobWorker::close);

    String json =
        String.format(
            "{\"created\": %d, \"createdWithResult\": %d, \"published\": %d, \"completedJobs\": %d,"
                + " \"missingJobs\": %s, \"missingCorrelations\": %s, \"doubleHandouts\": %s, \"lostCompletions\": %s,"
                + " \"failures\": %s, \"failureSamples\": %s, \"createdByPartition\": %s, \"jobsByPartition\": %s, \"correlatedTwice\": %s}",
            created.size(),
            createdWithResult.size(),
            published.size(),
            completions.get(),
            missingJobs.stream().limit(20).map(String::valueOf).collect(Collectors.joining(", ", "[", "]")),
            missingCorrelations.stream().limit(20).map(k -> "\"" + k + "\"").collect(Collectors.joining(", ", "[", "]")),
            doubleHandouts.stream().limit(20).map(s -> "\"" + s + "\"").collect(Collectors.joining(", ", "[", "]")),
            lostCompletions.stream().limit(20).map(s -> "\"" + s + "\"").collect(Collectors.joining(", ", "[", "]")),
            failures.entrySet().stream().map(e -> "\"" + e.getKey() + "\": " + e.getValue().get()).collect(Collectors.joining(", ", "{", "}")),
            failureSamples.entrySet().stream()
                .map(e -> { synchronized (e.getValue()) { return quoted(e.getKey()) + ": " + e.getValue().stream().map(ClusterDriver::quoted).collect(Collectors.joining(", ", "[", "]")); } })
                .collect(Collectors.joining(", ", "{", "}")),
            counts(createdByPartition),
            counts(jobsByPartition),
            correlatedTo.entrySet().stream().filter(e -> e.getValue().size() > 1).limit(20).map(e -> "\"" + e.getKey() + "\"").collect(Collectors.joining(", ", "[", "]")));
    Files.writeString(report, json);
    System.out.println(json);
    boolean correlatedOnce = correlatedTo.values().stream().allMatch(s -> s.size() == 1);
    boolean ok = missingJobs.isEmpty() && missingCorrelations.isEmpty() && doubleHandouts.isEmpty() && lostCompletions.isEmpty() && correlatedOnce && created.size() > 0;
    return ok ? 0 : 1;
  }

  static void deploy(ZeebeClient client, Path models) throws InterruptedException {
    // the cluster may still be electing its first leaders
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try {
        client.newDeployResourceCommand()
            .addResourceFile(models.resolve("one_task.bpmn").toString())
            .addResourceBytes(AWAITING.getBytes(StandardCharsets.UTF_8), "awaiting.bpmn")
            .send()
            .join();
        return;
      } catch (Throwable e) {
        if (System.nanoTime() > deadline) throw e;
        sleep(500);
      }
    }
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
