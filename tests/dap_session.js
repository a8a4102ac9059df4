// An editor's session with ljgdb's DAP server, through VS Code's own test
// client (@vscode/debugadapter-testsupport, installed by
// testprogs/install-deps.sh in the cache's npm folder: run with NODE_PATH
// set to its node_modules).  Connects to the server on 127.0.0.1:PORT,
// launches CORE (or, with `attach`, attaches to process PID), takes the
// stopped thread's frames, the scopes and variables of its innermost Lua
// frame, expands the variables named by PATH (names separated by '/', one
// level each; none when empty), asks for the source of the first frame
// that has a sourceReference, evaluates EXPR in the debug console, prints
// what it got as one JSON line, disconnects and prints `disconnected`.
// Usage: node dap_session.js PORT launch CORE PROGRAM PATH EXPR
//        node dap_session.js PORT attach PID - PATH EXPR
const { DebugClient } = require('@vscode/debugadapter-testsupport');
const [port, how, target, program, path, expr] = process.argv.slice(2);

(async () => {
  const dc = new DebugClient('', '', 'ljgdb');
  await dc.start(Number(port));
  const start = dc.initializeRequest().then(() => how === 'attach'
    ? dc.attachRequest({ pid: Number(target) }) : dc.launchRequest({ core: target, program }));
  const [, , stopped] = await Promise.all([
    dc.waitForEvent('initialized').then(() => dc.configurationDoneRequest()), start,
    dc.waitForEvent('stopped')]);
  const threads = (await dc.threadsRequest()).body.threads;
  const frames = (await dc.stackTraceRequest({ threadId: stopped.body.threadId })).body.stackFrames;
  const lua = frames.find(f => f.source);
  const scopes = (await dc.scopesRequest({ frameId: lua.id })).body.scopes;
  let vars = (await dc.variablesRequest({ variablesReference: scopes[0].variablesReference })).body.variables;
  const levels = [vars];
  for (const name of path ? path.split('/') : []) {
    const v = vars.find(x => x.name === name);
    vars = (await dc.variablesRequest({ variablesReference: v.variablesReference })).body.variables;
    levels.push(vars);
  }
  const ref = frames.find(f => f.source && f.source.sourceReference);
  const source = ref ? (await dc.sourceRequest({ source: ref.source,
    sourceReference: ref.source.sourceReference })).body.content : null;
  const repl = (await dc.evaluateRequest({ expression: expr, context: 'repl' })).body.result;
  console.log(JSON.stringify({ stopped: stopped.body, threads, frames, scopes, levels, source, repl }));
  await dc.disconnectRequest({});
  console.log('disconnected');
  dc.stop();
})().catch(e => { console.error(String(e)); process.exit(1); });
