// Starts a real S3 server (the npm package s3rver) for the S3 tests.
//
//   node s3rver_run.mjs --dir DIR [--port N] [--bucket NAME]... [--exit-on-stdin-eof]
//                       [--no-verify-sigv4]
//
// Listens on 127.0.0.1 (port 0: any free port), keeps its data in DIR,
// creates the buckets, prints "PORT <n>" on one stdout line once it accepts
// requests, and runs until killed (or until stdin closes, with
// --exit-on-stdin-eof: the test process that started it is gone).
//
// Modules come from <tools>/s3/node_modules (scripts/install_s3_tools.sh),
// <tools> being $GREENSHARD_TOOLS_DIR or <repo>/.tools; $GREENSHARD_S3_TOOLS
// names the s3 folder itself. (ESM imports ignore NODE_PATH, hence createRequire.)
//
// What this runner adds in front of s3rver 3.7.1:
//   * SigV4 verification. s3rver itself does NOT verify SigV4 signatures (it
//     only checks that the access key id is S3RVER; a wrong secret gets 200).
//     Unless --no-verify-sigv4, every request with an Authorization header is
//     re-signed here with the AWS SDK's own signer (@smithy/signature-v4, a
//     dependency of @aws-sdk/client-s3) from the secret S3RVER, the headers it
//     names as signed, the path and query exactly as sent, and the payload
//     hash from x-amz-content-sha256; a different signature gets 403
//     SignatureDoesNotMatch, as S3 answers. (The body is not hashed here: that
//     the x-amz-content-sha256 value matches the body is not checked.)
//   * Continuation tokens: s3rver makes them with a cipher OpenSSL 3 hides
//     (see the crypto shim below).
//   * Three multipart calls s3rver lacks, as S3 documents them:
//     AbortMultipartUpload (DELETE /bucket/key?uploadId=ID): 204, removing the
//     upload's parts; 404 NoSuchUpload for UploadPart, Complete or Abort
//     of an unknown UploadId (s3rver would make a stray part, or answer 500);
//     and ListMultipartUploads (GET /bucket?uploads[&prefix=P][&key-marker=K
//     &upload-id-marker=I][&max-uploads=N]; s3rver answers 501): the uploads
//     neither completed nor aborted, read from s3rver's own upload folders,
//     sorted by key, then initiation time (the mtime of the upload's key file).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

function toolsDir() {
  if (process.env.GREENSHARD_S3_TOOLS) return process.env.GREENSHARD_S3_TOOLS;
  const tools = process.env.GREENSHARD_TOOLS_DIR ||
    path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '.tools');
  return path.join(tools, 's3');
}

function usage(msg) {
  process.stderr.write(`s3rver_run: ${msg}\nusage: node s3rver_run.mjs --dir DIR [--port N] ` +
    '[--bucket NAME]... [--exit-on-stdin-eof] [--no-verify-sigv4]\n');
  process.exit(2);
}

const opts = { dir: undefined, port: 0, buckets: [], exitOnStdinEof: false, verifySigV4: true };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--dir') opts.dir = argv[++i];
  else if (a === '--port') opts.port = Number(argv[++i]);
  else if (a === '--bucket') opts.buckets.push(argv[++i]);
  else if (a === '--exit-on-stdin-eof') opts.exitOnStdinEof = true;
  else if (a === '--no-verify-sigv4') opts.verifySigV4 = false;
  else usage(`unknown argument ${a}`);
}
if (!opts.dir) usage('--dir is required');
if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) usage('bad --port');

const s3dir = toolsDir();
const require = createRequire(path.join(s3dir, 'package.json'));
let S3rver, SignatureV4;
try {
  S3rver = require('s3rver');
  ({ SignatureV4 } = require('@smithy/signature-v4'));
} catch (err) {
  process.stderr.write(`s3rver_run: cannot load s3rver and @smithy/signature-v4 from ${s3dir}/node_modules ` +
    `(run: bash scripts/install_s3_tools.sh): ${err.message}\n`);
  process.exit(3);
}

// ----------------------------------------------------------- crypto shim --
// s3rver makes ListObjectsV2 continuation tokens with single DES ('des',
// DES-CBC), which OpenSSL 3 (Node >= 17) keeps in its legacy provider only:
// every truncated listing would answer 500. 3-key DES-EDE3-CBC with the same
// key three times is the same cipher, from the default provider.
const nodeCrypto = require('crypto');  // the object s3rver's controllers call into
for (const name of ['createCipheriv', 'createDecipheriv']) {
  const original = nodeCrypto[name];
  nodeCrypto[name] = function (algorithm, key, iv, ...rest) {
    if (typeof algorithm === 'string' && algorithm.toLowerCase() === 'des' && key && key.length === 8) {
      return original.call(this, 'des-ede3-cbc', Buffer.concat([key, key, key]), iv, ...rest);
    }
    return original.call(this, algorithm, key, iv, ...rest);
  };
}

fs.mkdirSync(opts.dir, { recursive: true });
const server = new S3rver({
  address: '127.0.0.1',
  port: opts.port,
  silent: true,
  directory: opts.dir,
  vhostBuckets: false,
  configureBuckets: opts.buckets.map(name => ({ name })),
});

// -------------------------------------------------------- SigV4 checking --
const SECRETS = { S3RVER: 'S3RVER' };  // s3rver's one account

// The hash the SDK signer wants: new Sha256() hashes, new Sha256(key) is an HMAC.
class Sha256 {
  constructor(secret) {
    this.h = secret === undefined
      ? nodeCrypto.createHash('sha256')
      : nodeCrypto.createHmac('sha256', typeof secret === 'string' ? secret : Buffer.from(secret));
  }
  update(data) { this.h.update(typeof data === 'string' ? data : Buffer.from(data)); }
  async digest() { return new Uint8Array(this.h.digest()); }
}

function xmlError(ctx, status, code, message, extra = {}) {
  const esc = s => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  ctx.status = status;
  ctx.type = 'application/xml';
  ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error>' +
    `<Code>${esc(code)}</Code><Message>${esc(message)}</Message>` +
    Object.entries(extra).map(([k, v]) => `<${k}>${esc(v)}</${k}>`).join('') + '</Error>';
}

// undefined when the request is fine (or unsigned, or of an unknown key: s3rver
// answers those), else [code, message].
async function checkSigV4(ctx) {
  const auth = ctx.get('authorization');
  if (!auth || !auth.startsWith('AWS4-HMAC-SHA256 ')) return undefined;
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return ['AuthorizationHeaderMalformed', `cannot parse the Authorization header: ${auth}`];
  const [, accessKeyId, shortDate, region, service, signedHeaders, signature] = m;
  const secretAccessKey = SECRETS[accessKeyId];
  if (secretAccessKey === undefined) return undefined;
  const amzDate = ctx.get('x-amz-date');
  if (!/^\d{8}T\d{6}Z$/.test(amzDate) || amzDate.slice(0, 8) !== shortDate) {
    return ['AuthorizationHeaderMalformed', `x-amz-date "${amzDate}" does not match the credential date ${shortDate}`];
  }
  const names = signedHeaders.split(';');
  for (const required of ['host', 'x-amz-date', 'x-amz-content-sha256']) {
    if (!names.includes(required)) return ['AccessDenied', `SignedHeaders lacks ${required}`];
  }
  const headers = {};
  for (const name of names) {
    const value = ctx.req.headers[name];
    if (value === undefined) return ['SignatureDoesNotMatch', `signed header ${name} was not sent`];
    headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  // The path and query exactly as sent (S3 does not normalize or re-encode the path).
  const url = ctx.req.url;
  const qmark = url.indexOf('?');
  const rawPath = qmark < 0 ? url : url.slice(0, qmark);
  const query = {};
  for (const part of (qmark < 0 ? '' : url.slice(qmark + 1)).split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const k = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
    const v = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
    query[k] = k in query ? [].concat(query[k], v) : v;
  }
  const signingDate = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T` +
    `${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);
  const signer = new SignatureV4({
    credentials: { accessKeyId, secretAccessKey, sessionToken: headers['x-amz-security-token'] },
    region, service, sha256: Sha256, uriEscapePath: false, applyChecksum: false,
  });
  const signed = await signer.sign(
    { method: ctx.method, protocol: 'http:', hostname: ctx.hostname, path: rawPath, query, headers },
    { signingDate, signingRegion: region, signingService: service, signableHeaders: new Set(names) });
  const want = /SignedHeaders=([^,]+), Signature=([0-9a-f]{64})/.exec(signed.headers.authorization);
  if (!want || want[1] !== signedHeaders || want[2] !== signature) {
    return ['SignatureDoesNotMatch', 'The request signature we calculated does not match the signature ' +
      'you provided. Check your key and signing method.'];
  }
  return undefined;
}

function noSuchUpload(ctx, id) {
  xmlError(ctx, 404, 'NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, ' +
    'or the upload may have been aborted or completed.', { UploadId: id });
}

const xmlEsc = s => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

// ListMultipartUploads of `bucket` (S3's ListMultipartUploadsResult).
function listUploads(ctx, bucket) {
  if (!/^[a-z0-9.-]+$/.test(bucket) || !fs.existsSync(path.join(opts.dir, bucket))) {
    xmlError(ctx, 404, 'NoSuchBucket', 'The specified bucket does not exist', { BucketName: bucket });
    return;
  }
  const prefix = String(ctx.query.prefix ?? '');
  const keyMarker = String(ctx.query['key-marker'] ?? '');
  const idMarker = String(ctx.query['upload-id-marker'] ?? '');
  const maxUploads = Math.max(0, Math.min(1000, Number(ctx.query['max-uploads'] ?? 1000) || 0));
  const root = server.store.getResourcePath(bucket, undefined, 'uploads');
  const uploads = [];
  for (const id of fs.existsSync(root) ? fs.readdirSync(root) : []) {
    const keyFile = path.join(root, id, 'key');
    if (!fs.existsSync(keyFile)) continue;
    const key = fs.readFileSync(keyFile).toString();
    if (!key.startsWith(prefix)) continue;
    uploads.push({ key, id, initiated: fs.statSync(keyFile).mtime });
  }
  uploads.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.initiated - b.initiated || (a.id < b.id ? -1 : 1)));
  let start = 0;
  if (keyMarker) {
    const at = idMarker ? uploads.findIndex(u => u.key === keyMarker && u.id === idMarker) : -1;
    start = at >= 0 ? at + 1 : uploads.findIndex(u => u.key > keyMarker);
    if (start < 0) start = uploads.length;
  }
  const page = uploads.slice(start, start + maxUploads);
  const truncated = start + page.length < uploads.length;
  const last = page[page.length - 1];
  ctx.status = 200;
  ctx.type = 'application/xml';
  ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
    `<Bucket>${xmlEsc(bucket)}</Bucket><KeyMarker>${xmlEsc(keyMarker)}</KeyMarker>` +
    `<UploadIdMarker>${xmlEsc(idMarker)}</UploadIdMarker>` +
    `<NextKeyMarker>${truncated ? xmlEsc(last.key) : ''}</NextKeyMarker>` +
    `<NextUploadIdMarker>${truncated ? xmlEsc(last.id) : ''}</NextUploadIdMarker>` +
    `<Prefix>${xmlEsc(prefix)}</Prefix><MaxUploads>${maxUploads}</MaxUploads>` +
    `<IsTruncated>${truncated}</IsTruncated>` +
    page.map(u => `<Upload><Key>${xmlEsc(u.key)}</Key><UploadId>${xmlEsc(u.id)}</UploadId>` +
      '<Initiator><ID>S3RVER</ID><DisplayName>S3RVER</DisplayName></Initiator>' +
      '<Owner><ID>S3RVER</ID><DisplayName>S3RVER</DisplayName></Owner><StorageClass>STANDARD</StorageClass>' +
      `<Initiated>${u.initiated.toISOString()}</Initiated></Upload>`).join('') +
    '</ListMultipartUploadsResult>';
}

// Koa composes server.middleware when it starts listening: these run first,
// SigV4 checking before the multipart shim.
const multipartShim = async (ctx, next) => {
  if (ctx.method === 'GET' && Object.prototype.hasOwnProperty.call(ctx.query, 'uploads')) {
    const b = /^\/([^/]+)\/?$/.exec(ctx.path);
    if (b) {
      listUploads(ctx, decodeURIComponent(b[1]));
      return;
    }
  }
  if (!Object.prototype.hasOwnProperty.call(ctx.query, 'uploadId')) return next();
  const m = /^\/([^/]+)\/(.+)$/.exec(ctx.path);
  if (!m || !['PUT', 'POST', 'DELETE'].includes(ctx.method)) return next();
  const id = String(ctx.query.uploadId);
  const bucket = decodeURIComponent(m[1]);
  const uploadDir = /^[0-9a-f]+$/.test(id) && /^[a-z0-9.-]+$/.test(bucket)
    ? path.join(server.store.getResourcePath(bucket, undefined, 'uploads'), id)
    : undefined;
  if (!uploadDir || !fs.existsSync(path.join(uploadDir, 'key'))) {
    noSuchUpload(ctx, id);
    return;
  }
  if (ctx.method === 'DELETE') {
    fs.rmSync(uploadDir, { recursive: true, force: true });
    ctx.status = 204;
    return;
  }
  return next();
};
const sigV4Check = async (ctx, next) => {
  const problem = await checkSigV4(ctx);
  if (problem) {
    xmlError(ctx, 403, problem[0], problem[1]);
    return;
  }
  return next();
};
server.middleware.unshift(multipartShim);
if (opts.verifySigV4) server.middleware.unshift(sigV4Check);

if (opts.exitOnStdinEof) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}

try {
  const addr = await server.run();
  process.stdout.write(`PORT ${addr.port}\n`);
} catch (err) {
  process.stderr.write(`s3rver_run: cannot start s3rver on 127.0.0.1:${opts.port}: ${err.message}\n`);
  process.exit(1);
}
