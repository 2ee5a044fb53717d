#!/usr/bin/env node
// Drives a Zeebe gateway (Waggle, or any server of the protocol) with the Node SDK (@camunda8/sdk) through the
// single-node flows. Needs NODE_PATH pointing at the SDK's node_modules.
//   node driver.cjs --address HOST:PORT --models DIR --management URL [--stream]
// Prints "OK <step>" after each step; exits 1 with the reason at the first failure. The incident
// key is read from Waggle's management API (GET <management>/v1/incidents).
'use strict'
const path = require('path')
const { Camunda8 } = require('@camunda8/sdk')

function parseArgs(argv) {
  const args = { stream: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--stream') args.stream = true
    else if (['--address', '--models', '--management'].includes(a)) args[a.slice(2)] = argv[++i]
    else throw new Error(`unknown argument ${a}`)
  }
  for (const k of ['address', 'models', 'management']) if (!args[k]) throw new Error(`--${k} is required`)
  return args
}

const ok = (step) => console.log(`OK ${step}`)
function check(condition, message) {
  if (!condition) throw new Error(message)
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function eventually(probe, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value) return value
    check(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(100)
  }
}

async function expectCode(promise, code, what) {
  try {
    await promise
  } catch (e) {
    check(e.code === code, `${what}: expected gRPC code ${code}, got ${e.code} (${e.message})`)
    return
  }
  throw new Error(`${what}: expected gRPC code ${code}, but the call succeeded`)
}

const NOT_FOUND = 5
const INVALID_ARGUMENT = 3
const ALREADY_EXISTS = 6

async function incidentOf(management, processInstanceKey) {
  const response = await fetch(`${management}/v1/incidents`)
  const body = await response.json()
  return body.items.find((i) => String(i.processInstanceKey) === String(processInstanceKey))
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
  const workers = []
  try {
    const topology = await zbc.topology()
    check(topology.clusterSize === 1, `cluster size ${topology.clusterSize}`)
    const partitions = topology.brokers.flatMap((b) => b.partitions)
    check(partitions.length === topology.partitionsCount, `partitions ${JSON.stringify(partitions)}`)
    check(partitions.every((p) => p.role === 'LEADER' && p.health === 'HEALTHY'), `partitions ${JSON.stringify(partitions)}`)
    ok('topology')

    const ids = []
    for (const file of ['order.bpmn', 'fail.bpmn', 'one_task.bpmn']) {
      const deployed = await zbc.deployResource({ processFilename: path.join(args.models, file) })
      ids.push(...deployed.deployments.map((d) => d.process.bpmnProcessId))
    }
    check(JSON.stringify(ids) === JSON.stringify(['order', 'fail', 'benchmark']), `deployed ${ids}`)
    ok('deploy')

    const seen = new Map()
    const flaky = { fixed: false, attempts: 0 }
    let flakyDone
    const flakyCompleted = new Promise((resolve) => (flakyDone = resolve))
    const handlers = {
      reserve: (job) => {
        seen.set(job.variables.orderId, job)
        return job.complete({ reserved: true })
      },
      approve: (job) => job.complete({ approved: true }),
      flaky: async (job) => {
        flaky.attempts++
        if (!flaky.fixed) return job.fail({ errorMessage: 'boom', retries: job.retries - 1 })
        const ack = await job.complete({ fixed: true })
        flakyDone(job.processInstanceKey)
        return ack
      },
    }
    for (const [type, taskHandler] of Object.entries(handlers)) {
      if (args.stream) workers.push(await zbc.streamJobs({ type, worker: 'node-driver', timeout: 60000, taskHandler }))
      else workers.push(zbc.createWorker({ taskType: type, worker: 'node-driver', timeout: 60000, taskHandler, pollInterval: 100 }))
    }

    const created = await zbc.createProcessInstance({ bpmnProcessId: 'order', variables: { orderId: 'n-1', amount: 5 } })
    const job = await eventually(() => seen.get('n-1'), 'the reserve job of n-1')
    check(String(job.processInstanceKey) === String(created.processInstanceKey), 'job of another instance')
    check(job.variables.id === 'n-1', `input mapping: ${JSON.stringify(job.variables)}`)
    check(job.customHeaders.warehouse === 'north', `headers: ${JSON.stringify(job.customHeaders)}`)
    check(job.elementId === 'reserve' && job.bpmnProcessId === 'order', `job ${JSON.stringify(job)}`)
    ok('create-and-complete')

    const result = await zbc.createProcessInstanceWithResult({
      bpmnProcessId: 'order',
      variables: { orderId: 'n-2', amount: 500 },
      requestTimeout: 20000,
    })
    check(result.variables.reserved === true && result.variables.approved === true, `result ${JSON.stringify(result.variables)}`)
    const fetched = await zbc.createProcessInstanceWithResult({
      bpmnProcessId: 'order',
      variables: { orderId: 'n-3', amount: 1 },
      requestTimeout: 20000,
      fetchVariables: ['orderId'],
    })
    check(JSON.stringify(fetched.variables) === '{"orderId":"n-3"}', `fetchVariables: ${JSON.stringify(fetched.variables)}`)
    ok('create-with-result')

    const failing = await zbc.createProcessInstance({ bpmnProcessId: 'fail', variables: {} })
    const incident = await eventually(() => incidentOf(args.management, failing.processInstanceKey), 'the incident of the failing job')
    check(incident.errorType === 'JOB_NO_RETRIES' && incident.errorMessage === 'boom', `incident ${JSON.stringify(incident)}`)
    check(flaky.attempts === 2, `attempts before the incident: ${flaky.attempts}`)
    flaky.fixed = true
    await zbc.updateJobRetries({ jobKey: incident.jobKey, retries: 1 })
    await zbc.resolveIncident({ incidentKey: incident.key })
    const done = await Promise.race([flakyCompleted, sleep(30000).then(() => null)])
    check(String(done) === String(failing.processInstanceKey), 'the fixed job was not completed')
    check((await incidentOf(args.management, failing.processInstanceKey)) === undefined, 'the incident is still listed')
    ok('incident')

    const idle = await zbc.createProcessInstance({ bpmnProcessId: 'benchmark', variables: { n: 1 } })
    await zbc.setVariables({ elementInstanceKey: idle.processInstanceKey, variables: { extra: 42 } })
    const idleJob = await eventually(async () => {
      const jobs = await zbc.activateJobs({ type: 'benchmark-task', worker: 'node-driver', maxJobsToActivate: 10, timeout: 60000, requestTimeout: 1000 })
      return jobs.find((j) => String(j.processInstanceKey) === String(idle.processInstanceKey))
    }, 'the benchmark job')
    check(idleJob.variables.n === 1 && idleJob.variables.extra === 42 && Object.keys(idleJob.variables).length === 2, `variables after SetVariables: ${JSON.stringify(idleJob.variables)}`)
    ok('set-variables')

    await zbc.cancelProcessInstance(idle.processInstanceKey)
    await expectCode(zbc.completeJob({ jobKey: idleJob.key, variables: {} }), NOT_FOUND, 'job of a cancelled instance')
    await expectCode(zbc.cancelProcessInstance(idle.processInstanceKey), NOT_FOUND, 'cancel twice')
    ok('cancel')

    const published = await zbc.publishMessage({ name: 'order-paid', correlationKey: 'n-1', messageId: 'pay-n', timeToLive: 60000, variables: { paid: true } })
    check(BigInt(published.key) > 0n, `message key ${published.key}`)
    await expectCode(
      zbc.publishMessage({ name: 'order-paid', correlationKey: 'n-1', messageId: 'pay-n', timeToLive: 60000, variables: {} }),
      ALREADY_EXISTS,
      'duplicate messageId'
    )
    ok('publish-message')

    await expectCode(zbc.createProcessInstance({ bpmnProcessId: 'no-such-process', variables: {} }), NOT_FOUND, 'unknown process')
    await expectCode(zbc.deployResource({ name: 'broken.bpmn', process: Buffer.from('<definitions') }), INVALID_ARGUMENT, 'invalid XML')
    await expectCode(zbc.updateJobRetries({ jobKey: '2251799813999999', retries: 0 }), INVALID_ARGUMENT, 'update retries to 0')
    // as on Zeebe 8.5.8 (docs/compatibility.md): a negative maxJobsToActivate activates nothing
    const none = await zbc.activateJobs({ type: 'reserve', worker: 'w', maxJobsToActivate: -1, timeout: 1000, requestTimeout: 1000 })
    check(none.length === 0, `maxJobsToActivate -1 activated ${none.length} jobs`)
    ok('bad-input')
  } finally {
    for (const w of workers) await w.close()
    await zbc.close(2000)
  }
  ok('all')
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`FAILED: ${e && e.stack ? e.stack : e}`)
    process.exit(1)
  }
)
