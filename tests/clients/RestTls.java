// The Camunda 8.8 Java client over the REST API with TLS and HTTP Basic authentication: deploy ->
// create -> activate the job -> complete it, trusting only the CA given (caCertificatePath) and
// sending a configured user's credentials; then the same client with a wrong password is refused
// (401). Its gRPC address is one where nothing listens, so every command goes over REST.
// Run by crates/waggle/tests/security.rs:
//   java -cp '<8.8 client jars>/*' RestTls.java <rest port> <CA.pem> <models dir> <user> <password>
// Prints "OK <step>" per step; exits 1 with the reason at the first failure.

import io.camunda.client.CamundaClient;
import io.camunda.client.CredentialsProvider;
import io.camunda.client.api.command.ClientHttpException;
import io.camunda.client.api.response.ActivatedJob;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

public class RestTls {
  static void ok(String step) {
    System.out.println("OK " + step);
    System.out.flush();
  }

  static CamundaClient client(String port, String ca, String user, String password, int deadPort) {
    return CamundaClient.newClientBuilder()
        .grpcAddress(URI.create("http://127.0.0.1:" + deadPort))
        .restAddress(URI.create("https://127.0.0.1:" + port))
        .preferRestOverGrpc(true)
        .caCertificatePath(ca)
        .credentialsProvider(CredentialsProvider.newBasicAuthCredentialsProviderBuilder().username(user).password(password).build())
        .defaultRequestTimeout(Duration.ofSeconds(15))
        .build();
  }

  public static void main(String[] args) {
    try {
      int deadPort;
      try (ServerSocket s = new ServerSocket(0)) {
        deadPort = s.getLocalPort(); // closed again: no gRPC server there
      }
      try (CamundaClient client = client(args[0], args[1], args[3], args[4], deadPort)) {
        client.newDeployResourceCommand().addResourceFile(Path.of(args[2], "one_task.bpmn").toString()).send().join();
        ok("deploy");
        long instance = client.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion()
            .variables(Map.of("via", "rest-tls")).send().join().getProcessInstanceKey();
        ok("create");
        List<ActivatedJob> jobs = List.of();
        for (int i = 0; i < 100 && jobs.isEmpty(); i++) {
          jobs = client.newActivateJobsCommand().jobType("benchmark-task").maxJobsToActivate(1).workerName("rest-tls")
              .timeout(Duration.ofSeconds(60)).requestTimeout(Duration.ofSeconds(1)).send().join().getJobs();
        }
        if (jobs.isEmpty() || jobs.get(0).getProcessInstanceKey() != instance) throw new AssertionError("jobs " + jobs);
        client.newCompleteCommand(jobs.get(0).getKey()).send().join();
        ok("complete");
      }
      try (CamundaClient wrong = client(args[0], args[1], args[3], args[4] + "-wrong", deadPort)) {
        wrong.newCreateInstanceCommand().bpmnProcessId("benchmark").latestVersion().send().join();
        throw new AssertionError("a wrong password was taken");
      } catch (Exception e) {
        Throwable cause = e;
        while (cause != null && !(cause instanceof ClientHttpException)) cause = cause.getCause();
        if (!(cause instanceof ClientHttpException p) || p.code() != 401) throw new AssertionError("not a 401: " + e, e);
        ok("refused");
      }
    } catch (Throwable t) {
      System.err.println("FAILED: " + t);
      t.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }
}
