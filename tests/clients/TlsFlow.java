// The Java client 8.5.8 over TLS: deploy -> create (awaiting the result) -> activate the job ->
// complete it -> the instance's result arrives. The connection trusts only the CA given
// (caCertificatePath; no usePlaintext); with --client-id, the client's OAuthCredentialsProvider
// gets a client-credentials token from --token-url for --audience. Run by
// crates/waggle/tests/security.rs and oauth.rs:
//   java -cp "$PEERS/java-client/lib/*" TlsFlow.java --address HOST:PORT --ca CA.pem --models DIR
//     [--client-id ID --client-secret SECRET --token-url URL --audience AUDIENCE]
// Prints "OK <step>" per step; exits 1 with the reason at the first failure.

import io.camunda.zeebe.client.CredentialsProvider;
import io.camunda.zeebe.client.ZeebeClient;
import io.camunda.zeebe.client.ZeebeClientBuilder;
import java.nio.file.Files;
import io.camunda.zeebe.client.api.response.ActivatedJob;
import io.camunda.zeebe.client.api.response.ProcessInstanceResult;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

public class TlsFlow {
  static void ok(String step) {
    System.out.println("OK " + step);
    System.out.flush();
  }

  public static void main(String[] argv) {
    String address = null, ca = null, models = null, clientId = null, secret = null, tokenUrl = null, audience = null;
    for (int i = 0; i < argv.length; i++) {
      switch (argv[i]) {
        case "--address" -> address = argv[++i];
        case "--ca" -> ca = argv[++i];
        case "--models" -> models = argv[++i];
        case "--client-id" -> clientId = argv[++i];
        case "--client-secret" -> secret = argv[++i];
        case "--token-url" -> tokenUrl = argv[++i];
        case "--audience" -> audience = argv[++i];
        default -> throw new IllegalArgumentException("unknown argument " + argv[i]);
      }
    }
    ZeebeClientBuilder builder = ZeebeClient.newClientBuilder().gatewayAddress(address).caCertificatePath(ca);
    try {
      if (clientId != null) {
        // the token cache in a folder of its own: no token of another run is reused
        String cache = Files.createTempDirectory("zeebe-oauth").resolve("credentials").toString();
        builder.credentialsProvider(CredentialsProvider.newCredentialsProviderBuilder().clientId(clientId).clientSecret(secret)
            .audience(audience).authorizationServerUrl(tokenUrl).credentialsCachePath(cache).build());
      }
    } catch (Exception e) {
      System.err.println("FAILED: " + e);
      System.exit(1);
    }
    try (ZeebeClient client = builder.build()) {
      client.newDeployResourceCommand().addResourceFile(Path.of(models, "one_task.bpmn").toString()).send().join();
      ok("deploy");
      CompletableFuture<ProcessInstanceResult> result = client.newCreateInstanceCommand().bpmnProcessId("benchmark")
          .latestVersion().variables(Map.of("via", "tls")).withResult().requestTimeout(Duration.ofSeconds(30))
          .send().toCompletableFuture();
      ok("create");
      List<ActivatedJob> jobs = List.of();
      for (int i = 0; i < 100 && jobs.isEmpty(); i++) {
        jobs = client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(1).workerName("tls")
            .requestTimeout(Duration.ofSeconds(1)).send().join().getJobs();
      }
      if (jobs.isEmpty()) throw new AssertionError("no job to activate");
      client.newCompleteCommand(jobs.get(0).getKey()).variables(Map.of("done", true)).send().join();
      ok("complete");
      ProcessInstanceResult done = result.get(30, TimeUnit.SECONDS);
      if (!Boolean.TRUE.equals(done.getVariablesAsMap().get("done"))) throw new AssertionError("result " + done.getVariables());
      ok("result");
    } catch (Throwable t) {
      System.err.println("FAILED: " + t);
      t.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }
}
