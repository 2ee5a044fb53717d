#!/usr/bin/env python3
"""Differential BPMN scenarios: runs tests/bpmn-diff/scenarios/*.json against a Zeebe gateway
(Waggle; it recorded expected/ on Zeebe 8.5.8 in November 2026) and writes one JSON outcome per
scenario, the same for both servers when they behave alike.

Usage: run.py --address HOST:PORT --out DIR [--only NAME[,NAME...]] [--parallel N]

A scenario is {"description": ..., "steps": [...]}; each step is an object with an "op":

  deploy        files: [resource file names under models/: .bpmn, .dmn, .form]; the outcome lists
                the decisions, decision requirements and forms deployed (id, version) when
                there are any
  evaluateDecision decisionId, or byKey (a decision id: the key of its newest version this
                scenario deployed) or decisionKey (a number), variables (EvaluateDecision)
  create        process, variables, withResult, fetchVariables, requestTimeout, startInstructions
  activate      type, wait: activate one job and hold it (the next step on that type uses it)
  complete      type, variables, wait: complete the held job of that type, else activate one first
                (with "last": true, fail/throwError/complete act on the last job seen of the type)
  fail          type, retries, errorMessage, retryBackOff
  throwError    type, code, message, variables
  updateRetries type, retries: on the held job, else the last job activated of that type
  publish       name, correlationKey, variables, ttl, messageId
  broadcastSignal name, variables
  setVariables  variables, local, instance (ordinal, default the last created) or job (type: the
                element instance of the last job of that type)
  cancel        instance (ordinal, default the last created) or job (type: the process instance
                of the last job of that type, such as one a call activity created)
  modify        instance (ordinal, default the last created; or a key: "instanceKey"), activate:
                [{elementId, ancestor (optional: "job:TYPE", the element instance of the last job
                of that type, or "instance"), variables: [{scopeId, variables}]}], terminate:
                ["job:TYPE", ...] (ModifyProcessInstance)
  migrate       instance (as modify), process (the target: the newest deployed definition of that
                process id, or "unknown"), mappings: [[source, target], ...] (MigrateProcessInstance)
  deleteResource decisionRequirements, form or process (an id: the key of its newest version this
                scenario deployed) or resourceKey (a number) (DeleteResource)
  userTask      element (the element id of a Zeebe user task of the instance: instance ordinal,
                default the last created; its task is found through the REST API's
                POST /v2/user-tasks/search, waiting up to 5 s), action: "read" (records the task's
                state, assignee, candidateGroups, candidateUsers, dueDate, followUpDate,
                externalFormReference, customHeaders and whether it has a formKey), "complete"
                (variables), "assign" (assignee, allowOverride), "unassign" or "update"
                (changeset); a command records the HTTP status (204 done) and a problem's title,
                over Zeebe 8.5's /v1/user-tasks endpoints (needs --rest)
  sleep         ms
  expectNoJob   type, ms: one short activation; records whatever it gets (and holds it)

A scenario with "alone": true runs after the others, by itself.

Isolation: the string "__S__" in models and scenario steps is replaced by a suffix unique to the
scenario and run (process ids, job types, message and signal names, correlation keys), so the
scenarios can run concurrently and repeatedly on one server; the outcome maps it back to "__S__".

Outcome: {"steps": [one record per step], "instances": {"i0": "alive" | "finished", ...}}.
Keys differ between servers: process instance keys become ordinals ("i0", "i1" in order of first
sight), other keys are dropped. Fields starting with "_" (such as a rejection's full message) are
for reading only; the comparison ignores them.
"""
import argparse
import asyncio
import json
import os
import secrets
import sys
import time

import grpc
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "__S__"
JOB_TIMEOUT_MS = 60_000


class Glitch(Exception):
    """Zeebe's embedded gateway sometimes answers INTERNAL "Connection ... was closed" under the
    burst of concurrent scenarios: its connection to the broker dropped, and whether the command
    was processed is unknown. The scenario is then run again on its own (see main)."""


class Scenario:
    def __init__(self, name, spec, stub):
        self.name = name
        self.spec = spec
        self.stub = stub
        self.suffix = "_x" + secrets.token_hex(4)
        self.instances = {}  # key -> ordinal name
        self.created = []  # keys of created instances, in order
        self.held = {}  # job type -> job
        self.last_job = {}  # job type -> job
        self.definitions = {}  # bpmn process id -> key of the newest deployed definition
        self.decisions = {}  # decision id -> key of the newest deployed decision
        self.resources = {}  # ("decisionRequirements" | "form", id) -> key of the newest version
        self.records = []

    # --- helpers -------------------------------------------------------------------------
    def sub(self, value):
        """Replaces the isolation token in every string of a step argument."""
        if isinstance(value, str):
            return value.replace(TOKEN, self.suffix)
        if isinstance(value, list):
            return [self.sub(v) for v in value]
        if isinstance(value, dict):
            return {self.sub(k): self.sub(v) for k, v in value.items()}
        return value

    def unsub(self, value):
        if isinstance(value, str):
            return value.replace(self.suffix, TOKEN)
        if isinstance(value, list):
            return [self.unsub(v) for v in value]
        if isinstance(value, dict):
            return {self.unsub(k): self.unsub(v) for k, v in value.items()}
        return value

    def instance(self, key):
        if key not in self.instances:
            self.instances[key] = f"i{len(self.instances)}"
        return self.instances[key]

    def instance_key(self, step):
        ordinal = step.get("instance")
        if ordinal is None:
            return self.created[-1] if self.created else 0
        return self.created[ordinal] if ordinal < len(self.created) else 0

    def job_record(self, job):
        return {
            "type": job.type,
            "elementId": job.elementId,
            "bpmnProcessId": job.bpmnProcessId,
            "instance": self.instance(job.processInstanceKey),
            "customHeaders": json.loads(job.customHeaders or "{}"),
            "variables": json.loads(job.variables or "{}"),
            "retries": job.retries,
        }

    async def call(self, make):
        """Runs the RPC that make() starts: (status name, response or None, error details or None)."""
        try:
            return "OK", await make(), None
        except grpc.aio.AioRpcError as e:
            details = e.details() or ""
            if "was closed" in details:
                raise Glitch(details)
            return e.code().name, None, details

    async def activate_once(self, job_type, request_timeout_ms):
        request = pb.ActivateJobsRequest(
            type=job_type, worker="bpmn-diff", timeout=JOB_TIMEOUT_MS, maxJobsToActivate=1, requestTimeout=request_timeout_ms
        )
        jobs = []
        try:
            async for response in self.stub.ActivateJobs(request, timeout=request_timeout_ms / 1000 + 10):
                jobs.extend(response.jobs)
        except grpc.aio.AioRpcError as e:
            if "was closed" in (e.details() or ""):
                raise Glitch(e.details())
            return e.code().name, jobs
        return "OK", jobs

    async def activate(self, job_type, wait_ms):
        """Long-polls until one job of the type arrives or wait_ms passed."""
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            left = int((deadline - time.monotonic()) * 1000)
            status, jobs = await self.activate_once(job_type, max(left, 100))
            if jobs:
                job = jobs[0]
                self.last_job[job_type] = job
                return job
            if status != "OK":
                await asyncio.sleep(0.1)
            if time.monotonic() >= deadline:
                return None

    async def job_for(self, step, record):
        """The held job of the step's type, else one freshly activated (recorded as "job")."""
        job_type = self.sub(step["type"])
        if step.get("last"):
            return self.last_job.get(job_type)
        job = self.held.pop(job_type, None)
        if job is None:
            job = await self.activate(job_type, step.get("wait", 5000))
            record["job"] = self.job_record(job) if job else None
        return job

    # --- steps ---------------------------------------------------------------------------
    async def step(self, step):
        op = step["op"]
        record = {"op": op}
        if op == "deploy":
            resources = []
            for name in step["files"]:
                with open(os.path.join(HERE, "models", name), encoding="utf-8") as f:
                    content = self.sub(f.read())
                resources.append(pb.Resource(name=name, content=content.encode("utf-8")))
            status, response, details = await self.call(lambda: self.stub.DeployResource(pb.DeployResourceRequest(resources=resources)))
            record["status"] = status
            if response is not None:
                record["processes"] = sorted(d.process.bpmnProcessId for d in response.deployments if d.HasField("process"))
                for d in response.deployments:
                    if d.HasField("process"):
                        self.definitions[d.process.bpmnProcessId] = d.process.processDefinitionKey
                    if d.HasField("decision"):
                        self.decisions[d.decision.dmnDecisionId] = d.decision.decisionKey
                    if d.HasField("decisionRequirements"):
                        drg = d.decisionRequirements
                        self.resources[("decisionRequirements", drg.dmnDecisionRequirementsId)] = drg.decisionRequirementsKey
                    if d.HasField("form"):
                        self.resources[("form", d.form.formId)] = d.form.formKey
                decisions = sorted([d.decision.dmnDecisionId, d.decision.version] for d in response.deployments if d.HasField("decision"))
                drgs = sorted(
                    [d.decisionRequirements.dmnDecisionRequirementsId, d.decisionRequirements.version]
                    for d in response.deployments
                    if d.HasField("decisionRequirements")
                )
                forms = sorted([d.form.formId, d.form.version] for d in response.deployments if d.HasField("form"))
                if decisions:
                    record["decisions"] = decisions
                if drgs:
                    record["decisionRequirements"] = drgs
                if forms:
                    record["forms"] = forms
            if details is not None:
                record["_message"] = details
                record["mentions"] = {m: (self.sub(m) in details) for m in step.get("mentions", [])}
        elif op == "create":
            variables = json.dumps(self.sub(step.get("variables", {})))
            request = pb.CreateProcessInstanceRequest(bpmnProcessId=self.sub(step["process"]), version=-1, variables=variables)
            for element in step.get("startInstructions", []):
                request.startInstructions.append(pb.ProcessInstanceCreationStartInstruction(elementId=element))
            if step.get("withResult"):
                timeout = step.get("requestTimeout", 10000)
                with_result = pb.CreateProcessInstanceWithResultRequest(
                    request=request, requestTimeout=timeout, fetchVariables=step.get("fetchVariables", [])
                )
                # the with-result call waits for the end; with "wait": false the next steps run
                # beside it (to complete the instance's jobs) and the record is filled in later
                record["status"] = "PENDING"

                async def wait_result():
                    status, response, details = await self.call(
                        lambda: self.stub.CreateProcessInstanceWithResult(with_result, timeout=timeout / 1000 + 10)
                    )
                    record["status"] = status
                    if response is not None:
                        record["instance"] = self.instance(response.processInstanceKey)
                        record["variables"] = json.loads(response.variables or "{}")
                    else:
                        record["_message"] = details

                task = asyncio.ensure_future(wait_result())
                self.pending.append(task)
                if step.get("wait", True):
                    await task
            else:
                status, response, details = await self.call(lambda: self.stub.CreateProcessInstance(request))
                record["status"] = status
                if response is not None:
                    self.created.append(response.processInstanceKey)
                    record["instance"] = self.instance(response.processInstanceKey)
                else:
                    record["_message"] = details
        elif op == "activate":
            job_type = self.sub(step["type"])
            job = await self.activate(job_type, step.get("wait", 5000))
            record["job"] = self.job_record(job) if job else None
            if job:
                self.held[job_type] = job
        elif op == "expectNoJob":
            job_type = self.sub(step["type"])
            status, jobs = await self.activate_once(job_type, step.get("ms", 500))
            record["status"] = status
            record["jobs"] = [self.job_record(j) for j in jobs]
            if jobs:
                self.held[job_type] = jobs[0]
                self.last_job[job_type] = jobs[0]
        elif op == "complete":
            job = await self.job_for(step, record)
            if job is not None:
                variables = json.dumps(self.sub(step.get("variables", {})))
                status, _, details = await self.call(lambda: self.stub.CompleteJob(pb.CompleteJobRequest(jobKey=job.key, variables=variables)))
                record["status"] = status
        elif op == "fail":
            job = await self.job_for(step, record)
            if job is not None:
                request = pb.FailJobRequest(
                    jobKey=job.key, retries=step.get("retries", 0), errorMessage=step.get("errorMessage", "failed"),
                    retryBackOff=step.get("retryBackOff", 0),
                )
                status, _, _ = await self.call(lambda: self.stub.FailJob(request))
                record["status"] = status
        elif op == "throwError":
            job = await self.job_for(step, record)
            if job is not None:
                request = pb.ThrowErrorRequest(
                    jobKey=job.key, errorCode=self.sub(step.get("code", "")), errorMessage=step.get("message", ""),
                    variables=json.dumps(self.sub(step.get("variables", {}))),
                )
                status, _, _ = await self.call(lambda: self.stub.ThrowError(request))
                record["status"] = status
        elif op == "updateRetries":
            job_type = self.sub(step["type"])
            job = self.held.get(job_type) or self.last_job.get(job_type)
            key = job.key if job else 0
            status, _, _ = await self.call(lambda: self.stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=key, retries=step["retries"])))
            record["status"] = status
        elif op == "publish":
            request = pb.PublishMessageRequest(
                name=self.sub(step["name"]), correlationKey=self.sub(step.get("correlationKey", "")),
                timeToLive=step.get("ttl", 0), messageId=self.sub(step.get("messageId", "")),
                variables=json.dumps(self.sub(step.get("variables", {}))),
            )
            status, _, _ = await self.call(lambda: self.stub.PublishMessage(request))
            record["status"] = status
        elif op == "broadcastSignal":
            request = pb.BroadcastSignalRequest(signalName=self.sub(step["name"]), variables=json.dumps(self.sub(step.get("variables", {}))))
            status, _, _ = await self.call(lambda: self.stub.BroadcastSignal(request))
            record["status"] = status
        elif op == "setVariables":
            if "job" in step:
                job = self.last_job.get(self.sub(step["job"]))
                scope = job.elementInstanceKey if job else 0
            else:
                scope = self.instance_key(step)
            request = pb.SetVariablesRequest(
                elementInstanceKey=scope, variables=json.dumps(self.sub(step.get("variables", {}))), local=step.get("local", False)
            )
            status, _, _ = await self.call(lambda: self.stub.SetVariables(request))
            record["status"] = status
        elif op == "cancel":
            if "job" in step:
                job = self.last_job.get(self.sub(step["job"]))
                key = job.processInstanceKey if job else 0
            else:
                key = self.instance_key(step)
            status, _, _ = await self.call(lambda: self.stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=key)))
            record["status"] = status
        elif op == "modify":
            def element_instance(ref):
                if ref == "instance":
                    return self.instance_key(step)
                job = self.last_job.get(self.sub(ref.split(":", 1)[1]))
                return job.elementInstanceKey if job else 0

            request = pb.ModifyProcessInstanceRequest(processInstanceKey=step.get("instanceKey", self.instance_key(step)))
            for a in step.get("activate", []):
                instruction = pb.ModifyProcessInstanceRequest.ActivateInstruction(
                    elementId=a["elementId"], ancestorElementInstanceKey=element_instance(a["ancestor"]) if "ancestor" in a else -1
                )
                for v in a.get("variables", []):
                    instruction.variableInstructions.append(
                        pb.ModifyProcessInstanceRequest.VariableInstruction(variables=json.dumps(self.sub(v["variables"])), scopeId=v.get("scopeId", ""))
                    )
                request.activateInstructions.append(instruction)
            for ref in step.get("terminate", []):
                request.terminateInstructions.append(pb.ModifyProcessInstanceRequest.TerminateInstruction(elementInstanceKey=element_instance(ref)))
            status, _, details = await self.call(lambda: self.stub.ModifyProcessInstance(request))
            record["status"] = status
            if details is not None:
                record["_message"] = details
        elif op == "migrate":
            target = self.definitions.get(self.sub(step["process"]), 2251799813999999)
            plan = pb.MigrateProcessInstanceRequest.MigrationPlan(targetProcessDefinitionKey=target)
            for source, target_element in step.get("mappings", []):
                plan.mappingInstructions.append(
                    pb.MigrateProcessInstanceRequest.MappingInstruction(sourceElementId=source, targetElementId=target_element)
                )
            request = pb.MigrateProcessInstanceRequest(processInstanceKey=self.instance_key(step), migrationPlan=plan)
            status, _, details = await self.call(lambda: self.stub.MigrateProcessInstance(request))
            record["status"] = status
            if details is not None:
                record["_message"] = details
        elif op == "evaluateDecision":
            if "byKey" in step:
                key = self.decisions.get(self.sub(step["byKey"]), 0)
            else:
                key = step.get("decisionKey", 0)
            request = pb.EvaluateDecisionRequest(
                decisionId=self.sub(step.get("decisionId", "")), decisionKey=key, variables=json.dumps(self.sub(step.get("variables", {})))
            )
            status, response, details = await self.call(lambda: self.stub.EvaluateDecision(request))
            record["status"] = status
            if response is not None:
                record.update(evaluation_record(response))
            else:
                record["_message"] = details
        elif op == "deleteResource":
            if "resourceKey" in step:
                key = step["resourceKey"]
            elif "process" in step:
                key = self.definitions.get(self.sub(step["process"]), 0)
            else:
                kind = "form" if "form" in step else "decisionRequirements"
                key = self.resources.get((kind, self.sub(step[kind])), 0)
            status, _, details = await self.call(lambda: self.stub.DeleteResource(pb.DeleteResourceRequest(resourceKey=key)))
            record["status"] = status
            if details is not None:
                record["_message"] = details
        elif op == "userTask":
            await self.user_task(step, record)
        elif op == "sleep":
            await asyncio.sleep(step["ms"] / 1000)
            record["ms"] = step["ms"]
        else:
            raise ValueError(f"{self.name}: unknown op {op}")
        return record

    async def user_task(self, step, record):
        """A Zeebe user task command or read over REST (see the docstring)."""
        if not REST:
            raise ValueError("userTask needs --rest")
        instance = self.instance_key(step)
        element = self.sub(step["element"])
        action = step["action"]
        # a task already done is searched without the state filter (read after complete)
        query = {"filter": {"processInstanceKey": str(instance), "elementId": element}, "sort": [{"field": "creationDate", "order": "DESC"}]}
        task = None
        deadline = time.monotonic() + 5
        while task is None and time.monotonic() < deadline:
            status, body = await http("POST", "/v2/user-tasks/search", query)
            items = body.get("items", []) if status == 200 and isinstance(body, dict) else []
            if items and (action == "read" or items[0].get("state") == "CREATED"):
                task = items[0]
            else:
                await asyncio.sleep(0.1)
        record["found"] = task is not None
        if task is None:
            return
        if action == "read":
            for field in ["state", "assignee", "candidateGroups", "candidateUsers", "dueDate", "followUpDate", "externalFormReference", "customHeaders"]:
                record[field] = task.get(field)
            record["hasFormKey"] = task.get("formKey") is not None
            return
        key = task["userTaskKey"]
        if action == "complete":
            method, path, body = "POST", f"/v1/user-tasks/{key}/completion", {"variables": self.sub(step.get("variables", {}))}
        elif action == "assign":
            body = {"assignee": self.sub(step["assignee"])}
            if "allowOverride" in step:
                body["allowOverride"] = step["allowOverride"]
            method, path = "POST", f"/v1/user-tasks/{key}/assignment"
        elif action == "unassign":
            method, path, body = "DELETE", f"/v1/user-tasks/{key}/assignee", None
        elif action == "update":
            method, path, body = "PATCH", f"/v1/user-tasks/{key}", {"changeset": self.sub(step.get("changeset", {}))}
        else:
            raise ValueError(f"{self.name}: unknown user task action {action}")
        status, answer = await http(method, path, body)
        record["status"] = status
        if isinstance(answer, dict) and "title" in answer:
            record["title"] = answer["title"]
            record["_detail"] = answer.get("detail")
        # the store sees the change after the exporter ran: wait until the task shows it
        if status == 204 and step.get("settle", True):
            await asyncio.sleep(0.3)

    async def alive(self, key):
        """An instance is alive while SetVariables on it is accepted (NOT_FOUND once it ended)."""
        status = "?"
        for _ in range(10):
            status, _, _ = await self.call(lambda: self.stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=key, variables="{}")))
            if status != "OK":
                break
            await asyncio.sleep(0.1)
        return {"OK": "alive", "NOT_FOUND": "finished"}.get(status, status)

    async def run(self):
        self.pending = []
        for step in self.spec["steps"]:
            self.records.append(await self.step(step))
        for task in self.pending:
            await task
        instances = {}
        for key in self.created:
            instances[self.instance(key)] = await self.alive(key)
        return self.unsub({"steps": self.records, "instances": instances})


REST = None  # the REST API's base URL (--rest)


async def http(method, path, body):
    """(status, parsed JSON body or text) of a REST request (urllib, off the event loop)."""
    import urllib.error
    import urllib.request

    def send():
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(REST + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8")

    status, text = await asyncio.to_thread(send)
    return status, json_or_text(text) if text else None


def json_or_text(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def evaluation_record(r):
    """What an EvaluateDecision answer says, keys left out (they differ between servers)."""
    return {
        "decisionId": r.decisionId,
        "decisionName": r.decisionName,
        "decisionVersion": r.decisionVersion,
        "decisionRequirementsId": r.decisionRequirementsId,
        "decisionOutput": json_or_text(r.decisionOutput),
        "failedDecisionId": r.failedDecisionId,
        "failureMessage": r.failureMessage,
        "evaluatedDecisions": [
            {
                "decisionId": d.decisionId,
                "decisionName": d.decisionName,
                "decisionVersion": d.decisionVersion,
                "decisionType": d.decisionType,
                "decisionOutput": json_or_text(d.decisionOutput),
                "evaluatedInputs": [
                    {"inputId": i.inputId, "inputName": i.inputName, "inputValue": json_or_text(i.inputValue)} for i in d.evaluatedInputs
                ],
                "matchedRules": [
                    {
                        "ruleId": m.ruleId,
                        "ruleIndex": m.ruleIndex,
                        "evaluatedOutputs": [
                            {"outputId": o.outputId, "outputName": o.outputName, "outputValue": json_or_text(o.outputValue)}
                            for o in m.evaluatedOutputs
                        ],
                    }
                    for m in d.matchedRules
                ],
            }
            for d in r.evaluatedDecisions
        ],
    }


def load(only):
    directory = os.path.join(HERE, "scenarios")
    names = sorted(f[:-5] for f in os.listdir(directory) if f.endswith(".json"))
    if only:
        wanted = set(only.split(","))
        names = [n for n in names if n in wanted]
    specs = {}
    for name in names:
        with open(os.path.join(directory, name + ".json"), encoding="utf-8") as f:
            specs[name] = json.load(f)
    return specs


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--parallel", type=int, default=24)
    parser.add_argument("--rest", help="the REST API's base URL (http://HOST:PORT), for userTask steps")
    args = parser.parse_args()
    global REST
    REST = args.rest
    os.makedirs(args.out, exist_ok=True)
    specs = load(args.only)
    limit = asyncio.Semaphore(args.parallel)
    failures = []
    async with grpc.aio.insecure_channel(args.address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        await stub.Topology(pb.TopologyRequest(), timeout=30)

        glitched = []

        async def one(name, spec, alone=False):
            async with limit:
                started = time.monotonic()
                try:
                    outcome = await asyncio.wait_for(Scenario(name, spec, stub).run(), timeout=90)
                except Glitch:
                    if not alone:
                        glitched.append(name)
                        print(f"{name}: transport glitch, will run again alone", flush=True)
                        return
                    failures.append(name)
                    outcome = {"error": "transport glitch (INTERNAL: connection was closed), also alone"}
                except Exception as e:  # a broken scenario is reported, the others still run
                    failures.append(name)
                    outcome = {"error": f"{type(e).__name__}: {e}"}
                with open(os.path.join(args.out, name + ".json"), "w", encoding="utf-8") as f:
                    json.dump(outcome, f, indent=2, sort_keys=True)
                    f.write("\n")
                print(f"{name} {time.monotonic() - started:.1f}s", flush=True)

        await asyncio.gather(*(one(n, s) for n, s in specs.items() if not s.get("alone")))
        # "alone": scenarios that disturb others, such as a with-result create that times out
        # (in Zeebe 8.5.8 that closes the gateway's connection to the broker, see Glitch)
        for name in sorted(n for n, s in specs.items() if s.get("alone")):
            await one(name, specs[name], alone=True)
        for name in sorted(glitched):
            await one(name, specs[name], alone=True)
    if failures:
        print(f"scenarios that raised: {', '.join(sorted(failures))}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main())
