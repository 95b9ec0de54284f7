// Runs the unmodified e2b SDK (the version package-lock.json pins) against
// an E2B-compatible front door: the SDK reads E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY from the environment, as an agent would. One JSON line is
// printed per step ({"step", "ok", "ms", "detail" | "error"}), then a summary
// line; the exit status is 1 when any step failed.
//
//   node sdk.mjs [template]      (template: the warm pool or SandboxTemplate,
//                                 default python-pool, the sample pool)
import { CommandExitError, FileType, NotFoundError, Sandbox } from 'e2b'

const template = process.argv[2] || 'python-pool'
for (const name of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[name]) {
    console.error(`sdk.mjs: ${name} is not set`)
    process.exit(2)
  }
}

const STEP_TIMEOUT_MS = 120_000
const results = []

// step runs fn with a deadline and prints its outcome; it returns fn's value,
// or undefined when it failed.
async function step(name, fn) {
  const start = performance.now()
  let timer
  try {
    const detail = await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS)
      }),
    ])
    report({ step: name, ok: true, ms: elapsed(start), detail: detail ?? null })
    return detail ?? true
  } catch (err) {
    report({ step: name, ok: false, ms: elapsed(start), error: describe(err) })
    return undefined
  } finally {
    clearTimeout(timer)
  }
}

function report(r) {
  results.push(r)
  console.log(JSON.stringify(r))
}

function elapsed(start) {
  return Math.round((performance.now() - start) * 10) / 10
}

function describe(err) {
  if (!(err instanceof Error)) return String(err)
  // fetch's own errors ("fetch failed") say why only in their cause.
  const cause = err.cause instanceof Error ? ` (cause: ${err.cause.code ?? err.cause.constructor.name}: ${err.cause.message})` : ''
  return `${err.constructor.name}: ${err.message}${cause}`
}

function check(cond, msg) {
  if (!cond) throw new Error(msg)
}

function eq(got, want, what) {
  check(JSON.stringify(got) === JSON.stringify(want), `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
}

// rejects expects promise to fail and returns the error.
async function rejects(promise, what) {
  try {
    await promise
  } catch (err) {
    return err
  }
  throw new Error(`${what} succeeded; want an error`)
}

async function until(what, ms, cond) {
  const deadline = Date.now() + ms
  for (;;) {
    if (await cond()) return
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function listIds(query) {
  const ids = []
  const pages = Sandbox.list({ query })
  while (pages.hasNext) {
    for (const info of await pages.nextItems()) ids.push(info.sandboxId)
  }
  return ids
}

const run = `e2b-${process.pid}-${Date.now().toString(36)}`
const dir = `e2b-test-${run}`
let sbx

try {
  await step('create', async () => {
    sbx = await Sandbox.create(template, { timeoutMs: 300_000, metadata: { suite: run } })
    const info = await sbx.getInfo()
    eq(info.state, 'running', 'state')
    eq(info.templateId, template, 'templateId')
    return { sandboxId: sbx.sandboxId, envdVersion: info.envdVersion, endAt: info.endAt.toISOString() }
  })
  if (!sbx) throw new Error('no sandbox: the remaining steps need one')
  const id = sbx.sandboxId

  await step('echo', async () => {
    const r = await sbx.commands.run('echo hi')
    eq(r.stdout, 'hi\n', 'stdout')
    eq(r.exitCode, 0, 'exit code')
    return { stdout: r.stdout, exitCode: r.exitCode }
  })

  await step('env_and_stderr', async () => {
    const r = await sbx.commands.run('echo "$GREETING"; echo oops >&2', { envs: { GREETING: 'hello from e2b' } })
    eq(r.stdout, 'hello from e2b\n', 'stdout')
    eq(r.stderr, 'oops\n', 'stderr')
    return { stdout: r.stdout, stderr: r.stderr }
  })

  await step('nonzero_exit_raises', async () => {
    const err = await rejects(sbx.commands.run('echo partial; exit 3'), 'run(exit 3)')
    check(err instanceof CommandExitError, `got ${describe(err)}; want CommandExitError`)
    eq(err.exitCode, 3, 'exit code')
    eq(err.stdout, 'partial\n', 'stdout')
    return { exitCode: err.exitCode }
  })

  await step('stdin', async () => {
    const h = await sbx.commands.run('read line; echo "got:$line"', { background: true, stdin: true })
    await sbx.commands.sendStdin(h.pid, 'hello\n')
    const r = await h.wait()
    eq(r.stdout, 'got:hello\n', 'stdout')
    return { pid: h.pid, stdout: r.stdout }
  })

  await step('stdin_close', async () => {
    check(sbx.commands.supportsStdinClose, 'the reported envdVersion does not allow closeStdin')
    const h = await sbx.commands.run('wc -c', { background: true, stdin: true })
    await h.sendStdin('abcd')
    await h.closeStdin()
    const r = await h.wait()
    eq(r.stdout.trim(), '4', 'wc -c')
    return { stdout: r.stdout }
  })

  await step('kill_running_command', async () => {
    const h = await sbx.commands.run('sleep 600', { background: true })
    const listed = (await sbx.commands.list()).map((p) => p.pid)
    check(listed.includes(h.pid), `commands.list() = ${JSON.stringify(listed)} lacks ${h.pid}`)
    eq(await sbx.commands.kill(h.pid), true, 'kill(pid)')
    const err = await rejects(h.wait(), 'wait() after kill')
    check(err instanceof CommandExitError, `wait() after kill: ${describe(err)}; want CommandExitError`)
    await until('the killed command leaves commands.list()', 10_000, async () =>
      !(await sbx.commands.list()).some((p) => p.pid === h.pid))
    eq(await sbx.commands.kill(h.pid), false, 'kill(pid) of a finished command')
    return { pid: h.pid, exitCode: err.exitCode, error: err.error ?? null }
  })

  const content = `written by the e2b SDK, run ${run}\n`
  await step('files', async () => {
    eq(await sbx.files.makeDir(dir), true, `makeDir(${dir})`)
    eq(await sbx.files.makeDir(dir), false, `makeDir(${dir}) again`)
    const w = await sbx.files.write(`${dir}/notes.txt`, content)
    eq(w.name, 'notes.txt', 'write().name')
    eq(await sbx.files.read(`${dir}/notes.txt`), content, 'read()')
    const entries = await sbx.files.list(dir)
    const notes = entries.find((e) => e.name === 'notes.txt')
    check(notes, `list(${dir}) = ${JSON.stringify(entries.map((e) => e.name))} lacks notes.txt`)
    eq(notes.type, FileType.FILE, 'notes.txt type')
    eq(notes.size, Buffer.byteLength(content), 'notes.txt size')
    eq(await sbx.files.exists(`${dir}/notes.txt`), true, 'exists(notes.txt)')
    eq(await sbx.files.exists(`${dir}/missing.txt`), false, 'exists(missing.txt)')
    eq(await sbx.files.makeDir(`${dir}/sub`), true, 'makeDir(sub)')
    const sub = (await sbx.files.list(dir)).find((e) => e.name === 'sub')
    eq(sub?.type, FileType.DIR, 'sub type')
    await sbx.files.remove(`${dir}/notes.txt`)
    eq(await sbx.files.exists(`${dir}/notes.txt`), false, 'exists(notes.txt) after remove')
    const err = await rejects(sbx.files.read(`${dir}/notes.txt`), 'read() of a removed file')
    check(err instanceof NotFoundError, `read() of a removed file: ${describe(err)}; want NotFoundError`)
    // The command and the file API see the same directory.
    const r = await sbx.commands.run(`ls ${dir}`)
    eq(r.stdout, 'sub\n', `ls ${dir}`)
    return { entries: entries.map((e) => ({ name: e.name, type: e.type, size: e.size })) }
  })

  await step('watch_dir', async () => {
    const events = []
    const handle = await sbx.files.watchDir(dir, (ev) => { events.push(ev) })
    try {
      await sbx.files.write(`${dir}/watched.txt`, 'seen\n')
      await until('an event for watched.txt', 10_000, () => events.some((ev) => ev.name === 'watched.txt'))
    } finally {
      await handle.stop()
    }
    return { events: events.map((ev) => ({ name: ev.name, type: ev.type })) }
  })

  await step('pause_then_connect', async () => {
    await sbx.files.write(`${dir}/kept.txt`, content)
    eq(await sbx.pause(), true, 'pause()')
    eq(await Sandbox.pause(id), false, 'pause() of a paused sandbox')
    const info = await Sandbox.getInfo(id)
    eq(info.state, 'paused', 'state after pause()')
    const paused = await listIds({ metadata: { suite: run }, state: ['paused'] })
    eq(paused, [id], 'list(state=paused)')
    sbx = await Sandbox.connect(id, { timeoutMs: 300_000 })
    eq((await Sandbox.getInfo(id)).state, 'running', 'state after connect()')
    eq(await sbx.files.read(`${dir}/kept.txt`), content, 'kept.txt after connect()')
    const r = await sbx.commands.run('echo back')
    eq(r.stdout, 'back\n', 'echo after connect()')
    return { state: 'running' }
  })

  await step('set_timeout', async () => {
    const before = await Sandbox.getInfo(id)
    await sbx.setTimeout(900_000)
    const after = await Sandbox.getInfo(id)
    const left = (after.endAt.getTime() - Date.now()) / 1000
    check(left > 840 && left <= 905, `endAt ${after.endAt.toISOString()} is ${left}s away; want about 900s`)
    return { endAtBefore: before.endAt.toISOString(), endAtAfter: after.endAt.toISOString() }
  })

  await step('list_metadata_filter', async () => {
    const mine = await listIds({ metadata: { suite: run } })
    eq(mine, [id], `list(metadata suite=${run})`)
    const none = await listIds({ metadata: { suite: `${run}-other` } })
    eq(none, [], 'list(metadata of nobody)')
    const info = await Sandbox.getInfo(id)
    eq(info.metadata?.suite, run, 'getInfo().metadata.suite')
    return { listed: mine }
  })

  await step('foreign_access_token_refused', async () => {
    // The sandbox's id without its envdAccessToken: the data plane refuses.
    const { envdVersion } = await Sandbox.getInfo(id)
    for (const token of ['not-the-token', undefined]) {
      const thief = new Sandbox({ sandboxId: id, envdVersion, envdAccessToken: token })
      const err = await rejects(thief.commands.run('echo stolen'), `run() with access token ${token}`)
      check(!(err instanceof CommandExitError), `run() with access token ${token} ran: ${describe(err)}`)
      const ferr = await rejects(thief.files.read(`${dir}/kept.txt`), `files.read() with access token ${token}`)
      check(!(ferr instanceof NotFoundError), `files.read() with access token ${token}: ${describe(ferr)}; want a refusal`)
    }
    return { envdVersion }
  })

  await step('kill', async () => {
    eq(await sbx.kill(), true, 'kill()')
    const err = await rejects(Sandbox.getInfo(id), 'getInfo() after kill()')
    check(err instanceof NotFoundError, `getInfo() after kill(): ${describe(err)}; want NotFoundError`)
    eq(await Sandbox.kill(id), false, 'Sandbox.kill() of the killed id')
    sbx = undefined
    return { killed: id }
  })

  await step('kill_unknown_id', async () => {
    eq(await Sandbox.kill(`no-such-sandbox-${run}`), false, 'Sandbox.kill(unknown id)')
    return { killed: false }
  })
} catch (err) {
  report({ step: 'abort', ok: false, ms: 0, error: describe(err) })
} finally {
  if (sbx) {
    try {
      await sbx.kill()
    } catch (err) {
      console.error(`sdk.mjs: cleaning up ${sbx.sandboxId}: ${describe(err)}`)
    }
  }
}

const failed = results.filter((r) => !r.ok).map((r) => r.step)
console.log(JSON.stringify({ summary: { steps: results.length, passed: results.length - failed.length, failed } }))
process.exit(failed.length ? 1 : 0)
