#!/usr/bin/env python3
"""What a write costs the API server: N writes of each kind against the local control plane
(`make bench-apicost`), 16 in flight, and the CPU kube-apiserver and etcd used for them, read
from /proc/<pid>/stat before each batch and SETTLE seconds after it (so that what the
controllers do in reaction, a ReplicaSet for a Deployment, an EndpointSlice for a Service,
counts with the batch that caused it). Kinds compared in alternating order, ROUNDS times:

- an AppService's status written as the operator writes it (a JSON patch `add /status`), as a
  forced server-side apply (what it did before 2026-12-06) and as a merge patch; the same for a
  bare CRD with a status subresource and no schema, to see what this CRD's schema costs;
- a Deployment, a Service and a ConfigMap created by POST (what the Go seed does) and by a
  server-side apply naming resourceVersion "1" (what app-operator does for a child it does not
  know).

Standard library only. Usage: hack/bench-apicost.py [N] (default 500); SETTLE (default 3),
ROUNDS (default 2), ONLY (`status` or `creates`: one half). The namespace and the bare CRD are
deleted, and waited for, at the end.
"""

import http.client
import json
import os
import queue
import ssl
import sys
import threading
import time
import urllib.parse

CLUSTER = os.environ.get(
    "APP_OPERATOR_CLUSTER_DIR", os.path.expanduser("~/.cache/app-operator/cluster")
)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
SETTLE = float(os.environ.get("SETTLE", "3"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
ONLY = os.environ.get("ONLY", "")
INFLIGHT = 16
TICK = os.sysconf("SC_CLK_TCK")
NS = f"apicost-{os.getpid()}"
APPS = "/apis/apps.kudevops.io/v1alpha1"
BARE = "/apis/bench.apicost.test/v1"


def kubeconfig(path):
    """The fields of the kubeconfig `hack/controlplane/up.sh` writes (one cluster, one user, the
    credentials as file paths) that this script needs, by key."""
    keys = ("server", "certificate-authority", "client-certificate", "client-key")
    fields = {}
    for line in open(path):
        key, _, value = line.strip().partition(": ")
        if key in keys:
            fields[key] = value.strip()
    return fields


CONFIG = kubeconfig(f"{CLUSTER}/kubeconfig")
SERVER = urllib.parse.urlsplit(CONFIG["server"])
TLS = ssl.create_default_context(cafile=CONFIG["certificate-authority"])
TLS.load_cert_chain(CONFIG["client-certificate"], CONFIG["client-key"])
LOCAL = threading.local()


def cpu(component):
    """CPU seconds (utime + stime) the control-plane component has used so far."""
    pid = open(f"{CLUSTER}/pids/{component}.pid").read().strip()
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def connect():
    """A new connection to the API server."""
    return http.client.HTTPSConnection(SERVER.hostname, SERVER.port, context=TLS)


def request(method, path, body=None, content_type="application/json", ok=(200, 201, 202)):
    """One request on this thread's connection; fails on an unexpected status."""
    if not hasattr(LOCAL, "conn"):
        LOCAL.conn = connect()
    LOCAL.conn.request(
        method,
        path,
        body=None if body is None else json.dumps(body),
        headers={"Content-Type": content_type, "Accept": "application/json"},
    )
    answer = LOCAL.conn.getresponse()
    data = answer.read()
    if answer.status not in ok:
        raise RuntimeError(f"{method} {path}: {answer.status} {data[:300]!r}")
    return data


def batch(label, jobs):
    """Runs `jobs` INFLIGHT at a time; prints their rate and the control plane's CPU each."""
    work = queue.Queue()
    for job in jobs:
        work.put(job)
    errors = []

    def worker():
        while True:
            try:
                job = work.get_nowait()
            except queue.Empty:
                return
            try:
                job()
            except Exception as e:  # noqa: BLE001 (counted and shown)
                errors.append(e)

    api, etcd = cpu("kube-apiserver"), cpu("etcd")
    started = time.time()
    threads = [threading.Thread(target=worker) for _ in range(INFLIGHT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - started
    time.sleep(SETTLE)
    api, etcd = cpu("kube-apiserver") - api, cpu("etcd") - etcd
    print(
        f"  {label:<40} {len(jobs):5d} in {wall:5.1f} s ({len(jobs) / wall:5.0f}/s)"
        f"  kube-apiserver {1000 * api / len(jobs):5.2f} ms each, etcd {1000 * etcd / len(jobs):5.2f} ms",
        flush=True,
    )
    if errors:
        print(f"    {len(errors)} failed, e.g. {errors[0]}")


def status(i, k):
    """A status like the operator's, different in each round k."""
    return {
        "observedGeneration": 1, "replicas": 0, "readyReplicas": 0, "availableReplicas": 0,
        "ready": "0/0", "selector": f"app=a{i}", "guestDigest": "sha256:" + "ab" * 32,
        "conditions": [{
            "type": "Ready", "status": "True" if k % 2 else "False", "reason": f"Round{k}",
            "message": f"round {k}", "lastTransitionTime": f"2026-12-06T12:00:{k % 60:02d}Z",
            "observedGeneration": 1,
        }],
    }


def status_writes(kind, base, api_version, k):
    """The three ways of writing the status of every object of `kind`, in an order by k."""
    path = lambda i: f"{base}/namespaces/{NS}/{kind}/a{i}/status"  # noqa: E731
    manager = "?fieldManager=app-operator"
    ways = {
        "JSON patch": lambda i, n: request(
            "PATCH", path(i) + manager,
            [{"op": "add", "path": "/status", "value": status(i, n)}],
            "application/json-patch+json"),
        "server-side apply": lambda i, n: request(
            "PATCH", path(i) + manager + "&force=true",
            {"apiVersion": api_version, "kind": "Widget" if kind == "widgets" else "AppService",
             "status": status(i, n)},
            "application/apply-patch+yaml"),
        "merge patch": lambda i, n: request(
            "PATCH", path(i) + manager, {"status": status(i, n)},
            "application/merge-patch+json"),
    }
    names = list(ways)
    names = names[k % 3:] + names[:k % 3]
    for j, name in enumerate(names):
        n = 10 * k + j
        batch(f"{kind} status, {name}", [lambda i=i: ways[name](i, n) for i in range(N)])


def child(kind, name, version=None):
    """A child object of `kind` named `name` (with resourceVersion `version` when given)."""
    meta = {"name": name, "labels": {"app": name}}
    if version:
        meta["resourceVersion"] = version
    if kind == "deployments":
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}}}
    if kind == "services":
        return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"}]}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}}


def creates(kind, k):
    """Every object of `kind` created by POST and by a create-only server-side apply."""
    base = {"deployments": f"/apis/apps/v1/namespaces/{NS}/deployments"}.get(
        kind, f"/api/v1/namespaces/{NS}/{kind}")
    post = lambda: batch(f"{kind} POST", [  # noqa: E731
        lambda i=i: request("POST", base + "?fieldManager=app-operator", child(kind, f"p{k}-{i}"))
        for i in range(N)])
    apply = lambda: batch(f"{kind} server-side apply (create)", [  # noqa: E731
        lambda i=i: request(
            "PATCH", f"{base}/s{k}-{i}?fieldManager=app-operator&force=true",
            child(kind, f"s{k}-{i}", "1"), "application/apply-patch+yaml")
        for i in range(N)])
    for step in (post, apply) if k % 2 == 0 else (apply, post):
        step()


def main():
    load = open("/proc/loadavg").read().split()[:3]
    print(f"bench-apicost: {N} writes per batch, {INFLIGHT} in flight, settle {SETTLE} s; "
          f"load average {' '.join(load)}")
    request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.bench.apicost.test"},
        "spec": {"group": "bench.apicost.test", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}},
        ok=(201, 409))
    request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    time.sleep(3)
    try:
        app = lambda i, v, k: {  # noqa: E731
            "apiVersion": v, "kind": k, "metadata": {"name": f"a{i}"},
            "spec": {"replicas": 0, "image": "nginx:1.27",
                     "ports": [{"port": 80, "targetPort": 80}]}}
        batch("appservices POST", [lambda i=i: request(
            "POST", f"{APPS}/namespaces/{NS}/appservices",
            app(i, "apps.kudevops.io/v1alpha1", "AppService")) for i in range(N)])
        batch("widgets POST", [lambda i=i: request(
            "POST", f"{BARE}/namespaces/{NS}/widgets",
            app(i, "bench.apicost.test/v1", "Widget")) for i in range(N)])
        for k in range(ROUNDS):
            print(f"round {k + 1} of {ROUNDS}:")
            if ONLY != "creates":
                status_writes("appservices", APPS, "apps.kudevops.io/v1alpha1", k)
                status_writes("widgets", BARE, "bench.apicost.test/v1", k)
            if ONLY != "status":
                for kind in ("deployments", "services", "configmaps"):
                    creates(kind, k)
    finally:
        LOCAL.conn = connect()
        request("DELETE", f"/api/v1/namespaces/{NS}")
        request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                "widgets.bench.apicost.test")
        while True:
            try:
                request("GET", f"/api/v1/namespaces/{NS}")
            except RuntimeError:
                break
            time.sleep(2)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"load average at the end {' '.join(load)}")


if __name__ == "__main__":
    main()
