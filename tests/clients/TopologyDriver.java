// Prints the topology the Java client 8.5.8 reads from a gateway, one line per fact:
//   java -cp "$PEERS/java-client/lib/*" TopologyDriver.java --address HOST:PORT
// "cluster <size> <partitions> <replication factor>", then per broker
// "broker <node id> <host>:<port>" and per partition of it "partition <node id> <id> <role> <health>".

import io.camunda.zeebe.client.ZeebeClient;
import io.camunda.zeebe.client.api.response.BrokerInfo;
import io.camunda.zeebe.client.api.response.PartitionInfo;
import io.camunda.zeebe.client.api.response.Topology;

public class TopologyDriver {
  public static void main(String[] args) {
    String address = null;
    for (int i = 0; i + 1 < args.length; i += 2) {
      if (args[i].equals("--address")) address = args[i + 1];
    }
    if (address == null) throw new IllegalArgumentException("--address HOST:PORT is required");
    try (ZeebeClient client = ZeebeClient.newClientBuilder().gatewayAddress(address).usePlaintext().build()) {
      Topology topology = client.newTopologyRequest().send().join();
      System.out.println(
          "cluster " + topology.getClusterSize() + " " + topology.getPartitionsCount() + " " + topology.getReplicationFactor());
      for (BrokerInfo broker : topology.getBrokers()) {
        System.out.println("broker " + broker.getNodeId() + " " + broker.getAddress());
        for (PartitionInfo p : broker.getPartitions()) {
          System.out.println(
              "partition " + broker.getNodeId() + " " + p.getPartitionId() + " " + p.getRole() + " " + p.getHealth());
        }
      }
    }
  }
}
