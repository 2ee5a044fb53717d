#!/usr/bin/env node
// The Node SDK (@camunda8/sdk 8.8) driving Waggle's REST API v2 command endpoints through its
// CamundaRestClient, with a gRPC address where nothing listens (every command goes over REST):
// deploy, create, activate, a polling job worker, fail to an incident, update the job, resolve the incident, set
// variables, complete, publish, broadcast a signal, modify an instance, throw an error, evaluate
// a decision, delete a resource; correlate a message to a waiting catch event (the answer names
// its instance), and one nothing waits for (404).
// Needs NODE_PATH pointing at the SDK's node_modules.
//   node rest_commands.cjs --rest PORT --models DIR
// Prints OK at the end; exits 1 with the reason at the first failure.
'use strict'
const net = require('net')
const path = require('path')
const { Camunda8 } = require('@camunda8/sdk')

function check(condition, message) {
  if (!condition) throw new Error(message)
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function eventually(probe, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value) return value
    check(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(50)
  }
}
async function expectStatus(promise, status, what) {
  try {
    await promise
  } catch (e) {
    check(e.statusCode === status, `${what}: expected HTTP ${status}, got ${e.statusCode} (${e.message})`)
    return
  }
  throw new Error(`${what}: expected HTTP ${status}, but the call succeeded`)
}
const deadPort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = s.address().port
      s.close(() => resolve(port))
    })
  })

async function main() {
  const argv = process.argv.slice(2)
  const arg = (name) => argv[argv.indexOf(`--${name}`) + 1]
  const models = arg('models')
  const c8 = new Camunda8({
    ZEEBE_REST_ADDRESS: `http://127.0.0.1:${arg('rest')}`,
    ZEEBE_GRPC_ADDRESS: `grpc://127.0.0.1:${await deadPort()}`,
    CAMUNDA_AUTH_STRATEGY: 'NONE',
    CAMUNDA_LOG_LEVEL: 'error',
  })
  const rest = c8.getCamundaRestClient()

  const deployment = await rest.deployResourcesFromFiles(['rest_commands.bpmn', 'fail.bpmn', 'dish.dmn'].map((f) => path.join(models, f)))
  check(deployment.processes.length === 2 && deployment.decisions.length === 3, `deployment ${JSON.stringify(deployment)}`)
  check(deployment.decisionRequirements.length === 1, 'one decision requirements graph')
  check(deployment.processes[0].processDefinitionId === 'rest_commands', `process ${JSON.stringify(deployment.processes[0])}`)

  const activate = (type) => rest.activateJobs({ type, maxJobsToActivate: 5, timeout: 30000, worker: 'node', requestTimeout: 5000 })
  const created = await rest.createProcessInstance({ processDefinitionId: 'rest_commands', variables: { orderId: 'n-1' } })
  const instance = String(created.processInstanceKey)
  let jobs = await activate('rest-work')
  check(jobs.length === 1 && String(jobs[0].processInstanceKey) === instance, `jobs ${JSON.stringify(jobs)}`)
  check(jobs[0].variables.orderId === 'n-1', `variables ${JSON.stringify(jobs[0].variables)}`)
  const jobKey = String(jobs[0].jobKey)
  await rest.failJob({ jobKey, retries: 0, errorMessage: 'boom' })
  const incident = await eventually(async () => (await rest.searchIncidents({ filter: { processInstanceKey: instance } })).items[0], 'the incident')
  check(incident.errorMessage === 'boom', `incident ${JSON.stringify(incident)}`)
  await rest.updateJob({ jobKey, retries: 1 })
  await rest.resolveIncident(String(incident.incidentKey))
  jobs = await activate('rest-work')
  check(jobs.length === 1 && String(jobs[0].jobKey) === jobKey, `the job again ${JSON.stringify(jobs)}`)
  await rest.updateJob({ jobKey, retries: 2, timeout: 60000 })
  // one JOB UPDATE: an invalid part rejects the whole changeset
  await expectStatus(rest.updateJob({ jobKey, retries: 0, timeout: 60000 }), 400, 'an update to 0 retries')
  await rest.updateElementInstanceVariables({ elementInstanceKey: instance, variables: { extra: 7 } })
  await jobs[0].complete({ done: true })

  const published = await rest.publishMessage({ name: 'paid', correlationKey: 'n-1', timeToLive: 60000, variables: { paid: true } })
  check(BigInt(published.messageKey) > 0n, `message ${JSON.stringify(published)}`)
  const signal = await rest.broadcastSignal({ signalName: 'go' })
  check(BigInt(signal.signalKey) > 0n, `signal ${JSON.stringify(signal)}`)
  await eventually(
    async () => (await rest.searchProcessInstances({ filter: { processInstanceKey: instance, state: 'COMPLETED' } })).items.length === 1,
    'the instance completed',
  )
  await expectStatus(rest.correlateMessage({ name: 'paid', correlationKey: 'n-2' }), 404, 'a correlation nothing waits for')

  // the SDK's polling job worker (long-polling activations over REST) completes a job
  const handled = []
  const worker = rest.createJobWorker({
    type: 'rest-work',
    worker: 'node-worker',
    timeout: 30000,
    maxJobsToActivate: 4,
    pollIntervalMs: 100,
    jobHandler: (job) => {
      handled.push(String(job.processInstanceKey))
      return job.complete({ byWorker: true })
    },
  })
  const third = String((await rest.createProcessInstance({ processDefinitionId: 'rest_commands', variables: { orderId: 'n-3' } })).processInstanceKey)
  await eventually(async () => handled.includes(third), 'the worker handled the job')
  await worker.stop()
  // the worker completed the job: correlate to the catch event once it waits (404 until then)
  const correlated = await eventually(async () => {
    try {
      return await rest.correlateMessage({ name: 'paid', correlationKey: 'n-3', variables: { correlated: true } })
    } catch (e) {
      check(e.statusCode === 404, `correlation: expected 404 until the catch event waits, got ${e.statusCode} (${e.message})`)
      return null
    }
  }, 'the correlation to the catch event')
  check(String(correlated.processInstanceKey) === third, `correlated ${JSON.stringify(correlated)}`)
  check(BigInt(correlated.messageKey) > 0n && correlated.tenantId === '<default>', `correlated ${JSON.stringify(correlated)}`)
  await rest.broadcastSignal({ signalName: 'go' })
  await eventually(
    async () => (await rest.searchProcessInstances({ filter: { processInstanceKey: third, state: 'COMPLETED' } })).items.length === 1,
    'the worker-driven instance completed',
  )

  const second = String((await rest.createProcessInstance({ processDefinitionId: 'rest_commands', variables: { orderId: 'n-2' } })).processInstanceKey)
  jobs = await activate('rest-work')
  check(jobs.length === 1 && String(jobs[0].processInstanceKey) === second, `second job ${JSON.stringify(jobs)}`)
  await rest.modifyProcessInstance({
    processInstanceKey: second,
    activateInstructions: [{ elementId: 'wait_go' }],
    terminateInstructions: [{ elementInstanceKey: String(jobs[0].elementInstanceKey) }],
  })
  await rest.broadcastSignal({ signalName: 'go' })
  await eventually(
    async () => (await rest.searchProcessInstances({ filter: { processInstanceKey: second, state: 'COMPLETED' } })).items.length === 1,
    'the modified instance completed',
  )

  await rest.createProcessInstance({ processDefinitionId: 'fail', variables: {} })
  jobs = await activate('flaky')
  check(jobs.length === 1, `flaky ${JSON.stringify(jobs)}`)
  await rest.errorJob({ jobKey: String(jobs[0].jobKey), errorCode: 'E-1', errorMessage: 'thrown' })

  const evaluated = await rest.evaluateDecision({ decisionDefinitionId: 'dish', variables: { month: 10, guestCount: 4 } })
  check(evaluated.output === '"Spareribs"', `decision ${JSON.stringify(evaluated)}`)
  check(evaluated.evaluatedDecisions.length === 2, 'two evaluated decisions')

  await rest.deleteResource({ resourceKey: String(deployment.decisionRequirements[0].decisionRequirementsKey) })
  await expectStatus(rest.evaluateDecision({ decisionDefinitionId: 'dish', variables: { month: 10 } }), 404, 'a deleted decision')
  await expectStatus(rest.completeJob({ jobKey: '2251799813685249' }), 404, 'an unknown job')
  console.log('OK')
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e && e.stack ? e.stack : e)
    process.exit(1)
  },
)
