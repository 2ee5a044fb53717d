#!/usr/bin/env python3
"""A pyzeebe 4.7 program with a streaming worker that completes a number of one-task instances
(process `benchmark`, job type `benchmark-task`) and exits: the first half of the job stream
hand-over test (crates/waggle/tests/stream_handover.rs).

Usage: stream_handover.py --address HOST:PORT --instances N

Prints "OK <n> completed" and exits 0, or exits 1 with the reason.
"""
import argparse
import asyncio
import sys

from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel


async def run(args):
    channel = create_insecure_channel(grpc_address=args.address)
    client = ZeebeClient(channel)
    worker = ZeebeWorker(channel, name="py-handover", stream_enabled=True, poll_retry_delay=1)
    # a job this worker holds stays its own for five minutes: far longer than the test waits, so
    # a job lost to it is not rescued by its time-out
    completed = set()
    all_done = asyncio.get_running_loop().create_future()

    @worker.task(task_type="benchmark-task", timeout_ms=300000)
    async def task(job: Job):
        completed.add(job.process_instance_key)
        if len(completed) >= args.instances and not all_done.done():
            all_done.set_result(None)
        return {}

    work = asyncio.create_task(worker.work())
    try:
        for _ in range(args.instances):
            await client.run_process("benchmark", {})
        await asyncio.wait_for(all_done, 30)
    finally:
        await worker.stop()
        work.cancel()
    print(f"OK {len(completed)} completed", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--instances", type=int, default=30)
    args = parser.parse_args()
    try:
        asyncio.run(run(args))
    except Exception as e:  # noqa: BLE001 - the driver reports any failure and exits non-zero
        print(f"FAILED: {type(e).__name__}: {e!r}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
