// A policy on contract 0.2.0: a Deployment (and a Service when the AppService has ports), plus
// an `ImagePinned` condition (true when the image is pinned by digest) and, when it is not, a
// Warning Event `ImageNotPinned`. The same report as the Rust example in
// examples/guests/conditions.
//
// Built with ComponentizeJS against wit/0.2.0 (hack/guests/build.sh). Enums arrive and leave as
// their WIT names ('true', 'warning'), records as objects with camelCase keys.

import { log } from 'kudevops:appservice/host@0.2.0';

/** The contract's `policy` export, at 0.2.0. */
export const policy = {
  render(app) {
    const name = app.metadata.name;
    const image = app.spec.image;
    if (image.trim() === '') {
      throw { tag: 'invalid-spec', val: 'spec.image is required' };
    }
    const objects = [desired('apps/v1', 'Deployment', name, deployment(app))];
    if (app.spec.ports.length > 0) {
      objects.push(desired('v1', 'Service', name, service(app)));
    }
    const pinned = image.includes('@sha256:');
    log('debug', `rendered ${objects.length} objects; image pinned: ${pinned}`);
    return {
      objects,
      conditions: [{
        type: 'ImagePinned',
        status: pinned ? 'true' : 'false',
        reason: pinned ? 'PinnedByDigest' : 'NotPinned',
        message: `${image} is ${pinned ? '' : 'not '}pinned by digest`,
      }],
      events: pinned ? [] : [{
        type: 'warning',
        reason: 'ImageNotPinned',
        note: `image ${image} is not pinned by digest`,
      }],
    };
  },
};

function deployment(app) {
  const name = app.metadata.name;
  const ports = app.spec.ports.map((p) => {
    const port = { containerPort: containerPort(p) };
    if (p.name !== undefined) port.name = p.name;
    return port;
  });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels: { app: name } },
    spec: {
      replicas: app.spec.replicas ?? 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name, image: app.spec.image, ports }] },
      },
    },
  };
}

function service(app) {
  const name = app.metadata.name;
  const nodePort = app.spec.ports.some((p) => p.nodePort !== undefined);
  const ports = app.spec.ports.map((p) => {
    const port = { port: p.port, targetPort: containerPort(p), protocol: p.protocol ?? 'TCP' };
    if (p.name !== undefined) port.name = p.name;
    if (p.nodePort !== undefined) port.nodePort = p.nodePort;
    return port;
  });
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, labels: { app: name } },
    spec: { type: nodePort ? 'NodePort' : 'ClusterIP', selector: { app: name }, ports },
  };
}

/** The container port a Service port targets: a numeric targetPort, else the port itself. */
function containerPort(p) {
  return p.targetPort?.tag === 'int' ? p.targetPort.val : p.port;
}

function desired(apiVersion, kind, name, body) {
  return { apiVersion, kind, name, body: JSON.stringify(body) };
}
