"""Installation manifests: Volcano's CRDs (structural schemas) and lavaflow's components.

``deploy/crds/*.yaml`` and ``charts/lavaflow/crds/*.yaml`` are these CRDs
written out (``python -m lavaflow.kube.manifests --write``; a test checks they
match). ``lavaflow install --print`` prints the CRDs followed by the plain
manifests below (the Helm chart renders the same objects with values).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from ..scheduler.framework.conf import DEFAULT_SCHEDULER_CONF

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

IMAGE = "ghcr.io/lavaflow/lavaflow:0.1.0"
NAMESPACE = "lavaflow-system"
# marks lavaflow's own CRDs (`lavaflow install` leaves a CRD of the same name without it as it is)
OWN_CRD_LABEL = ("app.kubernetes.io/part-of", "lavaflow")


# ---------------------------------------------------------------------- schema helpers


def s(type_: str, **kw: Any) -> dict[str, Any]:
    return {"type": type_, **kw}


def i32(**kw: Any) -> dict[str, Any]:
    return {"type": "integer", "format": "int32", **kw}


def obj(props: dict[str, Any] | None = None, required: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object"}
    if props is not None:
        out["properties"] = props
    if required:
        out["required"] = required
    out.update(kw)
    return out


def arr(items: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **kw}


def strmap(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": values or {"type": "string"}}


def free() -> dict[str, Any]:
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


QUANTITY = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": True,
}
RESOURCES = strmap(QUANTITY)
TIME = s("string", format="date-time")
NETWORK_TOPOLOGY = obj(
    {
        "mode": s("string", enum=["hard", "soft"], default="hard"),
        "highestTierAllowed": i32(),
        "highestTierName": s("string"),
    }
)
LIFECYCLE_POLICY = obj(
    {
        "action": s("string"),
        "event": s("string"),
        "events": arr(s("string")),
        "exitCode": i32(),
        "timeout": s("string"),
    }
)
OWNER_REFERENCE = obj(
    {
        "apiVersion": s("string"),
        "kind": s("string"),
        "name": s("string"),
        "uid": s("string"),
        "controller": s("boolean"),
        "blockOwnerDeletion": s("boolean"),
    },
    required=["apiVersion", "kind", "name", "uid"],
)


def job_spec() -> dict[str, Any]:
    task = obj(
        {
            "name": s("string", maxLength=63),
            "replicas": i32(minimum=0),
            "minAvailable": i32(minimum=0),
            "template": free(),
            "policies": arr(LIFECYCLE_POLICY),
            "topologyPolicy": s("string", enum=["none", "best-effort", "restricted", "single-numa-node"]),
            "maxRetry": i32(),
            "dependsOn": obj({"name": arr(s("string")), "iteration": s("string", enum=["any", "all"])}),
            "partitionPolicy": obj(
                {
                    "totalPartitions": i32(minimum=1),
                    "partitionSize": i32(minimum=1),
                    "minPartitions": i32(minimum=0),
                    "networkTopology": NETWORK_TOPOLOGY,
                }
            ),
        }
    )
    return obj(
        {
            "schedulerName": s("string", maxLength=63),
            "minAvailable": i32(minimum=0),
            "volumes": arr(
                obj(
                    {"mountPath": s("string"), "volumeClaimName": s("string"), "volumeClaim": free()},
                    required=["mountPath"],
                )
            ),
            "tasks": arr(task, minItems=1),
            "policies": arr(LIFECYCLE_POLICY),
            "plugins": strmap(arr(s("string"))),
            "runningEstimate": s("string"),
            "queue": s("string", default="default"),
            "maxRetry": i32(default=3),
            "ttlSecondsAfterFinished": i32(minimum=0),
            "priorityClassName": s("string"),
            "minSuccess": i32(minimum=1),
            "networkTopology": NETWORK_TOPOLOGY,
        }
    )


def crd(
    group: str,
    version: str,
    kind: str,
    plural: str,
    spec_schema: dict[str, Any],
    *,
    scope: str = "Namespaced",
    short: list[str] | None = None,
    columns: list[tuple[str, str, str, int]] | None = None,
    status_schema: dict[str, Any] | None = None,
    top: dict[str, Any] | None = None,
    categories: list[str] | None = None,
) -> dict[str, Any]:
    props: dict[str, Any] = {"apiVersion": s("string"), "kind": s("string"), "metadata": s("object")}
    if top is not None:
        props.update(top)
    else:
        props["spec"] = spec_schema
    if status_schema is not None:
        props["status"] = status_schema
    ver: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": obj(props)},
    }
    if status_schema is not None:
        ver["subresources"] = {"status": {}}
    if columns:
        ver["additionalPrinterColumns"] = [
            {"name": n, "type": t, "jsonPath": p, **({"priority": pr} if pr else {})} for n, t, p, pr in columns
        ]
    names: dict[str, Any] = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    if short:
        names["shortNames"] = short
    if categories:
        names["categories"] = categories
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": dict([OWN_CRD_LABEL])},
        "spec": {"group": group, "names": names, "scope": scope, "versions": [ver]},
    }


AGE = ("AGE", "date", ".metadata.creationTimestamp", 0)


def crds() -> dict[str, dict[str, Any]]:
    """file name -> CRD."""
    condition = obj(
        {
            "type": s("string"),
            "status": s("string"),
            "transitionID": s("string"),
            "lastTransitionTime": TIME,
            "reason": s("string"),
            "message": s("string"),
        }
    )
    podgroup = crd(
        "scheduling.volcano.sh",
        "v1beta1",
        "PodGroup",
        "podgroups",
        obj(
            {
                "minMember": i32(minimum=0),
                "minTaskMember": strmap(i32()),
                "queue": s("string", default="default"),
                "priorityClassName": s("string"),
                "minResources": RESOURCES,
                "networkTopology": NETWORK_TOPOLOGY,
                "subGroupPolicy": arr(
                    obj(
                        {
                            "name": s("string"),
                            "networkTopology": NETWORK_TOPOLOGY,
                            "subGroupSize": i32(default=1),
                            "minSubGroups": i32(default=0),
                            "labelSelector": free(),
                            "matchLabelKeys": arr(s("string")),
                        },
                        required=["name"],
                    )
                ),
            }
        ),
        short=["pg", "podgroup-v1beta1"],
        columns=[
            ("STATUS", "string", ".status.phase", 0),
            ("MINMEMBER", "integer", ".spec.minMember", 0),
            ("RUNNINGS", "integer", ".status.running", 0),
            AGE,
            ("QUEUE", "string", ".spec.queue", 1),
        ],
        status_schema=obj(
            {
                "phase": s("string"),
                "conditions": arr(condition),
                "running": i32(),
                "succeeded": i32(),
                "failed": i32(),
            }
        ),
    )
    queue = crd(
        "scheduling.volcano.sh",
        "v1beta1",
        "Queue",
        "queues",
        obj(
            {
                "weight": i32(default=1, minimum=1, maximum=65535),
                "capability": RESOURCES,
                "reclaimable": s("boolean"),
                "extendClusters": arr(obj({"name": s("string"), "weight": i32(), "capacity": RESOURCES})),
                "guarantee": obj({"resource": RESOURCES}),
                "affinity": free(),
                "type": s("string"),
                "parent": s("string"),
                "deserved": RESOURCES,
                "priority": i32(minimum=0),
                "dequeueStrategy": s("string", enum=["fifo", "traverse"]),
            }
        ),
        scope="Cluster",
        short=["q", "queue-v1beta1"],
        columns=[
            ("STATE", "string", ".status.state", 0),
            ("WEIGHT", "integer", ".spec.weight", 0),
            ("PARENT", "string", ".spec.parent", 0),
            ("INQUEUE", "integer", ".status.inqueue", 1),
            ("PENDING", "integer", ".status.pending", 1),
            ("RUNNING", "integer", ".status.running", 1),
            AGE,
        ],
        status_schema=obj(
            {
                "state": s("string"),
                "unknown": i32(),
                "pending": i32(),
                "running": i32(),
                "inqueue": i32(),
                "completed": i32(),
                "reservation": obj({"nodes": arr(s("string")), "resource": RESOURCES}),
                "allocated": RESOURCES,
            }
        ),
    )
    job = crd(
        "batch.volcano.sh",
        "v1alpha1",
        "Job",
        "jobs",
        job_spec(),
        short=["vcjob", "vcjobs", "vj"],
        columns=[
            ("STATUS", "string", ".status.state.phase", 0),
            ("MINAVAILABLE", "integer", ".status.minAvailable", 0),
            ("RUNNINGS", "integer", ".status.running", 0),
            AGE,
            ("QUEUE", "string", ".spec.queue", 1),
        ],
        status_schema=obj(
            {
                "state": obj(
                    {"phase": s("string"), "reason": s("string"), "message": s("string"), "lastTransitionTime": TIME}
                ),
                "minAvailable": i32(),
                "taskStatusCount": strmap(obj({"phase": strmap(i32())})),
                "pending": i32(),
                "running": i32(),
                "succeeded": i32(),
                "failed": i32(),
                "terminating": i32(),
                "unknown": i32(),
                "version": i32(),
                "retryCount": i32(),
                "runningDuration": s("string"),
                "controlledResources": strmap(),
                "conditions": arr(obj({"status": s("string"), "lastTransitionTime": TIME}, required=["status"])),
            }
        ),
    )
    command = crd(
        "bus.volcano.sh",
        "v1alpha1",
        "Command",
        "commands",
        {},
        top={"action": s("string"), "target": OWNER_REFERENCE, "reason": s("string"), "message": s("string")},
    )
    jobtemplate = crd(
        "flow.volcano.sh",
        "v1alpha1",
        "JobTemplate",
        "jobtemplates",
        job_spec(),
        short=["jt"],
        status_schema=obj({"jobDependsOnList": arr(s("string"))}),
    )
    jobflow = crd(
        "flow.volcano.sh",
        "v1alpha1",
        "JobFlow",
        "jobflows",
        obj(
            {
                "flows": arr(
                    obj(
                        {
                            "name": s("string"),
                            "dependsOn": obj({"targets": arr(s("string")), "probe": free()}),
                            "patch": obj({"spec": free()}),
                        },
                        required=["name"],
                    )
                ),
                "jobRetainPolicy": s("string", enum=["retain", "delete"]),
            }
        ),
        short=["jf"],
        columns=[("STATUS", "string", ".status.state.phase", 0), AGE],
        status_schema=obj(
            {
                "pendingJobs": arr(s("string")),
                "runningJobs": arr(s("string")),
                "failedJobs": arr(s("string")),
                "completedJobs": arr(s("string")),
                "terminatedJobs": arr(s("string")),
                "unKnowJobs": arr(s("string")),
                "jobStatusList": arr(free()),
                "conditions": free(),
                "state": obj({"phase": s("string")}),
            }
        ),
    )
    label_selector = obj(
        {
            "matchLabels": strmap(),
            "matchExpressions": arr(
                obj(
                    {"key": s("string"), "operator": s("string"), "values": arr(s("string"))},
                    required=["key", "operator"],
                )
            ),
        }
    )
    hypernode = crd(
        "topology.volcano.sh",
        "v1alpha1",
        "HyperNode",
        "hypernodes",
        obj(
            {
                "tier": i32(minimum=0),
                "tierName": s("string"),
                "members": arr(
                    obj(
                        {
                            "type": s("string", enum=["Node", "HyperNode"]),
                            "selector": obj(
                                {
                                    "exactMatch": obj({"name": s("string")}, required=["name"]),
                                    "regexMatch": obj({"pattern": s("string")}, required=["pattern"]),
                                    "labelMatch": label_selector,
                                }
                            ),
                        },
                        required=["type"],
                    ),
                    minItems=1,
                ),
            },
            required=["tier", "members"],
        ),
        scope="Cluster",
        short=["hn"],
        columns=[("TIER", "integer", ".spec.tier", 0), ("TIERNAME", "string", ".spec.tierName", 0), AGE],
        status_schema=obj({"conditions": arr(free()), "nodeCount": i32()}),
    )
    numatopology = crd(
        "nodeinfo.volcano.sh",
        "v1alpha1",
        "Numatopology",
        "numatopologies",
        obj(
            {
                "policies": strmap(),
                "resReserved": strmap(),
                "numares": strmap(obj({"allocatable": s("string"), "capacity": i32()})),
                "cpuDetail": strmap(obj({"numa": i32(), "socket": i32(), "core": i32()})),
            }
        ),
        scope="Cluster",
        short=["numatopo"],
    )
    return {
        "topology.volcano.sh_hypernodes.yaml": hypernode,
        "nodeinfo.volcano.sh_numatopologies.yaml": numatopology,
        "scheduling.volcano.sh_podgroups.yaml": podgroup,
        "scheduling.volcano.sh_queues.yaml": queue,
        "batch.volcano.sh_jobs.yaml": job,
        "bus.volcano.sh_commands.yaml": command,
        "flow.volcano.sh_jobtemplates.yaml": jobtemplate,
        "flow.volcano.sh_jobflows.yaml": jobflow,
    }


# ---------------------------------------------------------------------- RBAC (least privilege)


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


READ = ["get", "list", "watch"]

SCHEDULER_RULES = [
    _rule([""], ["pods", "nodes", "namespaces"], READ),
    _rule([""], ["pods/binding"], ["create"]),
    _rule([""], ["pods/status"], ["patch", "update"]),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule([""], ["events"], ["create", "patch"]),
    _rule(["events.k8s.io"], ["events"], ["create", "patch"]),
    _rule(["scheduling.k8s.io"], ["priorityclasses"], READ),
    _rule(["scheduling.volcano.sh"], ["podgroups", "queues"], READ),
    _rule(["scheduling.volcano.sh"], ["queues"], ["create"]),
    # read by the network-topology-aware, numa-aware, resourcequota and predicates (volumes) plugins
    _rule([""], ["resourcequotas", "persistentvolumeclaims", "persistentvolumes", "services"], READ),
    _rule(["topology.volcano.sh"], ["hypernodes"], READ),
    _rule(["nodeinfo.volcano.sh"], ["numatopologies"], READ),
    _rule(["scheduling.volcano.sh"], ["podgroups/status", "queues/status"], ["patch", "update"]),
    # status written on the object where its CRD has no status subresource (Volcano's PodGroup)
    _rule(["scheduling.volcano.sh"], ["podgroups", "queues"], ["patch", "update"]),
    # scheduler-plugins' PodGroups (gangs by the scheduling.x-k8s.io/pod-group label), where served
    _rule(["scheduling.x-k8s.io"], ["podgroups"], READ),
    _rule(["scheduling.x-k8s.io"], ["podgroups/status"], ["patch", "update"]),
    # the Kubernetes Workload API (KEP-4671: 1.35 Workloads, 1.36 PodGroups), where served
    _rule(["scheduling.k8s.io"], ["workloads", "podgroups"], READ),
    _rule(["scheduling.k8s.io"], ["podgroups/status"], ["patch", "update"]),
    _rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update"]),
]

CONTROLLER_RULES = [
    _rule([""], ["pods"], [*READ, "create", "update", "patch", "delete"]),
    _rule(
        [""],
        ["services", "configmaps", "secrets", "persistentvolumeclaims"],
        [*READ, "create", "update", "patch", "delete"],
    ),
    _rule([""], ["events"], ["create", "patch"]),
    _rule(["networking.k8s.io"], ["networkpolicies"], [*READ, "create", "update", "delete"]),
    _rule(["apps"], ["deployments", "replicasets", "statefulsets"], READ),
    _rule(["batch"], ["jobs"], READ),
    _rule(["scheduling.k8s.io"], ["priorityclasses"], READ),
    _rule(["batch.volcano.sh"], ["jobs"], [*READ, "update", "patch", "delete"]),
    _rule(["batch.volcano.sh"], ["jobs/status", "jobs/finalizers"], ["update", "patch"]),
    _rule(["bus.volcano.sh"], ["commands"], [*READ, "delete"]),
    _rule(["scheduling.volcano.sh"], ["podgroups", "queues"], [*READ, "create", "update", "patch", "delete"]),
    _rule(["scheduling.volcano.sh"], ["podgroups/status", "queues/status"], ["update", "patch"]),
    _rule(["flow.volcano.sh"], ["jobflows", "jobtemplates"], [*READ, "update", "patch"]),
    _rule(["flow.volcano.sh"], ["jobflows/status", "jobtemplates/status"], ["update", "patch"]),
    _rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update"]),
]

WEBHOOK_RULES = [
    _rule(["scheduling.volcano.sh"], ["queues", "podgroups"], READ),
    _rule([""], ["namespaces"], READ),
    _rule(
        ["admissionregistration.k8s.io"],
        ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        ["get", "update"],
    ),
]


def _component(
    name: str,
    args: list[str],
    rules: list[dict[str, Any]],
    namespace: str,
    image: str,
    port: int,
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    full = f"lavaflow-{name}"
    labels = {"app.kubernetes.io/name": "lavaflow", "app.kubernetes.io/component": name}
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "ports": [{"name": "http" if name != "webhook" else "https", "containerPort": port}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    probe_scheme = "HTTPS" if name == "webhook" else "HTTP"
    container["livenessProbe"] = {
        "httpGet": {"path": "/healthz", "port": port, "scheme": probe_scheme},
        "initialDelaySeconds": 10,
        "periodSeconds": 10,
    }
    container["readinessProbe"] = {
        "httpGet": {"path": "/readyz", "port": port, "scheme": probe_scheme},
        "periodSeconds": 5,
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": full,
        "priorityClassName": "system-cluster-critical",
        "terminationGracePeriodSeconds": 30,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if extra:
        for k, v in extra.items():
            if k == "volumeMounts":
                container["volumeMounts"] = v
            else:
                pod_spec[k] = v
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": full, "namespace": namespace, "labels": labels},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": full, "labels": labels},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": full, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": full},
            "subjects": [{"kind": "ServiceAccount", "name": full, "namespace": namespace}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": full, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
    ]


def scheduler_configmap(namespace: str = NAMESPACE, conf: str = DEFAULT_SCHEDULER_CONF) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "lavaflow-scheduler-configmap", "namespace": namespace},
        "data": {"volcano-scheduler.conf": conf},
    }


def webhook_objects(namespace: str, service: str = "lavaflow-webhook") -> list[dict[str, Any]]:
    def hook(
        name: str, path: str, group: str, resources: list[str], ops: list[str], versions: list[str]
    ) -> dict[str, Any]:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {"service": {"name": service, "namespace": namespace, "path": path, "port": 443}},
            "rules": [{"apiGroups": [group], "apiVersions": versions, "resources": resources, "operations": ops}],
        }

    from .webhook import HOOKS

    mutating: list[dict[str, Any]] = []
    validating: list[dict[str, Any]] = []
    for h in HOOKS:
        version = h.kind.api_version.rpartition("/")[2]
        one = hook(h.name, h.path, h.kind.group, [h.kind.plural], list(h.operations), [version])
        if h.kind.kind == "Pod":  # every pod passes here: never block pod creation on the webhook
            one["failurePolicy"] = "Ignore"
            one["objectSelector"] = {}
        (mutating if h.mutate else validating).append(one)
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, "namespace": namespace},
            "spec": {
                "selector": {"app.kubernetes.io/name": "lavaflow", "app.kubernetes.io/component": "webhook"},
                "ports": [{"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "lavaflow-webhook"},
            "webhooks": mutating,
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "lavaflow-webhook"},
            "webhooks": validating,
        },
    ]


def install_manifests(
    namespace: str = NAMESPACE, image: str = IMAGE, with_crds: bool = True, webhook: bool = True
) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    if with_crds:
        docs.extend(crds().values())
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    docs.append(scheduler_configmap(namespace))
    conf_volume = {
        "volumes": [{"name": "scheduler-config", "configMap": {"name": "lavaflow-scheduler-configmap"}}],
        "volumeMounts": [{"name": "scheduler-config", "mountPath": "/etc/lavaflow", "readOnly": True}],
    }
    docs += _component(
        "scheduler",
        [
            "scheduler",
            "--scheduler-conf",
            "/etc/lavaflow/volcano-scheduler.conf",
            "--leader-elect",
            f"--lock-namespace={namespace}",
            "--listen-port=8080",
        ],
        SCHEDULER_RULES,
        namespace,
        image,
        8080,
        conf_volume,
    )
    docs += _component(
        "controller",
        ["controller", "--leader-elect", f"--lock-namespace={namespace}", "--listen-port=8081"],
        CONTROLLER_RULES,
        namespace,
        image,
        8081,
    )
    if webhook:
        docs += _component(
            "webhook",
            [
                "webhook",
                "--port=8443",
                "--service=lavaflow-webhook",
                f"--namespace={namespace}",
                "--cert-dir=/tmp/certs",
            ],
            WEBHOOK_RULES,
            namespace,
            image,
            8443,
            {
                "volumes": [{"name": "certs", "emptyDir": {}}],
                "volumeMounts": [{"name": "certs", "mountPath": "/tmp/certs"}],
            },
        )
        docs += webhook_objects(namespace)
    return docs


def dump_all(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, width=120)


def write_crds(root: Path) -> list[Path]:
    out = []
    for d in (root / "deploy" / "crds", root / "charts" / "lavaflow" / "crds"):
        d.mkdir(parents=True, exist_ok=True)
        for name, doc in crds().items():
            p = d / name
            p.write_text(yaml.safe_dump(doc, sort_keys=False, width=120), encoding="utf-8")
            out.append(p)
    return out


if __name__ == "__main__":  # pragma: no cover
    if "--write" in sys.argv:
        for p in write_crds(
            Path(sys.argv[sys.argv.index("--write") + 1] if len(sys.argv) > sys.argv.index("--write") + 1 else ".")
        ):
            print(p)
    else:
        sys.stdout.write(dump_all(install_manifests()))
