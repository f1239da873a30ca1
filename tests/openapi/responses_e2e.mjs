// openapi.responses_match_document: drives a real greenshard-controller
// through every route and every error class, and validates EVERY response
// against the OpenAPI document that server itself serves
// (GET /v1/openapi.json): the status must be documented for the operation,
// the media type must be one the document names for it, the headers it
// marks required must be there, and the body must match the status's schema
// (openapi-response-validator). Any response that does not validate fails
// the test, printed with its route, status, body and the validator's errors.
// A call whose status is not the one the scenario is about fails it too (the
// error class was not exercised).
//
//   node responses_e2e.mjs <greenshard-controller> <repo>
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { startController, tokens, toolsDir } from './controller.mjs';

const [binary, repo] = process.argv.slice(2);
if (!binary || !repo) {
  console.error('usage: responses_e2e.mjs <greenshard-controller> <repo>');
  process.exit(2);
}
const require = createRequire(path.join(toolsDir(repo), 'package.json'));
let OpenAPIResponseValidator;
try {
  OpenAPIResponseValidator = require('openapi-response-validator').default;
} catch (e) {
  console.error(`openapi-response-validator is missing (run scripts/install_openapi_tools.sh): ${e.message}`);
  process.exit(1);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rfc3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
const customFormats = { 'date-time': (s) => rfc3339.test(s) && !Number.isNaN(Date.parse(s)) };

// OpenAPI 3.0's boolean exclusiveMinimum/exclusiveMaximum are numbers in the
// JSON Schema the validator's Ajv speaks: convert (a copy).
function toJsonSchema(node) {
  if (Array.isArray(node)) return node.map(toJsonSchema);
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) out[k] = toJsonSchema(v);
  for (const [flag, bound] of [['exclusiveMinimum', 'minimum'], ['exclusiveMaximum', 'maximum']]) {
    if (typeof out[flag] === 'boolean') {
      if (out[flag] && bound in out) out[flag] = out[bound], delete out[bound];
      else delete out[flag];
    }
  }
  return out;
}

const spec = (name, extra = {}) => ({
  name, worker: { data: { train: 't.bin' }, schedule: { steps: 5 } }, regions: ['DE', 'FR'], home_region: 'DE', ...extra,
});

const ctl = await startController(binary, { maxLivePerTenant: 3 });
const failures = [];
let validated = 0;
const seen = new Set();  // "METHOD template status"

try {
  const served = await fetch(`${ctl.base}/v1/openapi.json`, { signal: AbortSignal.timeout(30000) });
  if (served.status !== 200) throw new Error(`GET /v1/openapi.json: ${served.status}`);
  const doc = await served.json();
  const components = toJsonSchema(doc.components);
  const validators = new Map();
  const validatorFor = (key, responses) => {
    if (!validators.has(key))
      validators.set(key, new OpenAPIResponseValidator({ responses: toJsonSchema(responses), components, customFormats }));
    return validators.get(key);
  };

  // The documented responses for a request: its operation's; a method the
  // path does not have: the statuses every operation of the path documents
  // (405 is the path's); no such path: 404 with the Error schema.
  function documented(method, template) {
    if (template === null)
      return { key: 'no route', responses: { 404: { description: 'no route', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } } };
    const item = doc.paths[template];
    if (!item) throw new Error(`the document has no path ${template}`);
    const op = item[method.toLowerCase()];
    if (op) return { key: `${method} ${template}`, responses: op.responses };
    const ops = Object.values(item);
    const responses = {};
    for (const [status, r] of Object.entries(ops[0].responses))
      if (ops.every((o) => status in o.responses)) responses[status] = r;
    return { key: `${method} ${template} (no such operation)`, responses };
  }

  function check(route, method, template, res, expect) {
    const { key, responses } = documented(method, template);
    const problems = [];
    const status = String(res.status);
    seen.add(`${method} ${template ?? '(no route)'} ${status}`);
    if (expect && !expect.includes(res.status)) problems.push(`expected status ${expect.join(' or ')}`);
    const doc_r = responses[status];
    let body = res.text;
    if (!doc_r) {
      problems.push(`status ${status} is not documented for ${key} (documented: ${Object.keys(responses).join(', ')})`);
    } else {
      const media = (res.headers['content-type'] || '').split(';')[0].trim();
      const types = Object.keys(doc_r.content || {});
      if (types.length && !types.includes(media)) problems.push(`media type '${media}' is not documented (${types.join(', ')})`);
      if (!types.length && res.text !== '') problems.push('a body where the document gives none');
      for (const [h, def] of Object.entries(doc_r.headers || {}))
        if (def.required && !(h.toLowerCase() in res.headers)) problems.push(`required header ${h} is missing`);
      if (media === 'application/json') {
        try { body = JSON.parse(res.text); } catch (e) { problems.push(`the body is not JSON: ${e.message}`); body = undefined; }
      }
      if (body !== undefined) {
        const err = validatorFor(key, responses).validateResponse(status, body);
        if (err) problems.push(`${err.message} ${JSON.stringify(err.errors)}`);
      }
    }
    validated++;
    if (problems.length) {
      failures.push(route);
      console.log(`FAIL ${route}\n  ${method} ${res.target} -> ${status}\n  body: ${res.text.slice(0, 2000)}\n  ` +
                  problems.join('\n  '));
    } else {
      console.log(`ok   ${route}: ${method} ${res.target} -> ${status}`);
    }
    return body;
  }

  // One request with fetch; returns the parsed body (or text) after checking it.
  async function call(route, method, target, template, { token, body, contentType, headers = {}, expect } = {}) {
    const h = { ...headers };
    if (token) h.Authorization = `Bearer ${token}`;
    let payload;
    if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      h['Content-Type'] = contentType ?? 'application/json';
    }
    let r, text;
    try {
      r = await fetch(ctl.base + target, { method, headers: h, body: payload, signal: AbortSignal.timeout(30000) });
      text = await r.text();
    } catch (e) {
      // A response cut short (or none) is a failure of this call.
      failures.push(route);
      console.log(`FAIL ${route}\n  ${method} ${target} -> ${r ? r.status : 'no response'}, then: ` +
                  `${e.message}${e.cause ? ` (${e.cause.message ?? e.cause})` : ''}`);
      return { status: r ? r.status : 0, body: undefined };
    }
    const res = { status: r.status, headers: Object.fromEntries(r.headers), text, target };
    return { status: r.status, body: check(route, method, template, res, expect) };
  }

  // One request written by hand on a socket (what fetch will not send: a
  // declared body over the limit, sent head first): reads the answer to EOF.
  function raw(route, method, target, template, head, expect) {
    return new Promise((resolve, reject) => {
      const s = net.connect(ctl.port, '127.0.0.1');
      const chunks = [];
      s.setTimeout(30000, () => s.destroy(new Error('timeout')));
      s.on('connect', () => s.write(`${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${head}\r\n`));
      s.on('data', (d) => chunks.push(d));
      s.on('error', reject);
      s.on('end', () => {
        s.destroy();
        const all = Buffer.concat(chunks).toString('latin1');
        const i = all.indexOf('\r\n\r\n');
        const lines = all.slice(0, i).split('\r\n');
        const status = Number(lines[0].split(' ')[1]);
        const headers = {};
        for (const l of lines.slice(1)) {
          const c = l.indexOf(':');
          headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
        }
        const res = { status, headers, text: Buffer.from(all.slice(i + 4), 'latin1').toString('utf8'), target };
        resolve({ status, body: check(route, method, template, res, expect) });
      });
    });
  }

  const U = tokens.user, B = tokens.userB, A = tokens.admin, W = tokens.worker;
  const job = '/v1/jobs/{id}';

  // --- no token: health, readiness (until the first cycle), the document, metrics, the page
  for (let i = 0; ; ++i) {
    const r = await call('readyz', 'GET', '/readyz', '/readyz', { expect: [200, 503] });
    if (r.status === 200) break;
    if (i > 300) throw new Error('never ready');
    await sleep(100);
  }
  await call('healthz', 'GET', '/healthz', '/healthz', { expect: [200] });
  // No route serves ranges: the edge drops Range, so the document stays whole.
  await call('healthz, a malformed Range: ignored', 'GET', '/healthz', '/healthz', { headers: { Range: 'bytes=abc' }, expect: [200] });
  await call('openapi.json, a satisfiable Range: the whole document', 'GET', '/v1/openapi.json', '/v1/openapi.json', { headers: { Range: 'bytes=0-3' }, expect: [200] });
  await call('openapi.json', 'GET', '/v1/openapi.json', '/v1/openapi.json', { expect: [200] });
  await call('metrics', 'GET', '/metrics', '/metrics', { expect: [200] });
  await call('status page', 'GET', '/', '/', { expect: [200] });

  // --- regions
  await call('regions', 'GET', '/v1/regions', '/v1/regions', { token: U, expect: [200] });
  await call('regions, admin', 'GET', '/v1/regions', '/v1/regions', { token: A, expect: [200] });
  await call('regions, worker token: 403', 'GET', '/v1/regions', '/v1/regions', { token: W, expect: [403] });
  await call('regions, no token: 401', 'GET', '/v1/regions', '/v1/regions', { expect: [401] });
  await call('regions, unknown token: 401', 'GET', '/v1/regions', '/v1/regions', { token: 'nope-nope-nope', expect: [401] });
  await call('regions, unknown parameter: 400', 'GET', '/v1/regions?x=1', '/v1/regions', { token: U, expect: [400] });
  await call('regions, wrong method', 'DELETE', '/v1/regions', '/v1/regions', { token: U, expect: [405, 404] });
  const intensity = '/v1/regions/{name}/intensity';
  await call('intensity', 'GET', '/v1/regions/DE/intensity', intensity, { token: U, expect: [200] });
  await call('intensity, worker token', 'GET', '/v1/regions/FR/intensity', intensity, { token: W, expect: [200] });
  await call('intensity, no region: 404', 'GET', '/v1/regions/XX/intensity', intensity, { token: U, expect: [404] });
  await call('intensity, no token: 401', 'GET', '/v1/regions/DE/intensity', intensity, { expect: [401] });
  await call('intensity, unknown parameter: 400', 'GET', '/v1/regions/DE/intensity?at=now', intensity, { token: U, expect: [400] });

  // --- submit: dry runs, then three jobs that run until released (the quota is 3 live jobs)
  await call('submit dryRun', 'POST', '/v1/jobs?dryRun=true', '/v1/jobs', { token: U, body: spec('dry'), expect: [200] });
  await call('submit dryRun, YAML body', 'POST', '/v1/jobs?dryRun=true', '/v1/jobs',
    { token: U, contentType: 'application/yaml', expect: [200],
      body: 'name: dry-yaml\nworker: {data: {train: t.bin}, schedule: {steps: 5}}\nregions: [DE]\n' });
  await call('submit dryRun=maybe: 400', 'POST', '/v1/jobs?dryRun=maybe', '/v1/jobs', { token: U, body: spec('dry'), expect: [400] });
  await call('submit, unknown parameter: 400', 'POST', '/v1/jobs?bogus=1', '/v1/jobs', { token: U, body: spec('x'), expect: [400] });
  const key = { 'Idempotency-Key': 'openapi-e2e-key-1' };
  const a = (await call('submit', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('run-a'), headers: key, expect: [201] })).body;
  await call('submit, idempotent replay', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('run-a'), headers: key, expect: [200] });
  await call('submit, idempotency conflict: 409', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('run-z'), headers: key, expect: [409] });
  const b = (await call('submit b', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('run-b'), expect: [201] })).body;
  const c = (await call('submit c', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('run-c'), expect: [201] })).body;
  await call('submit over the quota: 429', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('run-d'), expect: [429] });
  await call('submit, bad JSON: 400', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: '{"name": ', expect: [400] });
  await call('submit, unknown field: 400', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('x', { gpus: 1 }), expect: [400] });
  await call('submit, invalid field: 400', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('x', { nodes: 'two' }), expect: [400] });
  await call('submit, missing field: 400', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: { name: 'x', regions: ['DE'] }, expect: [400] });
  await call('submit, bad Idempotency-Key: 400', 'POST', '/v1/jobs', '/v1/jobs',
    { token: U, body: spec('x'), headers: { 'Idempotency-Key': 'k'.repeat(129) }, expect: [400] });
  await call('submit, no token: 401', 'POST', '/v1/jobs', '/v1/jobs', { body: spec('x'), expect: [401] });
  await call('submit, worker token: 403', 'POST', '/v1/jobs', '/v1/jobs', { token: W, body: spec('x'), expect: [403] });
  await call('submit, text/plain: 415', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: JSON.stringify(spec('x')), contentType: 'text/plain', expect: [415] });
  await call('submit, big worker object: 413', 'POST', '/v1/jobs', '/v1/jobs',
    { token: U, body: spec('x', { worker: { data: { train: 't.bin' }, pad: 'x'.repeat(200 * 1024) } }), expect: [413] });
  await raw('submit, body over the limit: 413', 'POST', '/v1/jobs', '/v1/jobs',
    `Authorization: Bearer ${U}\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n`, [413]);
  await call('submit, unknown region: 422', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('x', { regions: ['DE', 'XX'] }), expect: [422] });
  await call('submit, more nodes than any region: 422', 'POST', '/v1/jobs', '/v1/jobs', { token: U, body: spec('x', { nodes: 64 }), expect: [422] });
  await call('submit, wrong method', 'PUT', '/v1/jobs', '/v1/jobs', { token: U, body: spec('x'), expect: [405, 404] });

  // --- list, with pagination
  await call('list', 'GET', '/v1/jobs', '/v1/jobs', { token: U, expect: [200] });
  const page1 = (await call('list, page 1', 'GET', '/v1/jobs?limit=1', '/v1/jobs', { token: U, expect: [200] })).body;
  if (!page1?.continue) failures.push('list: limit=1 of 3 jobs gave no continue token');
  else await call('list, page 2 (continue)', 'GET', `/v1/jobs?limit=1&continue=${encodeURIComponent(page1.continue)}`, '/v1/jobs', { token: U, expect: [200] });
  await call('list, foreign continue: 400', 'GET', '/v1/jobs?continue=bm9wZQ', '/v1/jobs', { token: U, expect: [400] });
  await call('list, limit=0: 400', 'GET', '/v1/jobs?limit=0', '/v1/jobs', { token: U, expect: [400] });
  await call('list, state', 'GET', '/v1/jobs?state=PENDING', '/v1/jobs', { token: U, expect: [200] });
  await call('list, unknown state: 400', 'GET', '/v1/jobs?state=BOGUS', '/v1/jobs', { token: U, expect: [400] });
  await call('list, unknown parameter: 400', 'GET', '/v1/jobs?sort=name', '/v1/jobs', { token: U, expect: [400] });
  await call('list, another tenant as a user: 403', 'GET', '/v1/jobs?tenant=team-b', '/v1/jobs', { token: U, expect: [403] });
  await call('list, another tenant as admin', 'GET', '/v1/jobs?tenant=team-a', '/v1/jobs', { token: A, expect: [200] });
  await call('list, worker token: 403', 'GET', '/v1/jobs', '/v1/jobs', { token: W, expect: [403] });
  await call('list, no token: 401', 'GET', '/v1/jobs', '/v1/jobs', { expect: [401] });

  // --- one job: wait until a runs (every poll is checked too)
  const waitState = async (id, states) => {
    for (let i = 0; i < 600; ++i) {
      const r = await call(`get ${id} (waiting for ${states.join('|')})`, 'GET', `/v1/jobs/${id}`, job, { token: U, expect: [200] });
      if (states.includes(r.body?.state)) return r.body;
      await sleep(100);
    }
    failures.push(`job ${id} never reached ${states.join('|')}`);
    return null;
  };
  await waitState(a.id, ['RUNNING']);
  await waitState(b.id, ['RUNNING']);
  await call('get, admin', 'GET', `/v1/jobs/${a.id}`, job, { token: A, expect: [200] });
  await call('get, no such job: 404', 'GET', '/v1/jobs/nosuchjob', job, { token: U, expect: [404] });
  await call("get, another tenant's job: 404", 'GET', `/v1/jobs/${a.id}`, job, { token: B, expect: [404] });
  await call('get, unknown parameter: 400', 'GET', `/v1/jobs/${a.id}?verbose=1`, job, { token: U, expect: [400] });
  await call('get, worker token: 403', 'GET', `/v1/jobs/${a.id}`, job, { token: W, expect: [403] });
  await call('get, no token: 401', 'GET', `/v1/jobs/${a.id}`, job, { expect: [401] });
  await call('job, wrong method', 'PUT', `/v1/jobs/${a.id}`, job, { token: U, body: spec('x'), expect: [405, 404] });

  // --- status push, with the job's own worker token (GREENSHARD_STATUS_TOKEN, as its rank saw it)
  const st = '/v1/jobs/{id}/status';
  const push = { state: 'running', step: 1, total_steps: 5, tokens: 100, loss: 2.5, val_loss: null, tokens_per_s: 10, eta_s: 4 };
  const tokA = await ctl.jobToken(a.id);
  if (!tokA) failures.push(`job ${a.id}: its rank never wrote its status token`);
  else {
    await call("status push, the job's token", 'POST', `/v1/jobs/${a.id}/status`, st, { token: tokA, body: push, expect: [200] });
    await call("status push, another job's token: 401", 'POST', `/v1/jobs/${b.id}/status`, st, { token: tokA, body: push, expect: [401] });
    await call('status push, bad JSON: 400', 'POST', `/v1/jobs/${a.id}/status`, st, { token: tokA, body: '{', expect: [400] });
    await call('status push, unknown field: 400', 'POST', `/v1/jobs/${a.id}/status`, st, { token: tokA, body: { ...push, lost: 1 }, expect: [400] });
    await call('status push, invalid state: 400', 'POST', `/v1/jobs/${a.id}/status`, st, { token: tokA, body: { state: 'ok' }, expect: [400] });
    await call('status push, unknown parameter: 400', 'POST', `/v1/jobs/${a.id}/status?x=1`, st, { token: tokA, body: push, expect: [400] });
    await call('status push, text/plain: 415', 'POST', `/v1/jobs/${a.id}/status`, st, { token: tokA, body: JSON.stringify(push), contentType: 'text/plain', expect: [415] });
  }
  await call('status push, user token: 403', 'POST', `/v1/jobs/${a.id}/status`, st, { token: U, body: push, expect: [403] });
  await call('status push, no token: 401', 'POST', `/v1/jobs/${a.id}/status`, st, { body: push, expect: [401] });
  await call('status push, unknown token: 401', 'POST', `/v1/jobs/${a.id}/status`, st, { token: 'not-a-token-at-all', body: push, expect: [401] });
  await call('status push, a tokens-file worker token: 403', 'POST', `/v1/jobs/${a.id}/status`, st, { token: W, body: push, expect: [403] });
  await call('status push, no such job: 401', 'POST', '/v1/jobs/nosuchjob/status', st, { token: tokA ?? 'x', body: push, expect: [401] });
  await call('get, after the push', 'GET', `/v1/jobs/${a.id}`, job, { token: U, expect: [200] });

  // --- cancel a running job; finish c, then the errors of a finished job
  const cancel = '/v1/jobs/{id}/cancel';
  await call('cancel', 'POST', `/v1/jobs/${b.id}/cancel`, cancel, { token: U, expect: [200] });
  await call('cancel, no such job: 404', 'POST', '/v1/jobs/nosuchjob/cancel', cancel, { token: U, expect: [404] });
  await call('cancel, unknown parameter: 400', 'POST', `/v1/jobs/${a.id}/cancel?now=1`, cancel, { token: U, expect: [400] });
  await call('cancel, worker token: 403', 'POST', `/v1/jobs/${a.id}/cancel`, cancel, { token: W, expect: [403] });
  await call('cancel, no token: 401', 'POST', `/v1/jobs/${a.id}/cancel`, cancel, { expect: [401] });
  ctl.release(c.id);
  await waitState(c.id, ['SUCCEEDED']);
  await call('cancel a finished job: 409', 'POST', `/v1/jobs/${c.id}/cancel`, cancel, { token: U, expect: [409] });
  // With its own token (409; 401 if the server forgets a finished job's token).
  const tokC = await ctl.jobToken(c.id, 0);
  if (tokC)
    await call('status push to a finished job: 409', 'POST', `/v1/jobs/${c.id}/status`, st,
      { token: tokC, body: push, expect: [409, 401] });

  // --- logs
  const logs = '/v1/jobs/{id}/logs';
  await call('logs', 'GET', `/v1/jobs/${c.id}/logs`, logs, { token: U, expect: [200] });
  await call('logs, follow (the job ended)', 'GET', `/v1/jobs/${c.id}/logs?follow=true`, logs, { token: U, expect: [200] });
  await call('logs, rank out of range: 400', 'GET', `/v1/jobs/${c.id}/logs?rank=7`, logs, { token: U, expect: [400] });
  await call('logs, unknown parameter: 400', 'GET', `/v1/jobs/${c.id}/logs?tail=1`, logs, { token: U, expect: [400] });
  await call('logs, no such job: 404', 'GET', '/v1/jobs/nosuchjob/logs', logs, { token: U, expect: [404] });
  await call('logs, worker token: 403', 'GET', `/v1/jobs/${c.id}/logs`, logs, { token: W, expect: [403] });
  await call('logs, no token: 401', 'GET', `/v1/jobs/${c.id}/logs`, logs, { expect: [401] });

  // --- delete
  await call('delete a running job: 409', 'DELETE', `/v1/jobs/${a.id}`, job, { token: U, expect: [409] });
  await call('delete, unknown parameter: 400', 'DELETE', `/v1/jobs/${c.id}?force=1`, job, { token: U, expect: [400] });
  await call('delete, worker token: 403', 'DELETE', `/v1/jobs/${c.id}`, job, { token: W, expect: [403] });
  await call('delete, no token: 401', 'DELETE', `/v1/jobs/${c.id}`, job, { expect: [401] });
  await call('delete', 'DELETE', `/v1/jobs/${c.id}`, job, { token: U, expect: [200] });
  await call('delete again: 404', 'DELETE', `/v1/jobs/${c.id}`, job, { token: U, expect: [404] });

  // --- no such route
  await call('no route: 404', 'GET', '/v1/nothing', null, { token: U, expect: [404] });
  await call('no route, bad id: 404', 'GET', '/v1/jobs/NOT_AN_ID', null, { token: U, expect: [404] });

  // Every decision outcome the server showed is in the document (the
  // document's enum is the type's; here, the server's values against it).
  const got = await call('get, decisions', 'GET', `/v1/jobs/${a.id}`, job, { token: U, expect: [200] });
  if (!Array.isArray(got.body?.decisions) || got.body.decisions.length === 0)
    failures.push(`job ${a.id}: no decisions shown`);
} catch (e) {
  failures.push(`the client stopped: ${e.stack || e}`);
  console.log(`FAIL the client stopped: ${e.stack || e}`);
} finally {
  await ctl.stop();
}
console.log(`\n${validated} responses validated against the served document; statuses seen:\n  ` +
            [...seen].sort().join('\n  '));
if (failures.length) {
  console.log(`\n${failures.length} failed:\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log('every response matches the document');
