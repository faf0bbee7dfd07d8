// Cove's JavaScript and TypeScript kernel for the code interpreter. It reads
// Jupyter requests as JSON lines on descriptor 3 and writes Jupyter messages
// as JSON lines on descriptor 4. Code runs in one REPL context, so its
// state is kept between executions; top-level await works, static imports
// are turned into dynamic ones, and the last expression's value is the
// result. TypeScript is compiled with Debian's typescript package first.
'use strict'

const fs = require('fs')
const repl = require('repl')
const util = require('util')
const readline = require('readline')
const { PassThrough } = require('stream')
const { randomUUID } = require('crypto')
const { createRequire } = require('module')
const path = require('path')

const REQUESTS = 3
const MESSAGES = 4

function send(msgType, parent, content) {
  const line = JSON.stringify({
    header: { msg_id: randomUUID(), msg_type: msgType, version: '5.3', date: new Date().toISOString() },
    parent_header: { msg_id: parent },
    metadata: {},
    content,
  })
  fs.writeSync(MESSAGES, line + '\n')
}

// The running execution's id: what console.log and process.stdout.write
// print while it runs is its output.
let current = null
for (const [name, stream] of [['stdout', process.stdout], ['stderr', process.stderr]]) {
  const write = stream.write.bind(stream)
  stream.write = (chunk, encoding, cb) => {
    if (current === null) return write(chunk, encoding, cb)
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString(typeof encoding === 'string' ? encoding : 'utf8')
    send('stream', current, { name, text })
    const done = typeof encoding === 'function' ? encoding : cb
    if (done) process.nextTick(done)
    return true
  }
}

const server = repl.start({
  input: new PassThrough(),
  output: new PassThrough(),
  terminal: false,
  prompt: '',
  useGlobal: false,
  breakEvalOnSigint: true,
})

// Modules resolve from the context's directory, then from Node's global
// paths (Debian's /usr/share/nodejs among them).
// The REPL's own console writes to its (unread) output stream.
server.context.console = console

const requireHere = createRequire(path.join(process.cwd(), '__cove_kernel__.js'))
server.context.require = requireHere
server.context.__cove_import = async (specifier) => {
  try {
    return await import(specifier.startsWith('.') ? path.resolve(process.cwd(), specifier) : specifier)
  } catch (err) {
    if (err && (err.code === 'ERR_MODULE_NOT_FOUND' || err.code === 'ERR_UNSUPPORTED_DIR_IMPORT')) {
      const mod = requireHere(specifier)
      return Object.assign({ default: mod }, mod)
    }
    throw err
  }
}
// display(bundle) shows a MIME bundle ({"text/html": ...}) or a value.
server.context.display = (value) => {
  if (current === null) return
  const data = value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).some((k) => k.includes('/'))
    ? value
    : { 'text/plain': util.inspect(value) }
  send('display_data', current, { data, metadata: {} })
}

// Static imports become dynamic ones (the REPL takes no static import).
const IMPORT = /^([ \t]*)import\s+(?:(type\s+)?([\w$]+\s*,?\s*)?(\*\s*as\s+[\w$]+|\{[^}]*\})?\s*from\s*)?(['"])([^'"]+)\5\s*;?/gm
function rewriteImports(code) {
  return code.replace(IMPORT, (all, indent, typeOnly, def, rest, _q, spec) => {
    if (typeOnly) return indent
    const mod = `(await __cove_import(${JSON.stringify(spec)}))`
    def = def ? def.replace(/[\s,]/g, '') : ''
    if (!def && !rest) return `${indent}await __cove_import(${JSON.stringify(spec)});`
    const parts = []
    const tmp = `__cove_m${Math.random().toString(36).slice(2, 8)}`
    parts.push(`var ${tmp} = ${mod};`)
    if (def) parts.push(`var ${def} = ${tmp}.default;`)
    if (rest && rest.startsWith('*')) parts.push(`var ${rest.replace(/^\*\s*as\s+/, '')} = ${tmp};`)
    else if (rest) parts.push(`var ${rest.replace(/\s+as\s+/g, ': ')} = ${tmp};`)
    return indent + parts.join(' ')
  })
}

let ts = null
function transpile(code) {
  if (ts === null) ts = requireHere('typescript')
  return ts.transpileModule(code, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, isolatedModules: true },
    reportDiagnostics: false,
  }).outputText.replace(/^export \{\};\s*$/m, '')
}

// The REPL's eval runs in its domain: an exception thrown by the code goes
// to the domain's error handlers, not to the callback.
let settle = null
server._domain.on('error', (err) => {
  if (settle) settle({ err })
})

function evaluate(code) {
  return new Promise((resolve) => {
    settle = resolve
    server.eval(code, server.context, 'cell', (err, value) => resolve({ err, value }))
  }).finally(() => {
    settle = null
  })
}

let count = 0
// interrupted ends an awaited execution on SIGINT (synchronous code is
// broken off by the REPL itself).
let interrupt = null
process.on('SIGINT', () => {
  if (interrupt) interrupt()
})

function errorContent(err) {
  if (err instanceof repl.Recoverable) err = new SyntaxError('Unexpected end of input')
  if (!(err instanceof Error) && !(err && err.stack)) {
    return { ename: 'Error', evalue: util.inspect(err), traceback: [util.inspect(err)] }
  }
  return { ename: err.name || 'Error', evalue: err.message || '', traceback: [String(err.stack || err)] }
}

async function execute(msg) {
  const id = msg.header.msg_id
  const { code, silent, typescript } = msg.content
  send('status', id, { execution_state: 'busy' })
  if (!silent) count++
  current = silent ? null : id
  let reply
  try {
    let src = typescript ? transpile(code) : code
    src = rewriteImports(src)
    const stopped = new Promise((resolve) => {
      interrupt = () => resolve({ err: Object.assign(new Error('Execution interrupted'), { name: 'KeyboardInterrupt' }) })
    })
    let { err, value } = await Promise.race([evaluate(src), stopped])
    if (!err && value && typeof value.then === 'function') {
      ;({ err, value } = await Promise.race([value.then((v) => ({ value: v }), (e) => ({ err: e })), stopped]))
    }
    if (err) {
      const content = errorContent(err)
      if (!silent) send('error', id, content)
      reply = { status: 'error', execution_count: count, ...content }
    } else {
      if (!silent && value !== undefined) {
        send('execute_result', id, { execution_count: count, data: { 'text/plain': util.inspect(value) }, metadata: {} })
      }
      reply = { status: 'ok', execution_count: count }
    }
  } catch (err) {
    const content = errorContent(err)
    if (!silent) send('error', id, content)
    reply = { status: 'error', execution_count: count, ...content }
  } finally {
    interrupt = null
  }
  // Let output written in this tick reach the execution first.
  await new Promise((resolve) => setImmediate(resolve))
  current = null
  send('execute_reply', id, reply)
  send('status', id, { execution_state: 'idle' })
}

function reply(msg, type, content) {
  const id = msg.header.msg_id
  send('status', id, { execution_state: 'busy' })
  send(type, id, content)
  send('status', id, { execution_state: 'idle' })
}

const queue = []
let busy = false
async function next() {
  if (busy) return
  busy = true
  while (queue.length > 0) {
    const msg = queue.shift()
    switch (msg.header.msg_type) {
      case 'execute_request':
        await execute(msg)
        break
      case 'kernel_info_request':
        reply(msg, 'kernel_info_reply', {
          status: 'ok', protocol_version: '5.3', implementation: 'cove-node', implementation_version: '1',
          language_info: { name: 'javascript', version: process.versions.node, file_extension: '.js' },
        })
        break
      case 'cove_env_request':
        for (const [k, v] of Object.entries(msg.content.set || {})) process.env[k] = v
        for (const k of msg.content.unset || []) delete process.env[k]
        reply(msg, 'cove_env_reply', { status: 'ok' })
        break
    }
  }
  busy = false
}

readline.createInterface({ input: fs.createReadStream(null, { fd: REQUESTS }) }).on('line', (line) => {
  queue.push(JSON.parse(line))
  next()
}).on('close', () => process.exit(0))
