#!/usr/bin/env node
// The second half of the job stream hand-over test (crates/waggle/tests/stream_handover.rs), with
// the Node SDK (@camunda8/sdk; NODE_PATH pointing at its node_modules), on one-task instances
// (process `benchmark`, job type `benchmark-task`):
//   1. a streaming worker completes N instances created with result, and is closed;
//   2. a polling worker does the same, and is closed;
//   3. one more instance is created, and ActivateJobs (up to 1,000 jobs, 5 s) must return its job.
//   node stream_handover.cjs --address HOST:PORT [--instances N]
// Prints "OK <step>" after each step; exits 1 with the reason at the first failure.
'use strict'
const { Camunda8 } = require('@camunda8/sdk')

function parseArgs(argv) {
  const args = { instances: 20 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--address') args.address = argv[++i]
    else if (a === '--instances') args.instances = Number(argv[++i])
    else throw new Error(`unknown argument ${a}`)
  }
  if (!args.address) throw new Error('--address is required')
  return args
}

const ok = (step) => console.log(`OK ${step}`)
function check(condition, message) {
  if (!condition) throw new Error(message)
}

const TYPE = 'benchmark-task'

/** Creates `n` instances with result, one after another, while `worker` serves their jobs. */
async function completeWithResult(zbc, n) {
  for (let i = 0; i < n; i++) {
    const result = await zbc.createProcessInstanceWithResult({ bpmnProcessId: 'benchmark', variables: { i }, requestTimeout: 20000 })
    check(result.variables.done === true, `instance ${i}: result ${JSON.stringify(result.variables)}`)
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const c8 = new Camunda8({
    ZEEBE_GRPC_ADDRESS: `grpc://${args.address}`,
    CAMUNDA_AUTH_STRATEGY: 'NONE',
    ZEEBE_GRPC_CLIENT_RETRY: false,
    CAMUNDA_LOG_LEVEL: 'error',
  })
  const zbc = c8.getZeebeGrpcApiClient()
  const taskHandler = (job) => job.complete({ done: true })
  try {
    const streaming = await zbc.streamJobs({ type: TYPE, worker: 'node-handover-stream', timeout: 60000, taskHandler })
    await completeWithResult(zbc, args.instances)
    await streaming.close()
    ok('streaming-worker')

    const polling = zbc.createWorker({ taskType: TYPE, worker: 'node-handover-poll', timeout: 60000, taskHandler, pollInterval: 100 })
    await completeWithResult(zbc, args.instances)
    await polling.close()
    ok('polling-worker')

    const created = await zbc.createProcessInstance({ bpmnProcessId: 'benchmark', variables: {} })
    const jobs = await zbc.activateJobs({ type: TYPE, worker: 'node-handover-last', maxJobsToActivate: 1000, timeout: 60000, requestTimeout: 5000 })
    const keys = jobs.map((j) => String(j.processInstanceKey))
    check(keys.includes(String(created.processInstanceKey)), `ActivateJobs returned ${jobs.length} jobs (${keys}), not the job of instance ${created.processInstanceKey}`)
    await zbc.completeJob({ jobKey: jobs.find((j) => String(j.processInstanceKey) === String(created.processInstanceKey)).key, variables: {} })
    ok('last-job')
  } finally {
    await zbc.close(2000)
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`FAILED: ${e && e.stack ? e.stack : e}`)
    process.exit(1)
  }
)
