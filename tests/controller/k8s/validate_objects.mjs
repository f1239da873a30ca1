#!/usr/bin/env node
// Offline validation of the Kubernetes objects greenshard-controller sends to
// the API server (written by tests/controller/k8s_test.cpp), against the
// Kubernetes OpenAPI schemas of the npm package kubernetes-models (installed
// into <repo>/.tools/npm by scripts/install_helm.sh, as for tests/charts).
//
//  1. Schema: each object against the model of its apiVersion/kind (types,
//     required fields, enums, formats such as quantities).
//  2. No unknown fields anywhere: the OpenAPI schemas allow extra keys (the
//     API server would drop them silently), so every key is looked up in the
//     package's own TypeScript declarations (.d.ts), walked from the kind
//     down (Job -> JobSpec -> PodTemplateSpec -> PodSpec -> Container ...).
//  3. What the schemas cannot express: DNS-1123 names, label keys and values,
//     quantities, volume mounts that name a volume, a pod subdomain that is a
//     headless Service in the same set, a Service selector that matches the
//     pod template, ConfigMap volumes and ownerReferences that resolve.
//
// Usage: validate_objects.mjs [--npm DIR] FILE
//   FILE: JSON, an array of {"case": "...", "objects": [ ... ]}; the checks of
//   3. are within one case. One line per problem on stdout, prefixed with the
//   case and Kind/name; exit 0 when every case is valid, 1 otherwise, 2 when
//   the schema packages are missing (naming scripts/install_helm.sh).
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
let npmDir = process.env.GREENSHARD_CHART_NPM || resolve(here, "../../../.tools/npm");
let file = null;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--npm") npmDir = args[++i];
  else if (!file) file = args[i];
  else fatal(`unexpected argument ${args[i]}`);
}
if (!file) fatal("no input file");
function fatal(msg) {
  console.error(`validate_objects: ${msg}`);
  process.exit(2);
}
const modules = join(npmDir, "node_modules");
const models = join(modules, "kubernetes-models");
if (!existsSync(join(models, "package.json")))
  fatal(`kubernetes-models missing under ${modules}; run scripts/install_helm.sh`);

// ---------- .d.ts: interface name -> properties ----------
const dtsCache = new Map();
function resolveImport(fromFile, spec) {
  let p = spec.startsWith(".") ? resolve(dirname(fromFile), spec) : join(modules, spec);
  p = p.replace(/\.js$/, "");
  return `${p}.d.ts`;
}
// {props: Map(name -> {required, type}), imports: Map(ident -> file)} or null
// (a type alias such as Quantity or IntOrString: a leaf).
function loadDts(path) {
  if (dtsCache.has(path)) return dtsCache.get(path);
  let out = null;
  if (existsSync(path)) {
    const lines = readFileSync(path, "utf8").split("\n");
    const imports = new Map();
    for (const l of lines) {
      const m = l.match(/^import \{ (\w+) \} from "([^"]+)";/);
      if (m) imports.set(m[1], resolveImport(path, m[2]));
    }
    const start = lines.findIndex((l) => /^export interface \w+/.test(l));
    if (start >= 0) {
      const props = new Map();
      for (let i = start + 1; i < lines.length && lines[i] !== "}"; i++) {
        const m = lines[i].match(/^    "([^"]+)"(\?)?: (.*?);?$/);
        if (!m) continue;
        const type = m[3] === "{" ? { map: true } : m[3];
        props.set(m[1], { required: !m[2], type });
      }
      out = { props, imports };
    }
  }
  dtsCache.set(path, out);
  return out;
}
function checkKeys(where, value, dtsPath, errs) {
  const d = loadDts(dtsPath);
  if (!d || value === null || typeof value !== "object" || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value)) {
    const p = d.props.get(k);
    if (!p) {
      errs.push(`${where}: unknown field '${k}'`);
      continue;
    }
    if (typeof p.type !== "string") continue;  // a map: any keys
    const arr = p.type.match(/^Array<(\w+)>$/);
    const ident = arr ? arr[1] : p.type;
    const target = d.imports.get(ident);
    if (!target) continue;  // a primitive or a union of literals
    if (arr) {
      if (Array.isArray(v)) v.forEach((x, i) => checkKeys(`${where}.${k}[${i}]`, x, target, errs));
    } else checkKeys(`${where}.${k}`, v, target, errs);
  }
}

// ---------- rules ----------
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUANTITY = /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

function checkLabels(where, labels, errs) {
  for (const [k, v] of Object.entries(labels || {})) {
    const parts = k.split("/");
    const name = parts.pop();
    const prefix = parts.join("/");
    if (parts.length > 1 || (prefix && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) ||
        name.length > 63 || !LABEL_NAME.test(name))
      errs.push(`${where}: label key '${k}' is not a valid qualified name`);
    if (typeof v !== "string" || v.length > 63 || !LABEL_VALUE.test(v))
      errs.push(`${where}: label '${k}' value '${v}' is not a valid label value`);
  }
}

function checkPodSpec(where, spec, objects, errs) {
  if (!spec) return errs.push(`${where}: no pod spec`);
  const volumes = new Set((spec.volumes || []).map((v) => v.name));
  if (volumes.size !== (spec.volumes || []).length) errs.push(`${where}: duplicate volume names`);
  for (const v of spec.volumes || []) {
    if (!DNS1123_LABEL.test(v.name || "")) errs.push(`${where}: volume name '${v.name}' is not a DNS-1123 label`);
    const q = v.emptyDir && v.emptyDir.sizeLimit;
    if (q !== undefined && !QUANTITY.test(String(q))) errs.push(`${where}: volume '${v.name}' sizeLimit '${q}' is not a quantity`);
    if (v.configMap && !objects.some((o) => o.kind === "ConfigMap" && o.metadata.name === v.configMap.name))
      errs.push(`${where}: volume '${v.name}' refers to ConfigMap '${v.configMap.name}', not created`);
  }
  for (const c of spec.containers || []) {
    const cw = `${where} container '${c.name}'`;
    if (!DNS1123_LABEL.test(c.name || "")) errs.push(`${cw}: name is not a DNS-1123 label`);
    const names = new Set();
    for (const e of c.env || []) {
      if (!ENV_NAME.test(e.name || "")) errs.push(`${cw}: env name '${e.name}' is invalid`);
      if (names.has(e.name)) errs.push(`${cw}: env '${e.name}' is set twice`);
      names.add(e.name);
    }
    for (const part of ["requests", "limits"])
      for (const [k, v] of Object.entries((c.resources && c.resources[part]) || {}))
        if (!QUANTITY.test(String(v))) errs.push(`${cw}: resources.${part}.${k}: '${v}' is not a quantity`);
    const paths = new Set();
    for (const m of c.volumeMounts || []) {
      if (!volumes.has(m.name)) errs.push(`${cw}: volumeMount '${m.name}' has no volume`);
      if (paths.has(m.mountPath)) errs.push(`${cw}: two volumes mounted at ${m.mountPath}`);
      paths.add(m.mountPath);
    }
  }
  if (spec.subdomain !== undefined) {
    const svc = objects.find((o) => o.kind === "Service" && o.metadata.name === spec.subdomain);
    if (!svc) errs.push(`${where}: subdomain '${spec.subdomain}' is not a Service in the same set`);
    else if (!svc.spec || svc.spec.clusterIP !== "None") errs.push(`${where}: subdomain Service '${spec.subdomain}' is not headless`);
  }
}

async function validateCase(c) {
  const errs = [];
  const objects = c.objects || [];
  for (const o of objects) {
    const where = `${c.case}: ${o.kind}/${(o.metadata && o.metadata.name) || "?"}`;
    const e = [];
    if (typeof o.apiVersion !== "string" || typeof o.kind !== "string") {
      errs.push(`${where}: apiVersion and kind are required`);
      continue;
    }
    const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : [null, o.apiVersion];
    const base = group ? join(models, group, version, o.kind) : join(models, version, o.kind);
    if (!existsSync(`${base}.js`)) {
      errs.push(`${where}: no schema for ${o.apiVersion} ${o.kind}`);
      continue;
    }
    // 1. the Kubernetes schema
    const mod = await import(pathToFileURL(`${base}.js`).href);
    try {
      new mod[o.kind](o).validate();
    } catch (x) {
      for (const line of String(x.message).split(/, (?=data)/)) e.push(`${where}: schema: ${line}`);
    }
    // 2. no unknown fields
    checkKeys(where, o, `${base}.d.ts`, e);
    // 3. rules
    const md = o.metadata || {};
    if (!md.name || md.name.length > 63 || !DNS1123_LABEL.test(md.name))
      e.push(`${where}: metadata.name '${md.name}' is not a DNS-1123 label`);
    if (md.namespace !== undefined && !DNS1123_LABEL.test(md.namespace))
      e.push(`${where}: metadata.namespace '${md.namespace}' is not a DNS-1123 label`);
    checkLabels(where, md.labels, e);
    for (const r of md.ownerReferences || [])
      if (!objects.some((x) => x.kind === r.kind && x.apiVersion === r.apiVersion && x.metadata.name === r.name))
        e.push(`${where}: ownerReference ${r.kind}/${r.name} is not in the same set`);
    if (o.kind === "Job") {
      const tpl = (o.spec && o.spec.template) || {};
      checkLabels(`${where} pod template`, tpl.metadata && tpl.metadata.labels, e);
      checkPodSpec(where, tpl.spec, objects, e);
      // Indexed pods are named <job>-<index>-<random>; the hostname <job>-<index>.
      if (o.spec && o.spec.completionMode === "Indexed" && md.name &&
          `${md.name}-${Math.max(0, (o.spec.completions || 1) - 1)}`.length > 63)
        e.push(`${where}: pod hostnames '${md.name}-<index>' exceed 63 characters`);
    }
    if (o.kind === "Service") {
      const sel = (o.spec && o.spec.selector) || {};
      const pods = objects.filter((x) => x.kind === "Job").map((j) => (j.spec.template.metadata || {}).labels || {});
      if (!Object.keys(sel).length || !pods.some((l) => Object.entries(sel).every(([k, v]) => l[k] === v)))
        e.push(`${where}: selector matches no Job's pod template`);
    }
    if (o.kind === "ConfigMap")
      for (const [k, v] of Object.entries(o.data || {}))
        if (k.endsWith(".json")) {
          try { JSON.parse(v); } catch (x) { e.push(`${where}: data.${k}: invalid JSON (${x.message})`); }
        }
    errs.push(...e);
  }
  if (objects.length === 0) errs.push(`${c.case}: no objects`);
  return errs;
}

const cases = JSON.parse(readFileSync(file, "utf8"));
if (!Array.isArray(cases)) fatal(`${file}: expected an array of cases`);
let bad = 0;
for (const c of cases) {
  const errs = await validateCase(c);
  for (const e of errs) console.log(e);
  if (errs.length) bad++;
  else console.log(`${c.case}: ${c.objects.length} objects valid`);
}
process.exit(bad ? 1 : 0);
