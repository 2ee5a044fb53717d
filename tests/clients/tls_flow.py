#!/usr/bin/env python3
"""pyzeebe 4.7 over TLS: deploy -> create (awaiting the result) -> activate the job -> complete it
-> the instance's result arrives. The channel is pyzeebe's secure channel trusting only the CA
given, or with --client-id its OAuth 2 client-credentials channel (the token from --token-url for
--audience). Run by crates/waggle/tests/security.rs and oauth.rs.

Usage: tls_flow.py --address HOST:PORT --ca CA.pem --models DIR
                   [--client-id ID --client-secret SECRET --token-url URL --audience AUDIENCE]
Prints "OK <step>" per step; exits 1 with the reason at the first failure.
"""
import argparse
import asyncio
import json
import os
import sys

import grpc
from pyzeebe import ZeebeClient, create_oauth2_client_credentials_channel, create_secure_channel
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc


def ok(step):
    print(f"OK {step}", flush=True)


async def run(args):
    with open(args.ca, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    if args.client_id:
        channel = create_oauth2_client_credentials_channel(
            grpc_address=args.address,
            client_id=args.client_id,
            client_secret=args.client_secret,
            authorization_server=args.token_url,
            audience=args.audience,
            scope=None,
            channel_credentials=credentials,
        )
    else:
        channel = create_secure_channel(grpc_address=args.address, channel_credentials=credentials)
    client = ZeebeClient(channel)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    await client.deploy_resource(os.path.join(args.models, "one_task.bpmn"))
    ok("deploy")
    result = asyncio.ensure_future(client.run_process_with_result("benchmark", {"via": "tls"}, timeout=30_000))
    ok("create")
    job = None
    for _ in range(100):
        request = pb.ActivateJobsRequest(type="benchmark-task", worker="tls", timeout=60_000, maxJobsToActivate=1, requestTimeout=1_000)
        async for response in stub.ActivateJobs(request):
            job = job or next(iter(response.jobs), None)
        if job:
            break
    if job is None:
        raise AssertionError("no job to activate")
    await stub.CompleteJob(pb.CompleteJobRequest(jobKey=job.key, variables=json.dumps({"done": True})))
    ok("complete")
    done = await asyncio.wait_for(result, 30)
    if done.variables.get("done") is not True:
        raise AssertionError(f"result {done.variables}")
    ok("result")
    await channel.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--client-id")
    parser.add_argument("--client-secret")
    parser.add_argument("--token-url")
    parser.add_argument("--audience")
    try:
        asyncio.run(run(parser.parse_args()))
    except Exception as e:  # noqa: BLE001 - the reason is printed for the test
        print(f"FAILED: {e!r}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
