// The default app-operator policy in JavaScript: an AppService becomes a Deployment and, when it
// has ports, a NodePort Service. It renders exactly what the Rust default guest (guest/) renders,
// which the conformance suite checks (`app-operator guest test --guest javascript.wasm`).
//
// Built with ComponentizeJS (hack/guests/build.sh). WIT names arrive in camelCase, `option<T>`
// as `undefined` or the value, variants as `{ tag, val }`, and an `err` result is thrown.

import { log } from 'kudevops:appservice/host@0.1.0';

// Pods when spec.replicas is omitted, as the CRD documents.
const DEFAULT_REPLICAS = 1;

// AppService annotation asking for pods that meet the `restricted` Pod Security Standard.
const POD_SECURITY_ANNOTATION = 'apps.kudevops.io/pod-security';

/** The contract's `policy` export. */
export const policy = {
  render(app) {
    const problem = check(app);
    if (problem !== undefined) {
      throw { tag: 'invalid-spec', val: problem };
    }
    const name = app.metadata.name;
    const objects = [desired('apps/v1', 'Deployment', name, deployment(app))];
    if (app.spec.ports.length > 0) {
      objects.push(desired('v1', 'Service', name, service(app)));
    }
    log('debug', 'rendered' + objects.map((o) => ` ${o.kind}/${o.name}`).join(''));
    return objects;
  },
};

/** Why the spec cannot be rendered, naming the field; undefined when it can. */
function check(app) {
  if (!app.metadata.name) return 'metadata.name is required';
  if (app.spec.image.trim() === '') return 'spec.image is required';
  const level = podSecurity(app);
  if (level !== undefined && level !== 'baseline' && level !== 'restricted') {
    return `metadata.annotations[${POD_SECURITY_ANNOTATION}] must be baseline or restricted, got ${JSON.stringify(level)}`;
  }
  const replicas = app.spec.replicas;
  if (replicas !== undefined && replicas < 0) {
    return `spec.replicas must not be negative, got ${replicas}`;
  }
  const several = app.spec.ports.length > 1;
  for (const [i, p] of app.spec.ports.entries()) {
    if (!(p.port >= 1 && p.port <= 65535)) {
      return `spec.ports[${i}].port must be 1 to 65535, got ${p.port}`;
    }
    if (several && !p.name) {
      return `spec.ports[${i}].name is required when there is more than one port`;
    }
    const t = p.targetPort;
    if (t?.tag === 'int' && !(t.val >= 1 && t.val <= 65535)) {
      return `spec.ports[${i}].targetPort must be 1 to 65535, got ${t.val}`;
    }
    if (t?.tag === 'str' && !isPortName(t.val)) {
      return (
        `spec.ports[${i}].targetPort ${JSON.stringify(t.val)} is not a valid port name ` +
        "(at most 15 lowercase letters, digits or '-', with a letter)"
      );
    }
  }
  return undefined;
}

/** An IANA service name, as Kubernetes requires for container port names. */
function isPortName(s) {
  return (
    /^[a-z0-9-]{1,15}$/.test(s) &&
    /[a-z]/.test(s) &&
    !s.startsWith('-') &&
    !s.endsWith('-') &&
    !s.includes('--')
  );
}

/** The value of the pod security annotation, if set. */
function podSecurity(app) {
  const found = app.metadata.annotations.find(([k]) => k === POD_SECURITY_ANNOTATION);
  return found?.[1];
}

function deployment(app) {
  const name = app.metadata.name;
  const restricted = podSecurity(app) === 'restricted';
  const podSecurityContext = { seccompProfile: { type: 'RuntimeDefault' } };
  const securityContext = { allowPrivilegeEscalation: false };
  if (restricted) {
    podSecurityContext.runAsNonRoot = true;
    securityContext.capabilities = { drop: ['ALL'] };
  }
  const container = { name, image: app.spec.image, imagePullPolicy: 'IfNotPresent' };
  const ports = containerPorts(app);
  if (ports.length > 0) container.ports = ports;
  container.securityContext = securityContext;
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas: app.spec.replicas ?? DEFAULT_REPLICAS,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { securityContext: podSecurityContext, containers: [container] },
      },
    },
  };
}

/** The pod-side target of a port: targetPort, or port when it is omitted. */
function target(p) {
  return p.targetPort === undefined ? p.port : p.targetPort.val;
}

/** One container port per distinct target, in the order of the AppService's ports. */
function containerPorts(app) {
  const out = [];
  const seen = new Set();
  for (const p of app.spec.ports) {
    const t = target(p);
    const port = typeof t === 'string' ? { name: t, containerPort: p.port } : { containerPort: t };
    if (p.protocol !== undefined) port.protocol = p.protocol;
    const key = JSON.stringify(port);
    if (!seen.has(key)) {
      seen.add(key);
      out.push(port);
    }
  }
  return out;
}

function service(app) {
  const name = app.metadata.name;
  const ports = app.spec.ports.map((p) => {
    const port = {};
    if (p.name !== undefined) port.name = p.name;
    if (p.protocol !== undefined) port.protocol = p.protocol;
    port.port = p.port;
    port.targetPort = target(p);
    if (p.nodePort !== undefined) port.nodePort = p.nodePort;
    if (p.appProtocol !== undefined) port.appProtocol = p.appProtocol;
    return port;
  });
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name },
    spec: { type: 'NodePort', selector: { app: name }, ports },
  };
}

function desired(apiVersion, kind, name, body) {
  return { apiVersion, kind, name, body: JSON.stringify(body) };
}
