// The E2B figures of `make bench`, measured with the unmodified e2b SDK
// against an E2B front door (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY from
// the environment). Prints one JSON object on its last line of output; the
// Go bench (tests/bench) reads it and computes the ratios.
//
//   node bench.mjs first-command <template> <n> <every-ms>
//       n times, one every every-ms (0: all at once): Sandbox.create, then
//       commands.run('echo hi'); the latency of each is from create's call
//       to the command's output. The sandboxes are killed afterwards.
//   node bench.mjs commands <template> <n>
//       one sandbox, then commands.run('echo hi') n times in a row.
//   node bench.mjs execute <router-url> <namespace> <sandbox> <n>
//       the same command n times through the router's legacy POST /execute
//       (upstream's headers; fetch, keep-alive), for comparison.
import { Sandbox } from 'e2b'

const args = process.argv.slice(2)
const mode = args[0]
const template = args[1]
const n = Number.parseInt(mode === 'execute' ? args[4] : args[2], 10)
if (!template || !(n > 0)) usage()

function usage() {
  console.error('usage: node bench.mjs first-command <template> <n> <every-ms> | commands <template> <n> | execute <router-url> <namespace> <sandbox> <n>')
  process.exit(2)
}

function describe(err) {
  return err instanceof Error ? `${err.constructor.name}: ${err.message}` : String(err)
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const round1 = (x) => Math.round(x * 10) / 10

async function firstCommand(every) {
  const made = []
  const latencies = []
  const errors = []
  const start = performance.now()
  const one = async (i) => {
    await sleep(i * every)
    const t0 = performance.now()
    try {
      const sbx = await Sandbox.create(template, { timeoutMs: 600_000 })
      made.push(sbx)
      const r = await sbx.commands.run('echo hi')
      if (r.stdout !== 'hi\n') throw new Error(`stdout ${JSON.stringify(r.stdout)}`)
      latencies.push(round1(performance.now() - t0))
    } catch (err) {
      errors.push(describe(err))
    }
  }
  await Promise.all(Array.from({ length: n }, (_, i) => one(i)))
  const seconds = (performance.now() - start) / 1000
  const killErrors = []
  await Promise.all(made.map((s) => s.kill().catch((err) => killErrors.push(describe(err)))))
  return { mode: 'first-command', n, every_ms: every, seconds: round1(seconds), latencies_ms: latencies, errors, kill_errors: killErrors }
}

async function commands() {
  const sbx = await Sandbox.create(template, { timeoutMs: 600_000 })
  const latencies = []
  const errors = []
  try {
    // One untimed call: the router's and the SDK's connections are warm.
    await sbx.commands.run('echo hi')
    for (let i = 0; i < n; i++) {
      const t0 = performance.now()
      try {
        const r = await sbx.commands.run('echo hi')
        if (r.stdout !== 'hi\n') throw new Error(`stdout ${JSON.stringify(r.stdout)}`)
        latencies.push(round1(performance.now() - t0))
      } catch (err) {
        errors.push(describe(err))
      }
    }
  } finally {
    await sbx.kill()
  }
  return { mode: 'commands', n, sandbox_id: sbx.sandboxId, latencies_ms: latencies, errors }
}

async function execute(routerURL, namespace, sandbox) {
  const call = async () => {
    const resp = await fetch(`${routerURL}/execute`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Sandbox-ID': sandbox, 'X-Sandbox-Namespace': namespace },
      body: JSON.stringify({ command: 'echo hi' }),
    })
    const body = await resp.text()
    if (resp.status !== 200) throw new Error(`HTTP ${resp.status}: ${body}`)
    const r = JSON.parse(body)
    if (r.stdout !== 'hi\n' || r.exit_code !== 0) throw new Error(`answer ${body}`)
  }
  const latencies = []
  const errors = []
  await call()
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    try {
      await call()
      latencies.push(round1(performance.now() - t0))
    } catch (err) {
      errors.push(describe(err))
    }
  }
  return { mode: 'execute', n, latencies_ms: latencies, errors }
}

let result
if (mode === 'first-command') {
  const every = Number.parseInt(args[3] ?? '0', 10)
  if (!(every >= 0)) usage()
  result = await firstCommand(every)
} else if (mode === 'commands') {
  result = await commands()
} else if (mode === 'execute') {
  result = await execute(args[1], args[2], args[3])
} else {
  usage()
}
console.log(JSON.stringify(result))
