// openapi.lint_served_document: `redocly lint` (tests/openapi/redocly.yaml,
// errors fail) on the document a real greenshard-controller serves at
// GET /v1/openapi.json.
//
//   node lint_served.mjs <greenshard-controller> <repo>
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startController, toolsDir } from './controller.mjs';

const [binary, repo] = process.argv.slice(2);
if (!binary || !repo) {
  console.error('usage: lint_served.mjs <greenshard-controller> <repo>');
  process.exit(2);
}
const redocly = path.join(toolsDir(repo), 'node_modules', '.bin', 'redocly');
if (!fs.existsSync(redocly)) {
  console.error(`${redocly} is missing: run scripts/install_openapi_tools.sh`);
  process.exit(1);
}
const here = path.dirname(fileURLToPath(import.meta.url));

const ctl = await startController(binary);
let rc = 1;
try {
  const res = await fetch(`${ctl.base}/v1/openapi.json`);
  if (res.status !== 200) throw new Error(`GET /v1/openapi.json: ${res.status}`);
  const doc = await res.json();
  const out = path.join(ctl.dir, 'openapi.json');
  fs.writeFileSync(out, JSON.stringify(doc, null, 2));
  const r = spawnSync(redocly, ['lint', '--config', path.join(here, 'redocly.yaml'), '--format', 'stylish', out],
    { encoding: 'utf8', env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } });
  process.stdout.write(r.stdout || '');
  process.stderr.write(r.stderr || '');
  rc = r.status === 0 ? 0 : 1;
  console.log(rc === 0 ? 'lint: the served document passes' : `lint: redocly exited ${r.status ?? r.signal}`);
} catch (e) {
  console.error(`lint: ${e.stack || e}`);
} finally {
  await ctl.stop();
}
process.exit(rc);
