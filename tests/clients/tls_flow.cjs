// The Node SDK 8.8 over TLS: deploy -> create (awaiting the result) -> activate the job ->
// complete it -> the instance's result arrives. grpcs:// with CAMUNDA_CUSTOM_ROOT_CERT_PATH, the
// CA to trust; with --client-id, the SDK's OAuth strategy (a client-credentials token from
// --token-url for --audience). Run by crates/waggle/tests/security.rs and oauth.rs:
//   NODE_PATH=... node tls_flow.cjs --address HOST:PORT --ca CA.pem --models DIR
//     [--client-id ID --client-secret SECRET --token-url URL --audience AUDIENCE]
// Prints "OK <step>" per step; exits 1 with the reason at the first failure.
const path = require('path')
const { Camunda8 } = require('@camunda8/sdk')

function arg(name, optional) {
  const i = process.argv.indexOf(`--${name}`)
  if (i < 0) {
    if (optional) return undefined
    throw new Error(`--${name} missing`)
  }
  return process.argv[i + 1]
}

// the SDK's OAuth settings, when a client id is given
function auth() {
  if (!arg('client-id', true)) return { CAMUNDA_AUTH_STRATEGY: 'NONE' }
  return {
    CAMUNDA_AUTH_STRATEGY: 'OAUTH',
    ZEEBE_CLIENT_ID: arg('client-id'),
    ZEEBE_CLIENT_SECRET: arg('client-secret'),
    CAMUNDA_OAUTH_URL: arg('token-url'),
    ZEEBE_TOKEN_AUDIENCE: arg('audience'),
    CAMUNDA_TOKEN_DISK_CACHE_DISABLE: true,
  }
}

const ok = (step) => console.log(`OK ${step}`)

async function main() {
  const c8 = new Camunda8({
    ZEEBE_GRPC_ADDRESS: `grpcs://${arg('address')}`,
    CAMUNDA_CUSTOM_ROOT_CERT_PATH: arg('ca'),
    ...auth(),
    ZEEBE_GRPC_CLIENT_RETRY: false,
    CAMUNDA_LOG_LEVEL: 'error',
  })
  const zbc = c8.getZeebeGrpcApiClient()
  try {
    await zbc.deployResource({ processFilename: path.join(arg('models'), 'one_task.bpmn') })
    ok('deploy')
    const result = zbc.createProcessInstanceWithResult({ bpmnProcessId: 'benchmark', variables: { via: 'tls' }, requestTimeout: 30000 })
    ok('create')
    let job
    for (let i = 0; i < 100 && !job; i++) {
      const jobs = await zbc.activateJobs({ type: 'benchmark-task', worker: 'tls', maxJobsToActivate: 1, timeout: 60000, requestTimeout: 1000 })
      job = jobs[0]
    }
    if (!job) throw new Error('no job to activate')
    await zbc.completeJob({ jobKey: job.key, variables: { done: true } })
    ok('complete')
    const done = await result
    if (done.variables.done !== true) throw new Error(`result ${JSON.stringify(done.variables)}`)
    ok('result')
  } finally {
    await zbc.close()
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`FAILED: ${e && e.stack ? e.stack : e}`)
    process.exit(1)
  },
)
