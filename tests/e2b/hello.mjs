import { Sandbox } from 'e2b'
const sbx = await Sandbox.create('python-pool')        // a claim on make run's sample pool
const { stdout } = await sbx.commands.run('echo hi')   // through the router to the sandbox
console.log(stdout.trim())                              // hi
await sbx.kill()                                        // deletes the claim
