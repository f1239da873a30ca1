#!/usr/bin/env node
// Offline validation of rendered Kubernetes manifests (the output of
// `helm template`), in two layers:
//
//  1. Schema: every object is checked against the Kubernetes OpenAPI schema
//     of its apiVersion/kind (npm package kubernetes-models; ServiceMonitor
//     and PodMonitor against @kubernetes-models/prometheus-operator, the
//     cert-manager Certificate against @kubernetes-models/cert-manager): types,
//     required fields, enums, formats such as resource quantities. An
//     apiVersion/kind with no schema is an error.
//  2. Chart rules the schemas cannot express: recommended labels on every
//     object, valid label keys and values, DNS names, no unknown fields in
//     containers, pod specs and security contexts (the OpenAPI schemas allow
//     extra keys, which the API server would drop silently), the restricted
//     security context, pinned images, selectors that match, RBAC references
//     that resolve, Grafana dashboard ConfigMaps that hold valid JSON, probes
//     and Secret volumes that agree with the TLS a Certificate renders.
//
// Usage:
//   validate_manifests.mjs [--npm DIR] [--expect-kind Kind=N]... [--expect-reject REGEX]... FILE
//
// --expect-kind: exactly N objects of that kind (N may be 0).
// --expect-reject: the file must FAIL validation, and every REGEX must match
//   some error (a test that the validator can fail).
// Exit status 0 on success; 1 with one line per problem otherwise.

import { createRequire } from "node:module";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
let npmDir = process.env.GREENSHARD_CHART_NPM || resolve(here, "../../.tools/npm");
const expectKinds = new Map();
const expectReject = [];
let file = null;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--npm") npmDir = args[++i];
  else if (a === "--expect-kind") {
    const [k, n] = args[++i].split("=");
    expectKinds.set(k, Number(n));
  } else if (a === "--expect-reject") expectReject.push(new RegExp(args[++i]));
  else if (!file) file = a;
  else usage(`unexpected argument ${a}`);
}
if (!file) usage("no manifest file");

function usage(msg) {
  console.error(`validate_manifests: ${msg}`);
  process.exit(2);
}

const modules = join(npmDir, "node_modules");
if (!existsSync(join(modules, "kubernetes-models")) || !existsSync(join(modules, "yaml"))) {
  console.error(`validate_manifests: schema packages missing under ${modules}; run scripts/install_helm.sh`);
  process.exit(2);
}
const require = createRequire(join(npmDir, "package.json"));
const YAML = require("yaml");

// apiVersion/kind -> module path of the model class.
function modelPath(apiVersion, kind) {
  if (apiVersion.startsWith("monitoring.coreos.com/"))
    return join(modules, "@kubernetes-models/prometheus-operator", apiVersion, `${kind}.js`);
  if (apiVersion.startsWith("cert-manager.io/"))
    return join(modules, "@kubernetes-models/cert-manager", apiVersion, `${kind}.js`);
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  return group ? join(modules, "kubernetes-models", group, version, `${kind}.js`)
               : join(modules, "kubernetes-models", version, `${kind}.js`);
}

const errors = [];
const err = (where, msg) => errors.push(`${where}: ${msg}`);

// ---------- parse ----------
const text = readFileSync(file, "utf8");
const docs = [];
for (const d of YAML.parseAllDocuments(text)) {
  if (d.errors.length) {
    for (const e of d.errors) err(file, `YAML: ${e.message}`);
    continue;
  }
  const o = d.toJS();
  if (o === null || o === undefined) continue;
  docs.push(o);
}
if (docs.length === 0) err(file, "no objects rendered");

// ---------- rules ----------
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUANTITY = /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$/;
const RECOMMENDED = ["app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
                     "app.kubernetes.io/managed-by", "app.kubernetes.io/component", "app.kubernetes.io/part-of",
                     "helm.sh/chart"];
const NAME_63 = new Set(["Service", "Pod"]);  // names used as DNS labels

// Field lists (Kubernetes 1.35 core/v1) for the objects the chart renders;
// the OpenAPI schemas do not reject unknown keys.
const CONTAINER_FIELDS = new Set(["name", "image", "imagePullPolicy", "command", "args", "workingDir", "ports",
  "env", "envFrom", "resources", "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts",
  "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
  "terminationMessagePolicy", "securityContext", "stdin", "stdinOnce", "tty"]);
const POD_SPEC_FIELDS = new Set(["containers", "initContainers", "ephemeralContainers", "volumes", "restartPolicy",
  "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "dnsConfig", "nodeSelector",
  "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID",
  "hostIPC", "hostUsers", "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname", "subdomain",
  "affinity", "schedulerName", "tolerations", "hostAliases", "priorityClassName", "priority", "readinessGates",
  "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead", "topologySpreadConstraints",
  "setHostnameAsFQDN", "os", "schedulingGates", "resourceClaims", "resources", "hostnameOverride"]);
const CONTAINER_SC_FIELDS = new Set(["capabilities", "privileged", "seLinuxOptions", "windowsOptions", "runAsUser",
  "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "procMount",
  "seccompProfile", "appArmorProfile"]);
const POD_SC_FIELDS = new Set(["seLinuxOptions", "windowsOptions", "runAsUser", "runAsGroup", "runAsNonRoot",
  "supplementalGroups", "supplementalGroupsPolicy", "fsGroup", "sysctls", "fsGroupChangePolicy",
  "seccompProfile", "appArmorProfile", "seLinuxChangePolicy"]);

function checkLabels(where, labels, { recommended }) {
  labels = labels || {};
  for (const [k, v] of Object.entries(labels)) {
    const parts = k.split("/");
    const name = parts.pop();
    const prefix = parts.join("/");
    if (parts.length > 1 || (prefix && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) ||
        name.length > 63 || !LABEL_NAME.test(name))
      err(where, `label key '${k}' is not a valid qualified name`);
    if (typeof v !== "string") err(where, `label '${k}' value must be a string, got ${typeof v}`);
    else if (v.length > 63 || !LABEL_VALUE.test(v)) err(where, `label '${k}' value '${v}' is not a valid label value`);
  }
  if (recommended)
    for (const k of RECOMMENDED)
      if (!(k in labels)) err(where, `missing recommended label ${k}`);
}

function checkQuantities(where, res) {
  for (const part of ["requests", "limits"])
    for (const [k, v] of Object.entries((res && res[part]) || {}))
      if (!QUANTITY.test(String(v))) err(where, `resources.${part}.${k}: '${v}' is not a quantity`);
}

function unknownKeys(where, obj, allowed) {
  for (const k of Object.keys(obj || {})) if (!allowed.has(k)) err(where, `unknown field '${k}'`);
}

function checkPodSpec(where, spec, podLabels) {
  if (!spec) return err(where, "no pod spec");
  unknownKeys(`${where}.spec`, spec, POD_SPEC_FIELDS);
  const psc = spec.securityContext || {};
  unknownKeys(`${where}.spec.securityContext`, psc, POD_SC_FIELDS);
  if (psc.runAsUser === 0) err(where, "pod securityContext.runAsUser is 0 (root)");
  const all = [...(spec.initContainers || []), ...(spec.containers || [])];
  if (!spec.containers || spec.containers.length === 0) err(where, "no containers");
  for (const c of all) {
    const cw = `${where} container '${c.name}'`;
    unknownKeys(cw, c, CONTAINER_FIELDS);
    const sc = c.securityContext || {};
    unknownKeys(`${cw} securityContext`, sc, CONTAINER_SC_FIELDS);
    const runAsNonRoot = sc.runAsNonRoot ?? psc.runAsNonRoot;
    if (runAsNonRoot !== true) err(cw, "runAsNonRoot must be true (container or pod securityContext)");
    if ((sc.runAsUser ?? psc.runAsUser) === 0) err(cw, "runs as UID 0");
    if (sc.readOnlyRootFilesystem !== true) err(cw, "readOnlyRootFilesystem must be true");
    if (sc.allowPrivilegeEscalation !== false) err(cw, "allowPrivilegeEscalation must be false");
    if (sc.privileged === true) err(cw, "privileged");
    const drop = (sc.capabilities && sc.capabilities.drop) || [];
    if (!drop.includes("ALL")) err(cw, "capabilities.drop must include ALL");
    const add = (sc.capabilities && sc.capabilities.add) || [];
    for (const a of add) if (a !== "NET_BIND_SERVICE") err(cw, `capabilities.add ${a} is not allowed (restricted)`);
    const seccomp = (sc.seccompProfile || psc.seccompProfile || {}).type;
    if (!["RuntimeDefault", "Localhost"].includes(seccomp)) err(cw, "seccompProfile.type must be RuntimeDefault or Localhost");
    if (typeof c.image !== "string" || !c.image) err(cw, "no image");
    else {
      const ref = c.image.split("@")[0];
      const last = ref.split("/").pop();
      if (!c.image.includes("@") && !last.includes(":")) err(cw, `image '${c.image}' has no tag`);
      if (/:latest$/.test(ref)) err(cw, `image '${c.image}' uses the latest tag`);
    }
    if (!c.resources || (!c.resources.requests && !c.resources.limits)) err(cw, "no resources");
    checkQuantities(cw, c.resources);
    const volumes = new Set((spec.volumes || []).map((v) => v.name));
    for (const m of c.volumeMounts || [])
      if (!volumes.has(m.name)) err(cw, `volumeMount '${m.name}' has no volume`);
    const ports = new Set((c.ports || []).map((p) => p.name));
    for (const pr of ["livenessProbe", "readinessProbe", "startupProbe"]) {
      const p = c[pr] && c[pr].httpGet;
      if (p && typeof p.port === "string" && !ports.has(p.port)) err(cw, `${pr} port '${p.port}' is not a named port`);
    }
  }
  for (const v of spec.volumes || []) {
    if (v.hostPath) err(where, `volume '${v.name}' is a hostPath`);
    const q = v.emptyDir && v.emptyDir.sizeLimit;
    if (q !== undefined && !QUANTITY.test(String(q))) err(where, `volume '${v.name}' sizeLimit '${q}' is not a quantity`);
  }
  checkLabels(`${where} pod template`, podLabels, { recommended: false });
}

const byKind = new Map();
const key = (o) => `${o.kind}/${(o.metadata && o.metadata.name) || "?"}`;
for (const o of docs) byKind.set(o.kind, [...(byKind.get(o.kind) || []), o]);

for (const o of docs) {
  const where = key(o);
  if (typeof o.apiVersion !== "string" || typeof o.kind !== "string") {
    err(where, "apiVersion and kind are required");
    continue;
  }
  const md = o.metadata || {};
  if (!md.name) err(where, "metadata.name is required");
  else if (md.name.length > 253 || !DNS1123_SUBDOMAIN.test(md.name)) err(where, `metadata.name '${md.name}' is not a DNS-1123 subdomain`);
  else if (NAME_63.has(o.kind) && (md.name.length > 63 || !DNS1123_LABEL.test(md.name)))
    err(where, `metadata.name '${md.name}' is not a DNS-1123 label`);
  if (md.namespace !== undefined && !DNS1123_LABEL.test(md.namespace)) err(where, `metadata.namespace '${md.namespace}' is invalid`);
  checkLabels(where, md.labels, { recommended: true });

  // 1. the Kubernetes schema
  const path = modelPath(o.apiVersion, o.kind);
  if (!existsSync(path)) {
    err(where, `no schema for ${o.apiVersion} ${o.kind}`);
  } else {
    const mod = await import(pathToFileURL(path).href);
    const Model = mod[o.kind];
    try {
      new Model(o).validate();
    } catch (e) {
      for (const line of String(e.message).split(/, (?=data)/)) err(where, `schema: ${line}`);
    }
  }

  // 2. chart rules per kind
  switch (o.kind) {
    case "Deployment": {
      const tpl = o.spec && o.spec.template;
      const sel = (o.spec && o.spec.selector && o.spec.selector.matchLabels) || {};
      const labels = (tpl && tpl.metadata && tpl.metadata.labels) || {};
      for (const [k, v] of Object.entries(sel))
        if (labels[k] !== v) err(where, `selector ${k}=${v} does not match the pod template labels`);
      checkPodSpec(where, tpl && tpl.spec, labels);
      const sa = tpl && tpl.spec && tpl.spec.serviceAccountName;
      const sas = (byKind.get("ServiceAccount") || []).map((s) => s.metadata.name);
      if (sa && sas.length && !sas.includes(sa)) err(where, `serviceAccountName '${sa}' is not rendered`);
      for (const v of (tpl && tpl.spec && tpl.spec.volumes) || []) {
        if (v.configMap && !(byKind.get("ConfigMap") || []).some((c) => c.metadata.name === v.configMap.name))
          err(where, `volume '${v.name}' refers to ConfigMap '${v.configMap.name}', not rendered`);
      }
      break;
    }
    case "Pod":
      checkPodSpec(where, o.spec, md.labels);
      break;
    case "Service": {
      const sel = (o.spec && o.spec.selector) || {};
      const pods = (byKind.get("Deployment") || []).map((d) => d.spec.template.metadata.labels || {});
      if (!pods.some((l) => Object.entries(sel).every(([k, v]) => l[k] === v)))
        err(where, "selector matches no rendered pod template");
      const containerPorts = new Set((byKind.get("Deployment") || []).flatMap((d) =>
        d.spec.template.spec.containers.flatMap((c) => (c.ports || []).map((p) => p.name))));
      for (const p of o.spec.ports || [])
        if (typeof p.targetPort === "string" && !containerPorts.has(p.targetPort))
          err(where, `targetPort '${p.targetPort}' is not a container port`);
      break;
    }
    case "RoleBinding": {
      const ref = o.roleRef || {};
      if (ref.kind === "Role" && !(byKind.get("Role") || []).some((r) => r.metadata.name === ref.name && r.metadata.namespace === md.namespace))
        err(where, `roleRef Role '${ref.name}' is not rendered in namespace ${md.namespace}`);
      break;
    }
    case "PersistentVolumeClaim": {
      const s = o.spec && o.spec.resources && o.spec.resources.requests && o.spec.resources.requests.storage;
      if (!s || !QUANTITY.test(String(s))) err(where, "spec.resources.requests.storage must be a quantity");
      break;
    }
    case "ConfigMap": {
      const dash = md.labels && md.labels.grafana_dashboard !== undefined;
      for (const [k, v] of Object.entries(o.data || {})) {
        if (typeof v !== "string") err(where, `data.${k} must be a string`);
        if (k.endsWith(".json")) {
          try {
            const d = JSON.parse(v);
            if (dash && (!d.title || !Array.isArray(d.panels))) err(where, `data.${k}: not a Grafana dashboard`);
          } catch (e) {
            err(where, `data.${k}: invalid JSON (${e.message})`);
          }
        }
        if (k.endsWith(".yaml")) {
          try { YAML.parse(v); } catch (e) { err(where, `data.${k}: invalid YAML (${e.message})`); }
        }
      }
      break;
    }
    case "ServiceMonitor":
    case "PodMonitor":
      if (!("release" in (md.labels || {}))) err(where, "no release label (kube-prometheus-stack selects on it)");
      for (const ep of (o.spec && (o.spec.endpoints || o.spec.podMetricsEndpoints)) || [])
        if (ep.scheme === "https" && !ep.tlsConfig) err(where, "an https endpoint without tlsConfig");
      break;
    case "Certificate": {
      // The Secret it fills must be what a rendered Deployment mounts.
      const secret = o.spec && o.spec.secretName;
      const mounted = (byKind.get("Deployment") || []).some((d) =>
        (d.spec.template.spec.volumes || []).some((v) => v.secret && v.secret.secretName === secret));
      if (!mounted) err(where, `secretName '${secret}' is mounted by no rendered Deployment`);
      if (!(o.spec && o.spec.issuerRef && o.spec.issuerRef.name)) err(where, "spec.issuerRef.name is empty");
      break;
    }
  }
}

for (const [kind, n] of expectKinds) {
  const got = (byKind.get(kind) || []).length;
  if (got !== n) err(file, `expected ${n} ${kind} object(s), rendered ${got}`);
}

if (expectReject.length) {
  if (errors.length === 0) {
    console.error(`validate_manifests: ${file} was expected to be rejected but passed`);
    process.exit(1);
  }
  let missing = 0;
  for (const re of expectReject)
    if (!errors.some((e) => re.test(e))) {
      console.error(`validate_manifests: no error matches /${re.source}/`);
      missing++;
    }
  for (const e of errors) console.log(`(expected) ${e}`);
  if (missing) process.exit(1);
  console.log(`validate_manifests: ${file}: rejected as expected (${errors.length} problems)`);
  process.exit(0);
}
if (errors.length) {
  for (const e of errors) console.error(e);
  console.error(`validate_manifests: ${file}: ${errors.length} problem(s) in ${docs.length} objects`);
  process.exit(1);
}
const kinds = [...byKind].map(([k, v]) => `${k}=${v.length}`).join(" ");
console.log(`validate_manifests: ${file}: ${docs.length} objects valid (${kinds})`);
