// A real greenshard-controller for the OpenAPI tests: a temp data dir, a
// tokens file (user, admin and worker tokens), a regions file (local
// regions), a worker script, `--port 0 --port-file F`. stop() ends it (and
// every worker process it started, by the pids they wrote) and removes the
// temp dir; it also runs on exit and on SIGINT/SIGTERM, so that nothing is
// left running whatever happens.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const tokens = {
  user: 'oa-user-token-team-a-0001',
  userB: 'oa-user-token-team-b-0001',
  admin: 'oa-admin-token-ops-000001',
  worker: 'oa-worker-token-00000001',
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The tools installed by scripts/install_openapi_tools.sh.
export function toolsDir(repo) {
  return path.join(process.env.GREENSHARD_TOOLS_DIR || path.join(repo, '.tools'), 'openapi');
}

export async function startController(binary, { maxLivePerTenant = 100000 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gs-openapi-'));
  const file = (n) => path.join(dir, n);
  fs.writeFileSync(file('tokens.csv'),
    `${tokens.user},team-a,user\n${tokens.userB},team-b,user\n${tokens.admin},ops,admin\n` +
    `${tokens.worker},team-a,worker\n`);
  fs.writeFileSync(file('regions.yaml'),
    'regions:\n  - {name: DE, nodes: 16, intensity: 300, pue: 1.2}\n  - {name: FR, nodes: 4, intensity: 50}\n');
  fs.mkdirSync(file('ranks'));
  // Each rank records its pid and its job's status token, then waits (at
  // most 120 s) until the test releases its job (or every job) and exits 0.
  fs.writeFileSync(file('worker.sh'), `#!/bin/sh
r=${file('ranks')}/"$GREENSHARD_JOB_ID"
echo $$ > "$r.pid.$RANK"
echo "hello from rank $RANK of $WORLD_SIZE"
printf %s "$GREENSHARD_STATUS_TOKEN" > "$r.token.tmp" && mv "$r.token.tmp" "$r.token"
i=0
while [ $i -lt 1200 ] && [ ! -e ${file('release-all')} ] && [ ! -e "$r.release" ]; do sleep 0.1; i=$((i+1)); done
exit 0
`, { mode: 0o755 });
  const args = ['--host', '127.0.0.1', '--port', '0', '--port-file', file('port'), '--data-dir', file('data'),
    '--tokens', file('tokens.csv'), '--regions', file('regions.yaml'), '--worker', file('worker.sh'),
    '--cycle-ms', '100', '--policy', 'fifo', '--stop-grace-ms', '1000',
    '--max-live-per-tenant', String(maxLivePerTenant)];
  const child = spawn(binary, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  let exited = null;
  const exitPromise = new Promise((resolve) => child.on('exit', (code, sig) => { exited = { code, sig }; resolve(); }));

  let stopped = false;
  const killRanks = () => {
    // Only the worker processes this controller started (their own pids).
    let entries = [];
    try { entries = fs.readdirSync(file('ranks')); } catch { return; }
    for (const e of entries) {
      if (!e.includes('.pid.')) continue;
      const pid = Number(fs.readFileSync(path.join(file('ranks'), e), 'utf8').trim());
      if (pid > 1) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
  };
  const syncCleanup = () => {  // process 'exit': synchronous only
    if (stopped) return;
    stopped = true;
    if (exited === null) try { child.kill('SIGKILL'); } catch { /* gone */ }
    killRanks();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', syncCleanup);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'])
    process.on(sig, () => { syncCleanup(); process.exit(128 + os.constants.signals[sig]); });

  async function stop() {
    if (stopped) return;
    try { fs.writeFileSync(file('release-all'), ''); } catch { /* dir gone */ }
    if (exited === null) {
      child.kill('SIGTERM');
      await Promise.race([exitPromise, sleep(15000)]);
      if (exited === null) {
        console.error('controller: no exit 15 s after SIGTERM; SIGKILL');
        child.kill('SIGKILL');
        await exitPromise;
      }
    }
    // The ranks were released above; give them their poll, then make sure.
    await sleep(300);
    syncCleanup();
  }

  const deadline = Date.now() + 60000;
  while (!fs.existsSync(file('port'))) {
    if (exited !== null) { await stop(); throw new Error(`greenshard-controller exited at start: ${JSON.stringify(exited)}`); }
    if (Date.now() > deadline) { await stop(); throw new Error('greenshard-controller wrote no port file in 60 s'); }
    await sleep(50);
  }
  const port = Number(fs.readFileSync(file('port'), 'utf8').trim());
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    dir,
    stop,
    // The job's own worker token, as its rank 0 saw it (GREENSHARD_STATUS_TOKEN).
    async jobToken(id, timeoutMs = 30000) {
      const f = path.join(file('ranks'), `${id}.token`);
      const end = Date.now() + timeoutMs;
      while (!fs.existsSync(f)) {
        if (Date.now() > end) return null;
        await sleep(50);
      }
      return fs.readFileSync(f, 'utf8');
    },
    release(id) { fs.writeFileSync(path.join(file('ranks'), `${id}.release`), ''); },
  };
}
