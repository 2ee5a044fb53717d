// Command w1-go is an independent lean client for W1 (docs/bench.md): one task, 46 KB payload,
// 150 PI/s as an open loop, a worker that completes each pushed job 50 ms after it arrives. It
// talks to the gateway through the Zeebe Go client's generated gRPC stubs only (no Waggle code),
// so that W1's latency can be checked from outside `waggle bench`; and it splits each
// instance's time into its stages, to show where a tail comes from:
//
//	create  due time → CreateProcessInstance answered
//	push    due time → job received on the StreamActivatedJobs stream
//	hold    job received → CompleteJob sent (the worker's 50 ms timer)
//	done    CompleteJob sent → answered
//	total   due time → CompleteJob answered (W1's execution time)
//
// Latency runs from each creation's due time, so a late start counts against the run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type instance struct {
	due, created, pushed, sent, done time.Time
}

func main() {
	addr := flag.String("address", "127.0.0.1:26500", "gateway address")
	model := flag.String("model", "workloads/one_task.bpmn", "BPMN model with one service task")
	payloadPath := flag.String("payload", "workloads/payload_big.json", "variables of each instance (JSON object)")
	rate := flag.Float64("rate", 150, "instances created per second")
	hold := flag.Duration("hold", 50*time.Millisecond, "worker delay before each completion")
	warmup := flag.Duration("warmup", 10*time.Second, "time before the measured window")
	window := flag.Duration("duration", 30*time.Second, "measured window (instances due in it are measured)")
	drain := flag.Duration("drain", 5*time.Second, "time after the window for the last instances to finish")
	jobType := flag.String("type", "benchmark-task", "job type of the service task")
	flag.Parse()

	bpmn, err := os.ReadFile(*model)
	check(err)
	payload, err := os.ReadFile(*payloadPath)
	check(err)
	var probe map[string]any
	check(json.Unmarshal(payload, &probe))

	conn, err := grpc.Dial(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err)
	defer conn.Close()
	client := pb.NewGatewayClient(conn)
	ctx := context.Background()

	deployed, err := client.DeployResource(ctx, &pb.DeployResourceRequest{
		Resources: []*pb.Resource{{Name: "one_task.bpmn", Content: bpmn}},
	})
	check(err)
	processKey := deployed.Deployments[0].GetProcess().GetProcessDefinitionKey()

	var mu sync.Mutex
	byKey := map[int64]*instance{} // instance key → its times, once created
	early := map[int64]instance{}  // job times of instances whose creation was not answered yet
	var all []*instance
	errors := 0

	stream, err := client.StreamActivatedJobs(ctx, &pb.StreamActivatedJobsRequest{
		Type: *jobType, Worker: "w1-go", Timeout: 30_000,
	})
	check(err)
	go func() {
		for {
			job, err := stream.Recv()
			if err != nil {
				log.Fatalf("job stream: %v", err)
			}
			pushed := time.Now()
			time.AfterFunc(*hold, func() {
				sent := time.Now()
				_, err := client.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key})
				done := time.Now()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errors++
					return
				}
				if in, ok := byKey[job.ProcessInstanceKey]; ok {
					in.pushed, in.sent, in.done = pushed, sent, done
				} else {
					early[job.ProcessInstanceKey] = instance{pushed: pushed, sent: sent, done: done}
				}
			})
		}
	}()
	time.Sleep(200 * time.Millisecond) // the stream is registered before the first creation

	start := time.Now()
	total := *warmup + *window
	count := int(total.Seconds() * *rate)
	windowStart := start.Add(*warmup)
	for i := 0; i < count; i++ {
		due := start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))
		time.Sleep(time.Until(due))
		in := &instance{due: due}
		if !due.Before(windowStart) {
			all = append(all, in)
		}
		go func() {
			resp, err := client.CreateProcessInstance(ctx, &pb.CreateProcessInstanceRequest{
				ProcessDefinitionKey: processKey, Version: -1, Variables: string(payload),
			})
			created := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errors++
				return
			}
			in.created = created
			key := resp.ProcessInstanceKey
			if job, ok := early[key]; ok {
				in.pushed, in.sent, in.done = job.pushed, job.sent, job.done
				delete(early, key)
			} else {
				byKey[key] = in
			}
		}()
	}
	time.Sleep(*drain)

	mu.Lock()
	defer mu.Unlock()
	stages := map[string][]float64{}
	unfinished := 0
	for _, in := range all {
		if in.done.IsZero() {
			unfinished++
			continue
		}
		ms := func(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }
		stages["create"] = append(stages["create"], ms(in.due, in.created))
		stages["push"] = append(stages["push"], ms(in.due, in.pushed))
		stages["hold"] = append(stages["hold"], ms(in.pushed, in.sent))
		stages["done"] = append(stages["done"], ms(in.sent, in.done))
		stages["total"] = append(stages["total"], ms(in.due, in.done))
	}
	finished := len(all) - unfinished
	fmt.Printf("w1-go: %d instances due in the %v window at %.0f PI/s, %d finished, %d unfinished, %d errors\n",
		len(all), *window, *rate, finished, unfinished, errors)
	fmt.Printf("%-7s %8s %8s %8s %8s %8s\n", "stage", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms")
	for _, name := range []string{"create", "push", "hold", "done", "total"} {
		v := stages[name]
		sort.Float64s(v)
		fmt.Printf("%-7s %8.1f %8.1f %8.1f %8.1f %8.1f\n", name, pct(v, 50), pct(v, 90), pct(v, 99), pct(v, 99.9), pct(v, 100))
	}
}

// pct is the nearest-rank percentile of sorted values (0 when there are none).
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
