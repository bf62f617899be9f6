"""The default app-operator policy in Python: an AppService becomes a Deployment and, when it
has ports, a NodePort Service. It renders exactly what the Rust default guest (guest/) renders,
which the conformance suite checks (`app-operator guest test --guest python.wasm`).

Built with componentize-py (hack/guests/build.sh). The bindings (`wit_world`) are generated
from wit/ at build time.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    AppService,
    DesiredObject,
    IntOrString_Int,
    IntOrString_Str,
    LogLevel,
    PolicyError_InvalidSpec,
)

# Pods when spec.replicas is omitted, as the CRD documents.
DEFAULT_REPLICAS = 1

# AppService annotation asking for pods that meet the `restricted` Pod Security Standard.
POD_SECURITY_ANNOTATION = "apps.kudevops.io/pod-security"


class Policy(exports.Policy):
    """The contract's `policy` export."""

    def render(self, app: AppService) -> list[DesiredObject]:
        objects = render(app)
        host.log(LogLevel.DEBUG, summary(objects))
        return objects


def render(app: AppService) -> list[DesiredObject]:
    """The Deployment, and the NodePort Service when the AppService has ports."""
    problem = check(app)
    if problem is not None:
        raise Err(PolicyError_InvalidSpec(problem))
    name = app.metadata.name
    objects = [desired("apps/v1", "Deployment", name, deployment(app))]
    if app.spec.ports:
        objects.append(desired("v1", "Service", name, service(app)))
    return objects


def summary(objects: list[DesiredObject]) -> str:
    """One log line, e.g. `rendered Deployment/nginx Service/nginx`."""
    return "rendered" + "".join(f" {o.kind}/{o.name}" for o in objects)


def check(app: AppService) -> str | None:
    """Why the spec cannot be rendered, naming the field; None when it can."""
    if not app.metadata.name:
        return "metadata.name is required"
    if not app.spec.image.strip():
        return "spec.image is required"
    level = pod_security(app)
    if level is not None and level not in ("baseline", "restricted"):
        return (
            f"metadata.annotations[{POD_SECURITY_ANNOTATION}] must be baseline or restricted, "
            f"got {quoted(level)}"
        )
    replicas = app.spec.replicas
    if replicas is not None and replicas < 0:
        return f"spec.replicas must not be negative, got {replicas}"
    several = len(app.spec.ports) > 1
    for i, p in enumerate(app.spec.ports):
        if not 1 <= p.port <= 65535:
            return f"spec.ports[{i}].port must be 1 to 65535, got {p.port}"
        if several and not p.name:
            return f"spec.ports[{i}].name is required when there is more than one port"
        t = p.target_port
        if isinstance(t, IntOrString_Int) and not 1 <= t.value <= 65535:
            return f"spec.ports[{i}].targetPort must be 1 to 65535, got {t.value}"
        if isinstance(t, IntOrString_Str) and not is_port_name(t.value):
            return (
                f"spec.ports[{i}].targetPort {quoted(t.value)} is not a valid port name "
                "(at most 15 lowercase letters, digits or '-', with a letter)"
            )
    return None


def quoted(s: str) -> str:
    """A string quoted as Rust's `{:?}` quotes the plain ones."""
    return json.dumps(s, ensure_ascii=False)


def is_port_name(s: str) -> bool:
    """An IANA service name, as Kubernetes requires for container port names."""
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-")
    return (
        1 <= len(s.encode()) <= 15
        and all(c in allowed for c in s)
        and any(c.isalpha() for c in s)
        and not s.startswith("-")
        and not s.endswith("-")
        and "--" not in s
    )


def pod_security(app: AppService) -> str | None:
    """The value of the pod security annotation, if set."""
    return next((v for k, v in app.metadata.annotations if k == POD_SECURITY_ANNOTATION), None)


def deployment(app: AppService) -> dict:
    name = app.metadata.name
    restricted = pod_security(app) == "restricted"
    pod_security_context: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    security_context: dict = {"allowPrivilegeEscalation": False}
    if restricted:
        pod_security_context["runAsNonRoot"] = True
        security_context["capabilities"] = {"drop": ["ALL"]}
    container: dict = {"name": name, "image": app.spec.image, "imagePullPolicy": "IfNotPresent"}
    ports = container_ports(app)
    if ports:
        container["ports"] = ports
    container["securityContext"] = security_context
    replicas = app.spec.replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": DEFAULT_REPLICAS if replicas is None else replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"securityContext": pod_security_context, "containers": [container]},
            },
        },
    }


def target(p) -> int | str:
    """The pod-side target of a port: targetPort, or port when it is omitted."""
    if p.target_port is None:
        return p.port
    return p.target_port.value


def container_ports(app: AppService) -> list[dict]:
    """One container port per distinct target, in the order of the AppService's ports."""
    out: list[dict] = []
    for p in app.spec.ports:
        t = target(p)
        port: dict = {}
        if isinstance(t, str):
            port["name"] = t
            port["containerPort"] = p.port
        else:
            port["containerPort"] = t
        if p.protocol is not None:
            port["protocol"] = p.protocol
        if port not in out:
            out.append(port)
    return out


def service(app: AppService) -> dict:
    name = app.metadata.name
    ports = []
    for p in app.spec.ports:
        port: dict = {}
        if p.name is not None:
            port["name"] = p.name
        if p.protocol is not None:
            port["protocol"] = p.protocol
        port["port"] = p.port
        port["targetPort"] = target(p)
        if p.node_port is not None:
            port["nodePort"] = p.node_port
        if p.app_protocol is not None:
            port["appProtocol"] = p.app_protocol
        ports.append(port)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": name}, "ports": ports},
    }


def desired(api_version: str, kind: str, name: str, body: dict) -> DesiredObject:
    return DesiredObject(api_version, kind, name, json.dumps(body, separators=(",", ":")))
