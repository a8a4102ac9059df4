// An editor's session with ljgdb's DAP server, through VS Code's own test
// client (@vscode/debugadapter-testsupport, installed by
// testprogs/install-deps.sh in the cache's npm folder: run with NODE_PATH
// set to its node_modules).  Connects to the server on 127.0.0.1:PORT,
// launches CORE, takes the stopped thread's frames, the scopes and
// variables of its innermost Lua frame, expands the variables named by
// PATH (names separated by '/', one level each), evaluates EXPR in the
// debug console, prints what it got as one JSON line, disconnects and
// prints `disconnected`.
// Usage: node dap_session.js PORT CORE PROGRAM PATH EXPR
const { DebugClient } = require('@vscode/debugadapter-testsupport');
const [port, core, program, path, expr] = process.argv.slice(2);

(async () => {
  const dc = new DebugClient('', '', 'ljgdb');
  await dc.start(Number(port));
  const [, , stopped] = await Promise.all([
    dc.configurationSequence(), dc.launch({ core, program }), dc.waitForEvent('stopped')]);
  const threads = (await dc.threadsRequest()).body.threads;
  const frames = (await dc.stackTraceRequest({ threadId: stopped.body.threadId })).body.stackFrames;
  const lua = frames.find(f => f.source && f.source.path);
  const scopes = (await dc.scopesRequest({ frameId: lua.id })).body.scopes;
  let vars = (await dc.variablesRequest({ variablesReference: scopes[0].variablesReference })).body.variables;
  const levels = [vars];
  for (const name of path.split('/')) {
    const v = vars.find(x => x.name === name);
    vars = (await dc.variablesRequest({ variablesReference: v.variablesReference })).body.variables;
    levels.push(vars);
  }
  const repl = (await dc.evaluateRequest({ expression: expr, context: 'repl' })).body.result;
  console.log(JSON.stringify({ stopped: stopped.body, threads, frames, scopes, levels, repl }));
  await dc.disconnectRequest({});
  console.log('disconnected');
  dc.stop();
})().catch(e => { console.error(String(e)); process.exit(1); });
