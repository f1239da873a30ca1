// Reads S3 with the official AWS SDK v3 client (@aws-sdk/client-s3), to prove
// that what our C++ client wrote is readable by AWS's own client.
//
//   node s3_read.mjs list <bucket> <prefix>        one "<key> <size>" line per object
//   node s3_read.mjs get <bucket> <key> <outfile>  writes the object's bytes to outfile
//
// Endpoint and credentials from the same variables as shard::s3::config_from_env:
// AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL), AWS_REGION (or AWS_DEFAULT_REGION),
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; path-style.
// Modules: see s3rver_run.mjs (<tools>/s3/node_modules).
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

function fail(msg, code = 1) {
  process.stderr.write(`s3_read: ${msg}\n`);
  process.exit(code);
}

// The SDK warns on stderr that its releases from 2027 need Node >= 22; that
// is about future versions, not this pinned one: keep stderr for real errors.
const emitWarning = process.emitWarning;
process.emitWarning = function (warning, ...rest) {
  if (String(warning).includes('NodeVersionSupportWarning')) return;
  return emitWarning.call(process, warning, ...rest);
};

const s3dir = toolsDir();
let sdk;
try {
  sdk = createRequire(path.join(s3dir, 'package.json'))('@aws-sdk/client-s3');
} catch (err) {
  fail(`cannot load @aws-sdk/client-s3 from ${s3dir}/node_modules (run: bash scripts/install_s3_tools.sh): ${err.message}`, 3);
}
const { S3Client, GetObjectCommand, paginateListObjectsV2 } = sdk;

const env = process.env;
const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL;
if (!endpoint) fail('AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) is not set', 2);
if (!env.AWS_ACCESS_KEY_ID || !env.AWS_SECRET_ACCESS_KEY) fail('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set', 2);

const client = new S3Client({
  endpoint,
  forcePathStyle: true,
  region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
  credentials: {
    accessKeyId: env.AWS_ACCESS_KEY_ID,
    secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
    ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
  },
  // Only when an operation needs them: s3rver sends no x-amz-checksum-* headers.
  requestChecksumCalculation: 'WHEN_REQUIRED',
  responseChecksumValidation: 'WHEN_REQUIRED',
  maxAttempts: 1,
});

const [cmd, ...args] = process.argv.slice(2);
try {
  if (cmd === 'list' && (args.length === 1 || args.length === 2)) {
    const [Bucket, Prefix = ''] = args;
    const lines = [];
    for await (const page of paginateListObjectsV2({ client }, { Bucket, Prefix })) {
      for (const obj of page.Contents || []) lines.push(`${obj.Key} ${obj.Size}`);
    }
    process.stdout.write(lines.map(l => l + '\n').join(''));
  } else if (cmd === 'get' && args.length === 3) {
    const [Bucket, Key, outfile] = args;
    const res = await client.send(new GetObjectCommand({ Bucket, Key }));
    const bytes = await res.Body.transformToByteArray();
    fs.writeFileSync(outfile, bytes);
  } else {
    fail('usage: s3_read.mjs list <bucket> <prefix> | get <bucket> <key> <outfile>', 2);
  }
} catch (err) {
  fail(`${cmd} failed: ${err.name}: ${err.message}`);
}
