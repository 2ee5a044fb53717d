#!/usr/bin/env python3
"""Prints the gRPC status every kind of bad input gets from a Zeebe gateway (Waggle, or any
server of the protocol; docs/compatibility.md holds what Zeebe 8.5.8 answered in November 2026).

Usage: status_codes.py --address HOST:PORT --models DIR

One line per case: "<case> <STATUS> <message>". Run it against both servers and diff the status
columns; the results are recorded in docs/compatibility.md and asserted by the client drivers.
"""
import argparse
import asyncio
import json
import os

import grpc
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

SERVICE_TASK_WITHOUT_TYPE = b"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" id="d" targetNamespace="t">
  <bpmn:process id="no-type" isExecutable="true">
    <bpmn:startEvent id="start"/>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="task"/>
    <bpmn:serviceTask id="task"/>
  </bpmn:process>
</bpmn:definitions>"""


async def status(call):
    try:
        result = await call
        return "OK", str(result).replace("\n", " ")[:80]
    except grpc.aio.AioRpcError as e:
        return e.code().name, (e.details() or "").replace("\n", " ")


async def stream_status(stream):
    async def drain():
        async for _ in stream:
            pass

    return await status(drain())


async def run(args):
    options = [("grpc.max_send_message_length", 16 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(args.address, options=options) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        with open(os.path.join(args.models, "order.bpmn"), "rb") as f:
            order = f.read()
        deployed = await stub.DeployResource(pb.DeployResourceRequest(resources=[pb.Resource(name="order.bpmn", content=order)]))
        definition_key = deployed.deployments[0].process.processDefinitionKey
        process_id = deployed.deployments[0].process.bpmnProcessId
        instance = await stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1, variables='{"amount": 1}'))
        job_type = args.job_type
        jobs = []
        for _ in range(50):
            async for response in stub.ActivateJobs(pb.ActivateJobsRequest(type=job_type, worker="probe", timeout=60000, maxJobsToActivate=1, requestTimeout=1000)):
                jobs.extend(response.jobs)
            if jobs:
                break
        job = jobs[0].key
        await stub.CompleteJob(pb.CompleteJobRequest(jobKey=job, variables="{}"))
        second = await stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1))
        jobs = []
        for _ in range(50):
            async for response in stub.ActivateJobs(pb.ActivateJobsRequest(type=job_type, worker="probe", timeout=60000, maxJobsToActivate=10, requestTimeout=1000)):
                jobs.extend(j for j in response.jobs if j.processInstanceKey == second.processInstanceKey)
            if jobs:
                break
        await stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=second.processInstanceKey))
        cancelled_job = jobs[0].key
        unknown = 2251799813999999
        probe_id = f"probe-{os.getpid()}"
        third = await stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1))
        jobs = []
        for _ in range(50):
            async for response in stub.ActivateJobs(pb.ActivateJobsRequest(type=job_type, worker="probe", timeout=60000, maxJobsToActivate=10, requestTimeout=1000)):
                jobs.extend(j for j in response.jobs if j.processInstanceKey == third.processInstanceKey)
            if jobs:
                break
        live_job = jobs[0].key
        await stub.PublishMessage(pb.PublishMessageRequest(name="probe", correlationKey="k", messageId=probe_id, timeToLive=60000))

        cases = {
            "create: unknown process id": stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId="no-such-process", version=-1)),
            "create: unknown definition key": stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(processDefinitionKey=unknown)),
            "create: unknown version": stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=99)),
            "create: variables a JSON list": stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1, variables="[1, 2]")),
            "create: variables not JSON": stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1, variables="{nope")),
            "create with result: timeout": stub.CreateProcessInstanceWithResult(
                pb.CreateProcessInstanceWithResultRequest(request=pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1), requestTimeout=500)
            ),
            "deploy: invalid XML": stub.DeployResource(pb.DeployResourceRequest(resources=[pb.Resource(name="broken.bpmn", content=b"<definitions")])),
            "deploy: service task without type": stub.DeployResource(pb.DeployResourceRequest(resources=[pb.Resource(name="no-type.bpmn", content=SERVICE_TASK_WITHOUT_TYPE)])),
            "deploy: no resources": stub.DeployResource(pb.DeployResourceRequest(resources=[])),
            "deploy: unknown file type": stub.DeployResource(pb.DeployResourceRequest(resources=[pb.Resource(name="notes.txt", content=b"hello")])),
            "complete: unknown job": stub.CompleteJob(pb.CompleteJobRequest(jobKey=unknown)),
            "complete: twice": stub.CompleteJob(pb.CompleteJobRequest(jobKey=job)),
            "complete: job of a cancelled instance": stub.CompleteJob(pb.CompleteJobRequest(jobKey=cancelled_job)),
            "complete: variables not an object": stub.CompleteJob(pb.CompleteJobRequest(jobKey=unknown, variables="[1]")),
            "fail: unknown job": stub.FailJob(pb.FailJobRequest(jobKey=unknown, retries=1)),
            "throw error: unknown job": stub.ThrowError(pb.ThrowErrorRequest(jobKey=unknown, errorCode="E")),
            "throw error: empty code": stub.ThrowError(pb.ThrowErrorRequest(jobKey=unknown, errorCode="")),
            "throw error: empty code, live job": stub.ThrowError(pb.ThrowErrorRequest(jobKey=live_job, errorCode="")),
            "update retries: zero, live job": stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=live_job, retries=0)),
            "update retries: unknown job": stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=unknown, retries=3)),
            "update retries: zero": stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=unknown, retries=0)),
            "update timeout: unknown job": stub.UpdateJobTimeout(pb.UpdateJobTimeoutRequest(jobKey=unknown, timeout=1000)),
            "cancel: unknown instance": stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=unknown)),
            "cancel: twice": stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=second.processInstanceKey)),
            "set variables: unknown scope": stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=unknown, variables='{"a": 1}')),
            "set variables: not an object": stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=instance.processInstanceKey, variables="[1]")),
            "set variables: not JSON": stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=instance.processInstanceKey, variables="{x")),
            "resolve incident: unknown": stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=unknown)),
            "publish: empty name": stub.PublishMessage(pb.PublishMessageRequest(name="", correlationKey="k")),
            "publish: duplicate message id": stub.PublishMessage(pb.PublishMessageRequest(name="probe", correlationKey="k", messageId=probe_id, timeToLive=60000)),
            "publish: variables not an object": stub.PublishMessage(pb.PublishMessageRequest(name="probe", correlationKey="k", variables="[1]")),
            "over 4 MB": stub.CreateProcessInstance(
                pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1, variables=json.dumps({"blob": "x" * (5 * 1024 * 1024)}))
            ),
        }
        for name, call in cases.items():
            code, message = await status(call)
            print(f"{name:40} {code:20} {message}", flush=True)
        streams = {
            "activate: maxJobsToActivate 0": stub.ActivateJobs(pb.ActivateJobsRequest(type=job_type, worker="w", timeout=1000, maxJobsToActivate=0)),
            "activate: maxJobsToActivate -1": stub.ActivateJobs(pb.ActivateJobsRequest(type=job_type, worker="w", timeout=1000, maxJobsToActivate=-1)),
            "activate: empty type": stub.ActivateJobs(pb.ActivateJobsRequest(type="", worker="w", timeout=1000, maxJobsToActivate=1)),
            "activate: timeout 0": stub.ActivateJobs(pb.ActivateJobsRequest(type=job_type, worker="w", timeout=0, maxJobsToActivate=1, requestTimeout=100)),
        }
        for name, stream in streams.items():
            started = asyncio.get_running_loop().time()
            code, message = await stream_status(stream)
            message = f"{message} (after {asyncio.get_running_loop().time() - started:.1f} s)"
            print(f"{name:40} {code:20} {message}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--job-type", default="payment")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
