"""`lavaflow webhook`: Volcano's admission webhooks over TLS, calling lavaflow.api.admission.

One code path: the defaults and checks are exactly the ones the simulator applies to its
inputs — the rules of :data:`lavaflow.api.admission.RULES`, for every kind the table of kinds
(:mod:`lavaflow.api.kinds`) marks as served by the webhook: Jobs, PodGroups, Queues, Pods,
JobFlows, JobTemplates, Commands and HyperNodes. This module only translates AdmissionReview v1
requests into those calls and their results into responses (a JSONPatch for mutations; a
refusal naming the object and each field for validations).

TLS: a certificate from files (cert-manager, or any secret mounted into the
pod), or a self-signed CA and serving certificate generated at start for
``<service>.<namespace>.svc``, whose CA bundle is then written into the
webhook configurations.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import json
import logging
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..api import admission as adm
from ..api.kinds import WEBHOOK_KINDS, Kind, kind_info
from ..api.volcano import PodGroup, Queue
from . import codec

if TYPE_CHECKING:
    from aiohttp import web
    from pydantic import BaseModel

    from .client import KubeClient
    from .metrics import Served
    from .store import KubeStore

log = logging.getLogger("lavaflow.kube")

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


@dataclass(frozen=True)
class Hook:
    """One webhook of the Mutating/ValidatingWebhookConfiguration and the path it is served at."""

    name: str
    path: str
    kind: Kind
    mutate: bool
    operations: tuple[str, ...]


# The order the webhook configurations list them in.
_ORDER = ("Job", "PodGroup", "Queue", "Pod", "JobFlow", "JobTemplate", "Command", "HyperNode")


def _hooks() -> tuple[Hook, ...]:
    kinds = sorted(WEBHOOK_KINDS, key=lambda k: _ORDER.index(k.kind) if k.kind in _ORDER else len(_ORDER))
    out = [
        Hook(f"mutate{k.kind.lower()}.lavaflow.io", f"/{k.plural}/mutate", k, True, ("CREATE",))
        for k in kinds
        if k.admission is not None and k.admission.mutate is not None
    ]
    out += [
        Hook(f"validate{k.kind.lower()}.lavaflow.io", f"/{k.plural}/validate", k, False, k.webhook_ops) for k in kinds
    ]
    return tuple(out)


#: Every webhook lavaflow serves: mutating ones (on create) first, then validating ones.
HOOKS = _hooks()
#: path -> (kind, mutate?)
ENDPOINTS = {h.path: (h.kind.kind, h.mutate) for h in HOOKS}


def _describe(kind: str, obj: dict[str, Any] | None, req: dict[str, Any]) -> str:
    meta = (obj or {}).get("metadata") or {}
    name = meta.get("name") or req.get("name") or meta.get("generateName", "") + "*"
    ns = meta.get("namespace") or req.get("namespace")
    return f"{kind} {ns + '/' if ns and kind != 'Queue' else ''}{name}"


def _refuse(uid: str, what: str, problems: list[adm.Problem], code: int = 422) -> dict[str, Any]:
    lines = [f"{what}: {p.path + ': ' if p.path else ''}{p.message}" for p in problems]
    return {
        "uid": uid,
        "allowed": False,
        "status": {"code": code, "reason": "Invalid" if code == 422 else "Forbidden", "message": "; ".join(lines)},
    }


def _allow(uid: str, patch: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return out


def json_patch(raw: dict[str, Any], before: Any, after: Any) -> list[dict[str, Any]]:
    """A JSONPatch turning ``raw`` into raw + (before -> after), at the level of top-level fields."""
    res = kind_info(type(after).__name__)
    old_d, new_d = codec.encode(before, res), codec.encode(after, res)
    merged = codec.merge3(raw, old_d, new_d)
    ops = []
    for key in ("metadata", "spec", "status"):
        if merged.get(key) != raw.get(key) and key in merged:
            ops.append({"op": "replace" if key in raw else "add", "path": f"/{key}", "value": merged[key]})
    return ops


def review(
    request: dict[str, Any],
    kind: str,
    mutate: bool,
    queues: Mapping[str, Queue] | None = None,
    podgroups: Callable[[], list[PodGroup]] | None = None,
    namespace_queue: Callable[[str], str | None] | None = None,
    scheduler_names: tuple[str, ...] = ("volcano", "lavaflow"),
) -> dict[str, Any]:
    """The AdmissionResponse for one AdmissionRequest (pure: no I/O)."""
    uid = request.get("uid", "")
    op = request.get("operation", "CREATE")
    raw = request.get("object") or {}
    old_raw = request.get("oldObject") or {}
    what = _describe(kind, raw or old_raw, request)
    res = kind_info(kind)
    rules = adm.RULES[kind]
    ctx = adm.Context(
        queues=queues,
        podgroups=podgroups or tuple,
        namespace_queue=namespace_queue,
        scheduler_name=scheduler_names[0],
        scheduler_names=scheduler_names,
        # a Command's target may be created after it (the controller waits): not checked here
        existing=None,
        templates=None,  # likewise a JobFlow's templates
    )
    if op == "DELETE":
        if rules.validate_delete is not None and not mutate:
            name = (old_raw.get("metadata") or {}).get("name") or request.get("name", "")
            problems = rules.validate_delete(name, ctx)
            return _refuse(uid, what, problems, 403) if problems else _allow(uid)
        return _allow(uid)
    if op not in ("CREATE", "UPDATE"):
        return _allow(uid)
    obj = codec.decode(res, raw)
    if obj is None:
        try:
            cast("type[BaseModel]", res.model).model_validate(raw)  # (every kind served here has a model)
        except Exception as exc:  # pydantic's report, field by field
            errs: list[Mapping[str, Any]] = getattr(exc, "errors", lambda: [])()
            problems = [adm.Problem(".".join(str(x) for x in e.get("loc", ())), e.get("msg", "")) for e in errs] or [
                adm.Problem("", str(exc))
            ]
            return _refuse(uid, what, problems)
        return _refuse(uid, what, [adm.Problem("", "cannot be read")])
    if not obj.metadata.namespace and res.namespaced:
        obj.metadata.namespace = request.get("namespace") or "default"
    if mutate:
        if rules.mutate is None or op != "CREATE":
            return _allow(uid)
        before = obj.model_copy(deep=True)
        rules.mutate(obj, ctx)
        return _allow(uid, json_patch(raw, before, obj))
    # validation
    if op == "UPDATE" and rules.validate_update is not None:
        problems = rules.validate_update(codec.decode(res, old_raw), obj, ctx)
    else:
        problems = rules.validate(obj, ctx)
    return _refuse(uid, what, problems) if problems else _allow(uid)


def admission_review(body: dict[str, Any], path: str, **kw: Any) -> dict[str, Any]:
    kind, mutate = ENDPOINTS[path]
    req = body.get("request") or {}
    resp = review(req, kind, mutate, **kw)
    return {"apiVersion": body.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview", "response": resp}


def apply_json_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the top-level add/replace/remove operations produced by :func:`json_patch`."""
    out = dict(obj)
    for op in patch:
        key = op["path"].lstrip("/")
        if "/" in key:
            raise ValueError(f"unsupported patch path {op['path']}")
        if op["op"] in ("add", "replace"):
            out[key] = op["value"]
        elif op["op"] == "remove":
            out.pop(key, None)
    return out


# ---------------------------------------------------------------------- certificates


def self_signed(service: str, namespace: str, directory: str | Path, days: int = 3650) -> tuple[str, str, bytes]:
    """A CA and a serving certificate for ``service.namespace.svc``: (cert file, key file, CA PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = _dt.datetime.now(_dt.UTC) - _dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"lavaflow-webhook-ca.{namespace}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
    ]
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}.{namespace}.svc")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    os.chmod(key_file, 0o600)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    (directory / "ca.crt").write_bytes(ca_pem)
    return str(cert_file), str(key_file), ca_pem


async def patch_ca_bundle(client: KubeClient, names: list[str], ca_pem: bytes) -> None:
    """Write the CA bundle into our Mutating/ValidatingWebhookConfigurations."""
    bundle = base64.b64encode(ca_pem).decode()
    for kind, plural in (
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
    ):
        for name in names:
            path = f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}"
            try:
                cfg = await client.request("GET", path)
            except Exception as exc:
                log.info("%s %s: %s", kind, name, exc)
                continue
            for wh in cfg.get("webhooks") or []:
                wh.setdefault("clientConfig", {})["caBundle"] = bundle
            await client.request("PUT", path, body=cfg)


# ---------------------------------------------------------------------- server


class WebhookServer:
    """AdmissionReview over HTTPS; queues, PodGroups and Namespaces come from informers."""

    def __init__(
        self, store: KubeStore | None = None, scheduler_names: tuple[str, ...] = ("volcano", "lavaflow")
    ) -> None:
        self.store = store
        self.scheduler_names = scheduler_names
        self.reviews = 0
        self.refused = 0

    def _queues(self) -> dict[str, Queue] | None:
        if self.store is None:
            return None
        return {q.name: q for q in self.store.list("Queue")}

    def _podgroups(self) -> list[PodGroup]:
        return self.store.list("PodGroup") if self.store is not None else []

    def _namespace_queue(self, ns: str) -> str | None:
        if self.store is None or "Namespace" not in self.store.informers:
            return None
        obj = self.store.get("Namespace", ns)
        return obj.metadata.annotations.get(QUEUE_ANNOTATION) if obj is not None else None

    def handle(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.reviews += 1
        out = admission_review(
            body,
            path,
            queues=self._queues(),
            podgroups=self._podgroups,
            namespace_queue=self._namespace_queue,
            scheduler_names=self.scheduler_names,
        )
        if not out["response"]["allowed"]:
            self.refused += 1
        return out

    def app(self) -> web.Application:
        from aiohttp import web

        async def handler(request: web.Request) -> web.Response:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"message": "body is not an AdmissionReview"}, status=400)
            return web.json_response(self.handle(request.path, body))

        async def ok(_req: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        for path in ENDPOINTS:
            app.router.add_post(path, handler)
        app.router.add_get("/healthz", ok)
        app.router.add_get("/readyz", ok)
        return app

    async def serve(self, host: str, port: int, cert_file: str, key_file: str) -> Served:
        from aiohttp import web

        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert_file, key_file)
        runner = web.AppRunner(self.app(), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=ctx)
        await site.start()
        from .metrics import Served

        return Served(runner, site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]


async def wait_forever(stop: asyncio.Event) -> None:
    await stop.wait()
