"""A process-backed kubelet: the pods bound to its nodes run as processes on this host.

``ProcessKubelet`` registers Nodes (capacity, allocatable, conditions, a Lease in
``kube-node-lease`` renewed as a kubelet renews it) and runs every pod bound to one of them:
each container's ``command`` + ``args`` is started, with its environment, as a process in its
own process group (the image is ignored: the process runs in this host's Python environment), and
the pod's status follows the processes as a kubelet reports it (Pending, Running with
``containerStatuses``, ``startTime``, ``podIP``, ``hostIP``, then Succeeded or Failed by the exit
codes; ``restartPolicy`` OnFailure and Always restart a container with a back-off). Deleting a pod
sends SIGTERM to its process groups, SIGKILL after the grace period, then finishes the deletion
(grace period 0), as :class:`.fake_kubelet.FakeKubelet` does. stdout and stderr are kept per
container and restart (:meth:`ProcessKubelet.logs`, :meth:`ProcessKubelet.log_path`). It talks
to the API server only through the client, so it serves the API double
(:mod:`.fake_apiserver`) and a real kube-apiserver alike.

There are no namespaces: a container sees the host's file system and network. What a pod would
see is provided so:

* **Volumes** are directories under the pod's directory: configMap, secret, downwardAPI and
  projected volumes written as the kubelet writes them (``..data`` swapped atomically; ``items``,
  ``mode`` and ``defaultMode`` honoured), configMap ones rewritten when the ConfigMap changes;
  emptyDir a fresh directory; hostPath the host's path itself; a persistentVolumeClaim a directory
  per claim, shared by every pod naming it. Each container has a *mount root* (env
  ``LAVAFLOW_MOUNT_ROOT``) in which each ``mountPath`` is a symbolic link to its volume, and every
  mount path in the container's ``command``, ``args``, literal ``env`` values and ``workingDir`` is
  rewritten to its place under the mount root (``/etc/mpi/hostfile`` becomes
  ``$LAVAFLOW_MOUNT_ROOT/etc/mpi/hostfile``). A program that builds such paths itself must prefix
  them with ``LAVAFLOW_MOUNT_ROOT``.
* **Networking**: each pod gets its own loopback address, ``127.x.y.z`` from a hash of its
  namespace and name (all of 127/8 is loopback on Linux), so two pods can bind the same port; the
  node (``hostIP``, hostNetwork pods) is 127.0.0.1. A server that binds the wildcard address
  still shares one port space with every other pod. There is no DNS: a pod's DNS names
  (``<hostname>.<subdomain>[.<namespace>[.svc[.cluster.local]]]``, as a headless Service gives
  them) are replaced by the pod's address in ``command``, ``args`` and literal ``env`` values, and
  listed in a hosts file (env ``LAVAFLOW_HOSTS_FILE``).
* **The API server**: ``KUBERNETES_SERVICE_HOST``/``PORT`` name the server the kubelet talks to,
  and ``KUBECONFIG`` a kubeconfig for it that holds the kubelet's own credentials (the processes run
  as the kubelet's user, who can read those anyway); the same token, the CA and the namespace are in
  ``/var/run/secrets/kubernetes.io/serviceaccount`` under the mount root. No TokenRequest is made.
* **Processes** start with the directory of ``python`` (default: this interpreter) first on
  ``PATH``, so that ``python`` and ``torchrun`` are that environment's.
* **Nodes** lose the ``node.kubernetes.io/not-ready`` taint the API server gives new Nodes (the
  node lifecycle controller's part, which a bare control plane does not run).

``python -m lavaflow.testing.process_kubelet --kubeconfig K --nodes 2`` runs one standalone.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import base64
import contextlib
import hashlib
import json
import logging
import math
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..api.core import PodPhase
from ..api.quantity import parse_quantity
from ..kube.client import ApiError
from ..kube.tasks import cancel_and_wait
from .fake_apiserver import _now
from .fake_kubelet import fake_node, force_delete, lift_not_ready_taint, list_watch

if TYPE_CHECKING:  # pragma: no cover
    from ..kube.client import KubeClient

log = logging.getLogger("lavaflow.testing.process_kubelet")

HOST_IP = "127.0.0.1"
NODE_LEASE_NAMESPACE = "kube-node-lease"
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
CLUSTER_DOMAIN = "cluster.local"
DEFAULT_GRACE = 30.0

# Process groups still alive in this interpreter: killed at exit, whatever happened to the kubelets.
_LIVE_GROUPS: set[int] = set()


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def _kill_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        _kill_group(pgid, signal.SIGKILL)


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGKILL the child when the kubelet dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    sig = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(1, sig)  # PR_SET_PDEATHSIG

    return preexec


# ---------------------------------------------------------------------------------------- helpers
def micro_now() -> str:
    """A MicroTime as Leases carry it."""
    import datetime as _dt

    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pod_ip(namespace: str, name: str, attempt: int = 0) -> str:
    """The loopback address of pod ``namespace/name``: 127.x.y.z with x in 1..254 (127.0/16 is
    left to the host), the same on every kubelet, so a pod's address is known before it runs."""
    h = int.from_bytes(hashlib.sha256(f"{namespace}/{name}/{attempt}".encode()).digest()[:4], "big")
    return f"127.{1 + h % 254}.{(h >> 8) % 256}.{1 + (h >> 16) % 254}"


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of command, args and env values: a defined ``$(VAR)`` is
    replaced, an undefined one kept as written, ``$$`` is ``$``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 == n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append("$(")
                i += 2
            else:
                name = text[i + 2 : end]
                out.append(env[name] if name in env else text[i : end + 1])
                i = end + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


def field_value(pod: dict[str, Any], path: str) -> str:
    """A downward API ``fieldRef.fieldPath`` of ``pod``."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    m = _FIELD.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f"{k}={json.dumps(v)}" for k, v in items)
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace", "default"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
        "status.hostIPs": ",".join(a.get("ip", "") for a in status.get("hostIPs") or []),
        "status.podIPs": ",".join(a.get("ip", "") for a in status.get("podIPs") or []),
    }
    if path not in simple:
        raise ValueError(f"unsupported fieldPath {path!r}")
    return "" if simple[path] is None else str(simple[path])


def resource_value(pod: dict[str, Any], ref: dict[str, Any], container: str, allocatable: Mapping[str, str]) -> str:
    """A downward API ``resourceFieldRef``: the container's limit (the node's allocatable when it
    has none) or request, divided by ``divisor`` and rounded up, as the kubelet gives it."""
    spec: dict[str, Any] = next(
        (c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == container), {}
    )
    kind, _, res = str(ref.get("resource", "")).partition(".")
    resources = spec.get("resources") or {}
    raw = (resources.get(kind) or {}).get(res)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(res)
    if raw is None:
        raw = allocatable.get(res, "0") if kind == "limits" else "0"
    value = parse_quantity(raw) / parse_quantity(ref.get("divisor") or "1")
    return str(math.ceil(value)) if value != value.to_integral_value() else str(int(value))


def write_atomic(target: Path, files: Mapping[str, tuple[bytes, int]]) -> bool:
    """Write ``files`` (relative path -> (content, mode)) into ``target`` as the kubelet's
    AtomicWriter does: into a fresh hidden directory, published by renaming the ``..data`` link,
    with a visible link per top-level name. Returns whether anything changed."""
    target.mkdir(parents=True, exist_ok=True)
    data = target / "..data"
    if data.is_symlink():
        cur = data.resolve()
        have = {
            str(p.relative_to(cur)): (p.read_bytes(), p.stat().st_mode & 0o7777) for p in cur.rglob("*") if p.is_file()
        }
        if have == dict(files):
            return False
    new = Path(tempfile.mkdtemp(prefix="..", dir=target))
    for rel, (content, mode) in files.items():
        p = new / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
        os.chmod(p, mode)
    os.chmod(new, 0o755)
    tmp = target / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(new.name, tmp)
    os.replace(tmp, data)
    tops = {rel.split("/", 1)[0] for rel in files}
    for top in tops:
        if not (target / top).is_symlink():
            os.symlink(f"..data/{top}", target / top)
    for entry in target.iterdir():
        if entry.name.startswith(".."):
            if entry != new and entry.name != "..data" and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
        elif entry.name not in tops:
            entry.unlink()
    return True


def _boundary_pattern(words: Sequence[str], after: str) -> re.Pattern[str] | None:
    if not words:
        return None
    alts = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![\w.\-/])({alts}){after}")


def mount_rewriter(mount_paths: Sequence[str], root: Path) -> Callable[[str], str]:
    """Rewrites each path under one of ``mount_paths`` in a text to its place under ``root`` (the
    container's mount root), where the path is at the start of the text or after a character that
    cannot be in a path (space, ``=``, ``:``, a quote...). A path that exists on the host but not
    under ``root`` is left alone (the host's own files, e.g. this Python under a ``/work`` mount)."""
    pattern = _boundary_pattern(mount_paths, r"((?:/[^\s:;,'\"=)\]}]*)?)(?![\w.\-])")
    if pattern is None:
        return lambda text: text

    def one(m: re.Match[str]) -> str:
        path = m.group(1) + m.group(2)
        inside = str(root) + path
        if os.path.lexists(path) and not os.path.lexists(inside):
            return path
        return inside

    return lambda text: pattern.sub(one, text)


def _credential(value: str | bytes | None, path: str | None) -> bytes | None:
    """A credential given inline or as a file (None: neither, or the file cannot be read)."""
    if value:
        return value.encode() if isinstance(value, str) else bytes(value)
    if path:
        try:
            return Path(path).read_bytes()
        except OSError:
            return None
    return None


def _host_memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1])}Ki"
    except OSError:
        pass
    return "8Gi"


# ---------------------------------------------------------------------------------------- containers
class _Container:
    """One container of a pod: its process, restarts and state (as ``containerStatuses`` has it)."""

    def __init__(self, spec: dict[str, Any], init: bool) -> None:
        self.spec = spec
        self.name = str(spec.get("name") or "main")
        self.init = init
        self.proc: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self.started = False  # ever started
        self.done = False  # terminated and not to be restarted
        self.exit_code: int | None = None
        self.state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: dict[str, Any] = {}
        self.started_at: str | None = None

    def status(self) -> dict[str, Any]:
        running = "running" in self.state
        out = {
            "name": self.name,
            "image": str(self.spec.get("image") or "process"),
            "imageID": "",
            "ready": running and not self.init,
            "started": running,
            "restartCount": self.restarts,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.proc is not None:
            out["containerID"] = f"process://{self.proc.pid}"
        return out


class _PodRun:
    """A bound pod's processes, from volumes and environment to the final status write."""

    def __init__(self, kubelet: ProcessKubelet, pod: dict[str, Any]) -> None:
        self.k = kubelet
        self.pod = pod
        meta, spec = pod["metadata"], pod.get("spec") or {}
        self.ns, self.name, self.uid = meta.get("namespace", "default"), meta["name"], meta.get("uid", "")
        self.key = f"{self.ns}/{self.name}"
        self.node = spec.get("nodeName", "")
        self.policy = spec.get("restartPolicy") or "Always"
        self.dir = kubelet.root / "pods" / f"{self.ns}_{self.name}_{self.uid[:8]}"
        self.inits = [_Container(c, True) for c in spec.get("initContainers") or []]
        self.containers = [_Container(c, False) for c in spec.get("containers") or []]
        self.ip = HOST_IP
        self.start_time: str | None = None
        self.prepared = False
        self.failed: tuple[str, str] | None = None  # (reason, message) of a pod that cannot run
        self.stopping = False
        self.kill_at = math.inf  # loop time at which SIGKILL follows the SIGTERM
        self.finalize = False  # delete the pod (grace 0) once its processes are gone
        self.gone = False  # the pod no longer exists on the server
        self.stop_event = asyncio.Event()
        self.sources: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._lock = asyncio.Lock()
        self._sent: dict[str, Any] | None = None
        self._cond_times: dict[str, tuple[str, str]] = {}
        self.task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ control
    def terminate(self, grace: float, finalize: bool) -> None:
        """Stop the pod's processes: SIGTERM now, SIGKILL after ``grace`` seconds (a shorter
        grace given later wins); with ``finalize``, delete the pod once they are gone."""
        loop = asyncio.get_running_loop()
        self.finalize = self.finalize or finalize
        self.kill_at = min(self.kill_at, loop.time() + max(grace, 0.0))
        if not self.stopping:
            self.stopping = True
            self.stop_event.set()
        if self.task is not None and self.task.done() and self.finalize and not self.gone:
            self.gone = True
            self.k._spawn(force_delete(self.k.client, self.ns, self.name, self.uid))

    async def _sleep(self, seconds: float) -> bool:
        """Sleep unless the pod is being stopped; True when it is."""
        try:
            await asyncio.wait_for(self.stop_event.wait(), seconds)
        except TimeoutError:
            pass
        return self.stopping

    async def run(self) -> None:
        try:
            try:
                if await self._prepare():
                    if await self._run_inits():
                        await asyncio.gather(*(self._supervise(c) for c in self.containers))
            except Exception as exc:
                log.exception("pod %s", self.key)
                self.failed = ("ProcessKubeletError", f"{type(exc).__name__}: {exc}")
            await self._report()
        finally:
            self._kill_all(signal.SIGKILL)
            self.k._release_ip(self)
            if self.finalize and not self.gone:
                self.gone = True
                await force_delete(self.k.client, self.ns, self.name, self.uid)

    async def reap(self) -> None:
        """SIGKILL whatever is left of the pod's processes and wait for them."""
        self._kill_all(signal.SIGKILL)
        for c in self.inits + self.containers:
            if c.proc is not None and c.proc.returncode is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(c.proc.wait(), 5)
            if c.proc is not None and c.proc.returncode is not None:
                _LIVE_GROUPS.discard(c.proc.pid)

    def _kill_all(self, sig: int) -> None:
        for c in self.inits + self.containers:
            if c.proc is not None:
                _kill_group(c.proc.pid, sig)
                if c.proc.returncode is not None:
                    _LIVE_GROUPS.discard(c.proc.pid)

    # ------------------------------------------------------------------ preparation
    async def _prepare(self) -> bool:
        """Address, directories, volumes; waits (Pending) while a ConfigMap or Secret it needs
        does not exist. False when the pod was stopped meanwhile."""
        self.ip = HOST_IP if (self.pod.get("spec") or {}).get("hostNetwork") else self.k._assign_ip(self)
        self.start_time = _now()
        (self.dir / "volumes").mkdir(parents=True, exist_ok=True)
        self._write_credentials()
        while True:
            missing = await self._fetch_sources()
            if not missing:
                try:
                    self.write_volumes()
                    for c in self.inits + self.containers:
                        self._environment(c)
                    break
                except (KeyError, ValueError) as exc:
                    missing = [str(exc).strip("'\"")]
            self._set_waiting("CreateContainerConfigError", "; ".join(missing))
            await self._report()
            if await self._sleep(self.k.retry_interval):
                return False
        self.prepared = True
        return not self.stopping

    def _references(self) -> set[tuple[str, str]]:
        """The (kind, name) of every ConfigMap and Secret the pod's volumes and env read."""
        spec = self.pod.get("spec") or {}
        refs: set[tuple[str, str]] = set()
        for v in spec.get("volumes") or []:
            if v.get("configMap"):
                refs.add(("ConfigMap", v["configMap"].get("name", "")))
            if v.get("secret"):
                refs.add(("Secret", v["secret"].get("secretName", "")))
            for src in (v.get("projected") or {}).get("sources") or []:
                if src.get("configMap"):
                    refs.add(("ConfigMap", src["configMap"].get("name", "")))
                if src.get("secret"):
                    refs.add(("Secret", src["secret"].get("name", "")))
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            for e in c.get("envFrom") or []:
                if e.get("configMapRef"):
                    refs.add(("ConfigMap", e["configMapRef"].get("name", "")))
                if e.get("secretRef"):
                    refs.add(("Secret", e["secretRef"].get("name", "")))
            for e in c.get("env") or []:
                vf = e.get("valueFrom") or {}
                if vf.get("configMapKeyRef"):
                    refs.add(("ConfigMap", vf["configMapKeyRef"].get("name", "")))
                if vf.get("secretKeyRef"):
                    refs.add(("Secret", vf["secretKeyRef"].get("name", "")))
        return refs

    async def _fetch_sources(self) -> list[str]:
        """Read every referenced ConfigMap and Secret (ConfigMaps from the kubelet's watch when it
        has them); the names of the missing ones that are not optional."""
        for kind, name in self._references():
            self.sources[(kind, name)] = await self.k._source(kind, self.ns, name)
        return [
            f"{kind.lower()} {name!r} not found"
            for (kind, name), obj in sorted(self.sources.items())
            if obj is None and not self._optional(kind, name)
        ]

    def _optional(self, kind: str, name: str) -> bool:
        """Whether every reference to ``kind/name`` is optional."""
        spec = self.pod.get("spec") or {}
        flags: list[bool] = []

        def see(ref: dict[str, Any] | None, ref_kind: str, field: str = "name") -> None:
            if ref and ref_kind == kind and ref.get(field) == name:
                flags.append(bool(ref.get("optional")))

        for v in spec.get("volumes") or []:
            see(v.get("configMap"), "ConfigMap")
            see(v.get("secret"), "Secret", "secretName")
            for src in (v.get("projected") or {}).get("sources") or []:
                see(src.get("configMap"), "ConfigMap")
                see(src.get("secret"), "Secret")
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            for e in c.get("envFrom") or []:
                see(e.get("configMapRef"), "ConfigMap")
                see(e.get("secretRef"), "Secret")
            for e in c.get("env") or []:
                vf = e.get("valueFrom") or {}
                see(vf.get("configMapKeyRef"), "ConfigMap")
                see(vf.get("secretKeyRef"), "Secret")
        return all(flags)

    def _source_data(self, kind: str, name: str) -> dict[str, bytes] | None:
        obj = self.sources.get((kind, name))
        if obj is None:
            return None
        if kind == "Secret":
            out = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
            out.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
            return out
        out = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
        out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return out

    def _key_files(self, src: dict[str, Any], kind: str, name: str, mode: int) -> dict[str, tuple[bytes, int]]:
        data = self._source_data(kind, name)
        if data is None:
            return {}
        items = src.get("items")
        if not items:
            return {k: (v, mode) for k, v in data.items()}
        out = {}
        for it in items:
            if it.get("key") not in data:
                if src.get("optional"):
                    continue
                raise KeyError(f"{kind.lower()} {name!r} has no key {it.get('key')!r}")
            out[it.get("path") or it["key"]] = (data[it["key"]], int(it.get("mode") or mode))
        return out

    def _downward_files(self, items: list[dict[str, Any]], mode: int) -> dict[str, tuple[bytes, int]]:
        out = {}
        for it in items:
            if it.get("fieldRef"):
                value = field_value(self._live_pod(), it["fieldRef"].get("fieldPath", ""))
            else:
                ref = it.get("resourceFieldRef") or {}
                value = resource_value(self.pod, ref, ref.get("containerName", ""), self.k._allocatable(self.node))
            out[it["path"]] = (value.encode(), int(it.get("mode") or mode))
        return out

    def volume_files(self, vol: dict[str, Any]) -> dict[str, tuple[bytes, int]] | None:
        """The files of a configMap, secret, downwardAPI or projected volume (None: another type)."""
        for kind, field, name_field in (("ConfigMap", "configMap", "name"), ("Secret", "secret", "secretName")):
            src = vol.get(field)
            if src is not None:
                return self._key_files(src, kind, src.get(name_field, ""), int(src.get("defaultMode") or 0o644))
        if vol.get("downwardAPI") is not None:
            d = vol["downwardAPI"]
            return self._downward_files(d.get("items") or [], int(d.get("defaultMode") or 0o644))
        if vol.get("projected") is None:
            return None
        mode = int(vol["projected"].get("defaultMode") or 0o644)
        files: dict[str, tuple[bytes, int]] = {}
        for src in vol["projected"].get("sources") or []:
            if src.get("configMap"):
                files.update(self._key_files(src["configMap"], "ConfigMap", src["configMap"].get("name", ""), mode))
            elif src.get("secret"):
                files.update(self._key_files(src["secret"], "Secret", src["secret"].get("name", ""), mode))
            elif src.get("downwardAPI"):
                files.update(self._downward_files(src["downwardAPI"].get("items") or [], mode))
            elif src.get("serviceAccountToken"):
                token = self.k._token()
                files[src["serviceAccountToken"].get("path", "token")] = ((token or "").encode(), mode)
        return files

    def volume_dir(self, vol: dict[str, Any]) -> Path:
        """Where a volume lives on this host (created if need be)."""
        path: Path
        name = vol.get("name", "")
        if vol.get("hostPath") is not None:
            hp = vol["hostPath"]
            path = Path(hp.get("path", "/"))
            kind = hp.get("type") or ""
            if kind in ("", "DirectoryOrCreate") and not path.exists():
                path.mkdir(parents=True, exist_ok=True)
            elif kind == "FileOrCreate" and not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            return path
        if vol.get("persistentVolumeClaim") is not None:
            path = self.k.root / "claims" / self.ns / vol["persistentVolumeClaim"].get("claimName", name)
        else:
            path = self.dir / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_volumes(self, only: tuple[str, str] | None = None) -> None:
        """(Re)write the pod's file volumes; ``only``: those reading that (kind, name)."""
        for vol in (self.pod.get("spec") or {}).get("volumes") or []:
            if only is not None and not self._reads(vol, only):
                continue
            files = self.volume_files(vol)
            if files is not None:
                write_atomic(self.volume_dir(vol), files)
            elif only is None:
                self.volume_dir(vol)

    @staticmethod
    def _reads(vol: dict[str, Any], ref: tuple[str, str]) -> bool:
        kind, name = ref
        if kind == "Pod":
            return bool(vol.get("downwardAPI") or vol.get("projected"))
        field, name_field = ("configMap", "name") if kind == "ConfigMap" else ("secret", "secretName")
        if (vol.get(field) or {}).get(name_field) == name:
            return True
        return any((s.get(field) or {}).get("name") == name for s in (vol.get("projected") or {}).get("sources") or [])

    def refresh(self, kind: str, obj: dict[str, Any] | None) -> None:
        """A ConfigMap it reads (or, kind ``Pod``, the pod itself) changed: rewrite what reads it."""
        if kind == "Pod":
            assert obj is not None
            self.pod = obj
            ref = ("Pod", self.name)
        else:
            name = (obj or {}).get("metadata", {}).get("name", "")
            ref = (kind, name)
            if ref not in self.sources:
                return
            self.sources[ref] = obj
        if not self.prepared or self.stopping:
            return
        try:
            self.write_volumes(only=ref)
        except (KeyError, ValueError, OSError) as exc:
            log.warning("pod %s: volumes not refreshed: %s", self.key, exc)

    def _write_credentials(self) -> None:
        """The service account directory and the kubeconfig its processes get."""
        sa = self.dir / "serviceaccount"
        sa.mkdir(parents=True, exist_ok=True)
        spec = self.pod.get("spec") or {}
        mount = spec.get("automountServiceAccountToken", True) is not False
        files = {"namespace": (self.ns.encode(), 0o644)}
        ca = self.k._ca()
        if ca:
            files["ca.crt"] = (ca, 0o644)
        token = self.k._token() if mount else None
        if token:
            files["token"] = (token.encode(), 0o600)
        write_atomic(sa, files)
        self.k._write_kubeconfig(self.dir / "kubeconfig", sa, self.ns, with_user=mount)

    # ------------------------------------------------------------------ containers
    def _live_pod(self) -> dict[str, Any]:
        """The pod as the downward API sees it (with the status this kubelet gives it)."""
        pod = dict(self.pod)
        status = dict(pod.get("status") or {})
        status.update(
            podIP=self.ip,
            podIPs=[{"ip": self.ip}],
            hostIP=HOST_IP,
            hostIPs=[{"ip": HOST_IP}],
            phase=status.get("phase"),
        )
        pod["status"] = status
        return pod

    def _mounts(self, c: _Container) -> list[tuple[str, Path]]:
        """(mountPath, host path) of the container's mounts, the service account's included."""
        vols = {v.get("name"): v for v in (self.pod.get("spec") or {}).get("volumes") or []}
        out = []
        for m in c.spec.get("volumeMounts") or []:
            vol = vols.get(m.get("name"))
            path = str(m.get("mountPath", "")).rstrip("/")
            if vol is None or not path:
                continue
            src = self.volume_dir(vol)
            if m.get("subPath"):
                src = src / m["subPath"]
            out.append((path, src))
        if not any(p == SA_PATH for p, _ in out):
            out.append((SA_PATH, self.dir / "serviceaccount"))
        return out

    def mount_root(self, c: _Container) -> Path:
        return self.dir / "root" / c.name

    def _link_mounts(self, c: _Container) -> list[str]:
        """Make the container's mount root (a link per mountPath); its mount paths."""
        root = self.mount_root(c)
        root.mkdir(parents=True, exist_ok=True)
        paths = []
        for path, src in sorted(self._mounts(c), key=lambda m: len(m[0])):
            link = root / path.lstrip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink():
                link.unlink()
            elif link.exists():
                log.warning("pod %s: %s is not mounted: %s exists", self.key, path, link)
                continue
            os.symlink(src, link)
            paths.append(path)
        return paths

    def _environment(self, c: _Container) -> tuple[dict[str, str], Callable[[str], str]]:
        """The process's environment, and the rewriting of a command word (expansion, pod names,
        mount paths). Raises KeyError/ValueError for a missing key or an unknown field."""
        spec_env = c.spec.get("env") or []
        root = self.mount_root(c)
        mounts = mount_rewriter([p for p, _ in self._mounts(c)], root)
        names = self.k.dns_names(self.ns)
        names_re = _boundary_pattern(list(names), r"(?![\w\-]|\.\w)")
        sub = (self.pod.get("spec") or {}).get("subdomain")
        # <host>.<own subdomain> of a pod not seen yet: the address it will get (hostname = pod name)
        peers_re = None
        if sub:
            tail = rf"(?:\.{re.escape(self.ns)}(?:\.svc(?:\.{re.escape(CLUSTER_DOMAIN)})?)?)?"
            peers_re = re.compile(
                rf"(?<![\w.\-/])([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)\.{re.escape(sub)}{tail}(?![\w\-]|\.\w)"
            )

        def rewrite(text: str) -> str:
            if names_re is not None:
                text = names_re.sub(lambda m: names[m.group(1)], text)
            if peers_re is not None:
                text = peers_re.sub(lambda m: self.k.planned_ip(self.ns, m.group(1)), text)
            return mounts(text)

        server = urlsplit(self.k.client.config.server)
        kubelet_env = {
            "HOSTNAME": (self.pod.get("spec") or {}).get("hostname") or self.name,
            "KUBERNETES_SERVICE_HOST": server.hostname or HOST_IP,
            "KUBERNETES_SERVICE_PORT": str(server.port or (443 if server.scheme == "https" else 80)),
            "KUBECONFIG": str(self.dir / "kubeconfig"),
            "LAVAFLOW_MOUNT_ROOT": str(root),
            "LAVAFLOW_POD_DIR": str(self.dir),
            "LAVAFLOW_HOSTS_FILE": str(self.k.root / "hosts"),
        }
        own: dict[str, str] = {}
        for e in c.spec.get("envFrom") or []:
            kind, ref = ("ConfigMap", e["configMapRef"]) if e.get("configMapRef") else ("Secret", e.get("secretRef"))
            for k, v in (self._source_data(kind, (ref or {}).get("name", "")) or {}).items():
                own[str(e.get("prefix") or "") + k] = v.decode("utf-8", "replace")
        pod = self._live_pod()
        for e in spec_env:
            name = e.get("name", "")
            if "value" in e or not e.get("valueFrom"):
                own[name] = rewrite(expand(str(e.get("value", "")), {**kubelet_env, **own}))
                continue
            vf = e["valueFrom"]
            if vf.get("fieldRef"):
                own[name] = field_value(pod, vf["fieldRef"].get("fieldPath", ""))
            elif vf.get("resourceFieldRef"):
                ref = vf["resourceFieldRef"]
                own[name] = resource_value(pod, ref, ref.get("containerName") or c.name, self.k._allocatable(self.node))
            else:
                kind, ref = (
                    ("ConfigMap", vf["configMapKeyRef"])
                    if vf.get("configMapKeyRef")
                    else ("Secret", vf["secretKeyRef"])
                )
                data = self._source_data(kind, ref.get("name", ""))
                if data is None or ref.get("key") not in data:
                    if ref.get("optional"):
                        continue
                    raise KeyError(f"{kind.lower()} {ref.get('name')!r} has no key {ref.get('key')!r}")
                own[name] = data[ref["key"]].decode("utf-8", "replace")
        env = dict(os.environ) if self.k.inherit_env else {"PATH": os.environ.get("PATH", os.defpath)}
        env["PATH"] = os.pathsep.join([os.path.dirname(self.k.python), env.get("PATH", os.defpath)])
        if env.get("PYTHONPATH"):  # the process starts elsewhere: relative entries made absolute
            env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
        env.update(kubelet_env)
        env.update(own)
        mapping = {**kubelet_env, **own}
        return env, lambda word: rewrite(expand(word, mapping))

    async def _start(self, c: _Container) -> None:
        """Start the container's process (or record why it could not start)."""
        c.started_at, c.exit_code = _now(), None
        logs = self.k.log_path(self.ns, self.name, c.name, restart=c.restarts, uid=self.uid)
        logs.parent.mkdir(parents=True, exist_ok=True)
        with open(logs, "ab") as out:
            try:
                self._link_mounts(c)
                env, word = self._environment(c)
                argv = [word(str(a)) for a in (c.spec.get("command") or []) + (c.spec.get("args") or [])]
                cwd = self.mount_root(c)
                if c.spec.get("workingDir"):
                    cwd = Path(word(str(c.spec["workingDir"])))
                    if not cwd.is_dir():
                        cwd = self.mount_root(c) / str(c.spec["workingDir"]).lstrip("/")
                        cwd.mkdir(parents=True, exist_ok=True)
            except (KeyError, ValueError, OSError) as exc:
                self._start_failed(c, out, f"cannot prepare the container: {exc}")
                return
            if not argv:
                message = "no command: the process kubelet runs a container's command and args, not its image"
                self._start_failed(c, out, message)
                return
            try:
                c.proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                    env=env,
                    cwd=str(cwd),
                    start_new_session=True,
                    preexec_fn=self.k._preexec,
                )
            except OSError as exc:
                self._start_failed(c, out, f"{argv[0]}: {exc.strerror or exc}")
                return
        _LIVE_GROUPS.add(c.proc.pid)
        self.k.pids.append(c.proc.pid)
        c.started = True
        c.state = {"running": {"startedAt": c.started_at}}

    def _start_failed(self, c: _Container, out: Any, message: str) -> None:
        out.write(f"process kubelet: {message}\n".encode())
        c.proc = None
        c.started = True
        c.exit_code = 128
        c.state = {
            "terminated": {
                "exitCode": 128,
                "reason": "StartError",
                "message": message,
                "startedAt": c.started_at,
                "finishedAt": _now(),
            }
        }

    async def _wait(self, c: _Container) -> int:
        """Until the container's process ends (stopping it when the pod is stopped); its exit code."""
        proc = c.proc
        if proc is None:
            return c.exit_code if c.exit_code is not None else 128
        done = asyncio.ensure_future(proc.wait())
        stop = asyncio.ensure_future(self.stop_event.wait())
        try:
            await asyncio.wait({done, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not done.done():
                _kill_group(proc.pid, signal.SIGTERM)
                loop = asyncio.get_running_loop()
                while not done.done():
                    left = self.kill_at - loop.time()
                    if left <= 0:
                        _kill_group(proc.pid, signal.SIGKILL)
                        await done
                        break
                    await asyncio.wait({done}, timeout=min(left, 0.1))
        finally:
            stop.cancel()
            if not done.done():
                done.cancel()
        _kill_group(proc.pid, signal.SIGKILL)  # what the container's main process left behind
        _LIVE_GROUPS.discard(proc.pid)
        rc = proc.returncode if proc.returncode is not None else -9
        code = rc if rc >= 0 else 128 - rc
        c.exit_code = code
        term: dict[str, Any] = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": c.started_at,
            "finishedAt": _now(),
            "containerID": f"process://{proc.pid}",
        }
        if rc < 0:
            term["signal"] = -rc
        c.state = {"terminated": term}
        return code

    async def _run_until_done(self, c: _Container, restart: Callable[[int], bool]) -> int | None:
        """Run a container, restarting it (with back-off) while ``restart(exit code)``; its last
        exit code, or None when the pod was stopped first."""
        while True:
            if self.stopping:
                return None
            await self._start(c)
            await self._report()
            code = await self._wait(c)
            await self._report()
            if self.stopping:
                return None
            if not restart(code):
                c.done = True
                return code
            delay = min(self.k.backoff[0] * 2 ** min(c.restarts, 30), self.k.backoff[1])
            c.last_state, c.state = (
                c.state,
                {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off {delay:g}s restarting failed container",
                    }
                },
            )
            await self._report()
            if await self._sleep(delay):
                return None
            c.restarts += 1

    async def _run_inits(self) -> bool:
        for c in self.inits:
            code = await self._run_until_done(c, lambda code: code != 0 and self.policy != "Never")
            if code is None:
                return False
            if code != 0:
                self.failed = ("InitContainerFailed", f"init container {c.name!r} exited with {code}")
                return False
        return True

    async def _supervise(self, c: _Container) -> None:
        await self._run_until_done(
            c, lambda code: self.policy == "Always" or (self.policy == "OnFailure" and code != 0)
        )

    def _set_waiting(self, reason: str, message: str) -> None:
        for c in self.inits + self.containers:
            if not c.started:
                c.state = {"waiting": {"reason": reason, "message": message}}

    # ------------------------------------------------------------------ status
    def phase(self) -> PodPhase:
        if self.failed is not None:
            return PodPhase.FAILED
        mains = self.containers
        if not self.prepared or not all(c.done for c in self.inits) or not mains:
            return PodPhase.PENDING
        if any("running" in c.state for c in mains):
            return PodPhase.RUNNING
        if any(not c.started for c in mains):
            return PodPhase.PENDING
        if all(c.done or (self.stopping and "terminated" in c.state) for c in mains):
            return PodPhase.SUCCEEDED if all(c.exit_code == 0 for c in mains) else PodPhase.FAILED
        return PodPhase.RUNNING

    def _condition(self, ctype: str, ok: bool, reason: str = "") -> dict[str, Any]:
        status = "True" if ok else "False"
        have = self._cond_times.get(ctype)
        if have is None or have[0] != status:
            self._cond_times[ctype] = have = (status, _now())
        # reason always written: the server merges conditions by type, so an old one would stay
        return {"type": ctype, "status": status, "lastTransitionTime": have[1], "reason": "" if ok else reason}

    def status(self) -> dict[str, Any]:
        phase = self.phase()
        running = phase == PodPhase.RUNNING and all("running" in c.state for c in self.containers)
        done = phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)
        inits_done = all(c.done for c in self.inits)
        not_ready = "PodCompleted" if done else "ContainersNotReady"
        status: dict[str, Any] = {
            "phase": phase,
            "hostIP": HOST_IP,
            "hostIPs": [{"ip": HOST_IP}],
            "conditions": [
                self._condition("PodReadyToStartContainers", self.prepared),
                self._condition("Initialized", inits_done, "ContainersNotInitialized"),
                self._condition("ContainersReady", running, not_ready),
                self._condition("Ready", running, not_ready),
            ],
            "containerStatuses": [c.status() for c in self.containers],
        }
        if self.start_time:
            status["startTime"] = self.start_time
        if self.prepared:
            status.update(podIP=self.ip, podIPs=[{"ip": self.ip}])
        if self.inits:
            status["initContainerStatuses"] = [c.status() for c in self.inits]
        if self.failed is not None:
            status["reason"], status["message"] = self.failed
        return status

    async def _report(self) -> None:
        """Write the pod's status if it changed (a strategic merge patch of the status)."""
        async with self._lock:
            if self.gone:
                return
            status = self.status()
            if status == self._sent:
                return
            path = f"/api/v1/namespaces/{self.ns}/pods/{self.name}/status"
            for attempt in range(3):
                try:
                    await self.k.client.request(
                        "PATCH",
                        path,
                        body={"metadata": {"uid": self.uid}, "status": status},
                        content_type="application/strategic-merge-patch+json",
                    )
                    self._sent = status
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if getattr(exc, "status", None) in (404, 409, 422):
                        log.debug("pod %s: status not written: %s", self.key, exc)
                        return
                    await asyncio.sleep(0.2 * (attempt + 1))


# ---------------------------------------------------------------------------------------- kubelet
class ProcessKubelet:
    """Nodes whose pods run as local processes (see the module docstring).

    ``nodes``: how many (named ``{node_prefix}-{i}``) or their names. ``cpu``/``memory`` (default:
    this host's), ``pods`` and ``gpus`` (a fake ``nvidia.com/gpu`` count) are each node's capacity
    and allocatable. ``root``: where pods' directories and logs go (default: a temporary directory
    removed by :meth:`stop`). ``backoff``: a restarted container's first and longest back-off
    (a kubelet's 10 s and 300 s). ``heartbeat``: seconds between Lease renewals;
    ``status_interval``: between node status writes. ``distinct_ips``: False gives every pod
    127.0.0.1. ``inherit_env``: the processes start from this process's environment (else from
    PATH alone). ``python``: the interpreter whose directory goes first on the processes' PATH
    (so that ``python``, ``torchrun`` and the like are that environment's); default this one.
    ``clear_not_ready_taint``: remove the ``node.kubernetes.io/not-ready`` taint the API server
    puts on a new Node, as the node lifecycle controller a bare control plane lacks would.
    """

    def __init__(
        self,
        client: KubeClient,
        nodes: int | Sequence[str] = 1,
        *,
        node_prefix: str = "process-node",
        cpu: str | None = None,
        memory: str | None = None,
        pods: str = "110",
        gpus: int = 0,
        labels: dict[str, str] | None = None,
        root: str | Path | None = None,
        backoff: tuple[float, float] = (10.0, 300.0),
        heartbeat: float = 10.0,
        status_interval: float = 60.0,
        lease_duration: int = 40,
        distinct_ips: bool = True,
        inherit_env: bool = True,
        retry_interval: float = 1.0,
        stop_grace: float = 2.0,
        python: str | None = None,
        clear_not_ready_taint: bool = True,
    ) -> None:
        self.client = client
        self.python = python or sys.executable
        self.clear_not_ready_taint = clear_not_ready_taint
        names = [f"{node_prefix}-{i}" for i in range(nodes)] if isinstance(nodes, int) else list(nodes)
        self.node_names = names
        capacity = {"cpu": cpu or str(os.cpu_count() or 1), "memory": memory or _host_memory(), "pods": pods}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        self.capacity = capacity
        self.labels = labels or {}
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="lavaflow-kubelet-")) if root is None else Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.backoff = backoff
        self.heartbeat = heartbeat
        self.status_interval = status_interval
        self.lease_duration = lease_duration
        self.distinct_ips = distinct_ips
        self.inherit_env = inherit_env
        self.retry_interval = retry_interval
        self.stop_grace = stop_grace
        # (namespace, hostname, subdomain, address) of every pod of the cluster with a subdomain
        self.dns: dict[str, tuple[str, str, str, str]] = {}
        self._hosts_task: asyncio.Task[None] | None = None
        self.runs: dict[str, _PodRun] = {}  # by uid, finished ones included
        self.latest: dict[str, str] = {}  # namespace/name -> uid of the pod run last under that name
        self.configmaps: dict[tuple[str, str], dict[str, Any]] = {}
        self.pids: list[int] = []  # every process started (tests check none is left)
        self.node_uids: dict[str, str] = {}
        self._ips: dict[str, str] = {}  # address -> uid of the pod holding it
        self._synced = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._preexec = _parent_death_signal()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Register the nodes, then run their pods (returns once the nodes exist)."""
        for name in self.node_names:
            await self._register(name)
        loop = asyncio.get_running_loop()
        self._loops = [
            loop.create_task(
                list_watch(self.client, "/api/v1/configmaps", self._configmap_event, self._configmap_list)
            ),
            loop.create_task(self._pods_after_sync()),
            loop.create_task(self._heartbeats()),
        ]

    async def stop(self, delete_nodes: bool = False) -> None:
        """Stop every pod's processes (SIGTERM, SIGKILL after ``stop_grace``), leaving the pods
        as they are on the server; with ``delete_nodes``, delete the nodes and their Leases."""
        await cancel_and_wait(self._loops)
        runs = [r for r in self.runs.values() if r.task is not None and not r.task.done()]
        for r in runs:
            r.terminate(self.stop_grace, finalize=False)
            r.gone = True  # no status writes after the kubelet stopped
        if runs:
            await asyncio.wait([r.task for r in runs if r.task is not None], timeout=self.stop_grace + 5)
        await cancel_and_wait(list(self._tasks) + [r.task for r in runs])
        for r in self.runs.values():
            await r.reap()
        if delete_nodes:
            for name in self.node_names:
                for path in (
                    f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases/{name}",
                    f"/api/v1/nodes/{name}",
                ):
                    with contextlib.suppress(Exception):
                        await self.client.request("DELETE", path)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    # ------------------------------------------------------------------ inspection
    def run_of(self, namespace: str, name: str) -> _PodRun | None:
        uid = self.latest.get(f"{namespace}/{name}")
        return None if uid is None else self.runs.get(uid)

    def pod_dir(self, namespace: str, name: str) -> Path | None:
        """The directory of the pod run last under that name (volumes, mount roots, logs)."""
        r = self.run_of(namespace, name)
        return None if r is None else r.dir

    def log_path(
        self,
        namespace: str,
        name: str,
        container: str | None = None,
        restart: int | None = None,
        uid: str | None = None,
    ) -> Path:
        """The log of a container (default: the pod's first) at a restart (default: the latest):
        ``<pod dir>/logs/<container>/<restart>.log``, stdout and stderr together."""
        r = self.runs.get(uid) if uid else self.run_of(namespace, name)
        if r is None:
            raise KeyError(f"pod {namespace}/{name} did not run here")
        c = next((x for x in r.containers + r.inits if container in (None, x.name)), None)
        if c is None:
            raise KeyError(f"pod {namespace}/{name} has no container {container!r}")
        return r.dir / "logs" / c.name / f"{c.restarts if restart is None else restart}.log"

    def logs(self, namespace: str, name: str, container: str | None = None, previous: bool = False) -> str:
        """What a container wrote (``previous``: before its latest restart), as ``kubectl logs``."""
        path = self.log_path(namespace, name, container)
        if previous:
            restart = int(path.stem) - 1
            if restart < 0:
                raise KeyError(f"container of pod {namespace}/{name} was not restarted")
            path = path.with_name(f"{restart}.log")
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # ------------------------------------------------------------------ addresses
    def planned_ip(self, namespace: str, name: str) -> str:
        return pod_ip(namespace, name) if self.distinct_ips else HOST_IP

    def _assign_ip(self, r: _PodRun) -> str:
        if not self.distinct_ips:
            return HOST_IP
        for attempt in range(64):
            ip = pod_ip(r.ns, r.name, attempt)
            if self._ips.get(ip, r.uid) == r.uid:
                self._ips[ip] = r.uid
                if attempt:
                    log.warning("pod %s: address %s taken, using %s", r.key, pod_ip(r.ns, r.name), ip)
                return ip
        raise RuntimeError("no free loopback address")

    def dns_names(self, namespace: str) -> dict[str, str]:
        """Pod DNS names (``<hostname>.<subdomain>.<namespace>.svc.cluster.local`` and its shorter
        forms; ``<hostname>.<subdomain>`` for pods of ``namespace``) -> address."""
        out = {}
        for ns, host, sub, ip in self.dns.values():
            base = f"{host}.{sub}.{ns}"
            for name in (f"{base}.svc.{CLUSTER_DOMAIN}", f"{base}.svc", base):
                out[name] = ip
            if ns == namespace:
                out[f"{host}.{sub}"] = ip
        return out

    def _note_dns(self, key: str, pod: dict[str, Any] | None) -> None:
        entry = None
        meta, spec = (pod or {}).get("metadata") or {}, (pod or {}).get("spec") or {}
        if spec.get("subdomain"):
            ns, name = meta.get("namespace", "default"), meta.get("name", "")
            ip = HOST_IP if spec.get("hostNetwork") else (pod or {}).get("status", {}).get("podIP")
            entry = (ns, spec.get("hostname") or name, spec["subdomain"], ip or self.planned_ip(ns, name))
        if self.dns.get(key) == entry:
            return
        if entry is None:
            self.dns.pop(key, None)
        else:
            self.dns[key] = entry
        if self._hosts_task is None or self._hosts_task.done():
            self._hosts_task = self._spawn(self._write_hosts())

    async def _write_hosts(self) -> None:
        """``<root>/hosts`` (env LAVAFLOW_HOSTS_FILE): every pod DNS name, in /etc/hosts form."""
        await asyncio.sleep(0.1)
        lines = ["127.0.0.1\tlocalhost"]
        for ns, host, sub, ip in sorted(self.dns.values()):
            base = f"{host}.{sub}.{ns}"
            lines.append(f"{ip}\t{base}.svc.{CLUSTER_DOMAIN} {base}.svc {base} {host}.{sub}")
        tmp = self.root / "hosts.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.root / "hosts")

    def _release_ip(self, r: _PodRun) -> None:
        if self._ips.get(r.ip) == r.uid:
            del self._ips[r.ip]

    # ------------------------------------------------------------------ credentials
    def _token(self) -> str | None:
        raw = _credential(self.client.config.token, self.client.config.token_file)
        return None if raw is None else raw.decode().strip()

    def _ca(self) -> bytes | None:
        return _credential(self.client.config.ca_data, self.client.config.ca_file)

    def _write_kubeconfig(self, path: Path, sa: Path, namespace: str, with_user: bool) -> None:
        cfg = self.client.config
        cluster: dict[str, Any] = {"server": cfg.server}
        if (sa / "ca.crt").exists():
            cluster["certificate-authority"] = str(sa / "ca.crt")
        if cfg.insecure:
            cluster["insecure-skip-tls-verify"] = True
        user: dict[str, Any] = {}
        if with_user:
            if (sa / "token").exists():
                user["tokenFile"] = str(sa / "token")
            elif cfg.exec_cmd:
                user["exec"] = cfg.exec_cmd
            for field, data, file in (
                ("client-certificate", cfg.cert_data, cfg.cert_file),
                ("client-key", cfg.key_data, cfg.key_file),
            ):
                if data:
                    out = path.parent / f"{field}.pem"
                    out.write_bytes(bytes(data))
                    out.chmod(0o600)
                    user[field] = str(out)
                elif file:
                    user[field] = str(file)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": cluster}],
            "users": [{"name": "pod", "user": user}],
            "contexts": [{"name": "pod", "context": {"cluster": "cluster", "user": "pod", "namespace": namespace}}],
            "current-context": "pod",
        }
        path.write_text(json.dumps(doc, indent=1))
        path.chmod(0o600)

    # ------------------------------------------------------------------ nodes
    def _allocatable(self, node: str) -> dict[str, str]:
        return dict(self.capacity)

    def node_manifest(self, name: str) -> dict[str, Any]:
        """The Node a kubelet registers: capacity, allocatable, addresses, node info, conditions."""
        cap = self.capacity
        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
        labels = {"type": "process", "kubernetes.io/os": "linux", "kubernetes.io/arch": arch, **self.labels}
        node = fake_node(name, cap["cpu"], cap["memory"], cap["pods"], labels)
        status = node["status"]
        status["capacity"] = dict(cap)
        status["allocatable"] = dict(cap)
        status["conditions"] = self._node_conditions()
        status["addresses"] = [{"type": "InternalIP", "address": HOST_IP}, {"type": "Hostname", "address": name}]
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 0}}
        from .. import __version__

        status["nodeInfo"] = {
            "machineID": hashlib.md5(name.encode()).hexdigest(),
            "systemUUID": hashlib.md5(f"uuid-{name}".encode()).hexdigest(),
            "bootID": hashlib.md5(f"boot-{name}-{os.getpid()}".encode()).hexdigest(),
            "kernelVersion": os.uname().release,
            "osImage": f"{socket.gethostname()} (lavaflow process kubelet)",
            "containerRuntimeVersion": f"process://{sys.version.split()[0]}",
            "kubeletVersion": f"v0.0.0-lavaflow-{__version__}",
            "operatingSystem": "linux",
            "architecture": arch,
        }
        return node

    @staticmethod
    def _node_conditions(transition: bool = True) -> list[dict[str, Any]]:
        """The node's conditions (all fine); without ``transition``, without lastTransitionTime (a
        heartbeat: the server merges conditions by type and keeps it)."""
        now = _now()
        conds = [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status (lavaflow process kubelet)"),
        ]
        out = [{"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now} for t, s, r, m in conds]
        if transition:
            for c in out:
                c["lastTransitionTime"] = now
        return out

    async def _register(self, name: str) -> None:
        node = self.node_manifest(name)
        try:
            got = await self.client.request("POST", "/api/v1/nodes", body=node)
        except ApiError as exc:
            if not exc.already_exists:
                raise
            got = await self.client.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                body={"status": node["status"]},
                content_type="application/strategic-merge-patch+json",
            )
        self.node_uids[name] = got["metadata"]["uid"]
        if self.clear_not_ready_taint:
            await lift_not_ready_taint(self.client, got)

    async def _heartbeats(self) -> None:
        """Renew each node's Lease every ``heartbeat`` seconds and write its status every
        ``status_interval`` (its conditions' lastHeartbeatTime), as a kubelet does."""
        loop = asyncio.get_running_loop()
        leases: dict[str, dict[str, Any] | None] = dict.fromkeys(self.node_names)
        next_status = loop.time() + self.status_interval
        while True:
            for name in self.node_names:
                try:
                    leases[name] = await self._renew(name, leases[name])
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    leases[name] = None
                    log.debug("lease of %s not renewed: %s", name, exc)
            if loop.time() >= next_status:
                next_status = loop.time() + self.status_interval
                for name in self.node_names:
                    with contextlib.suppress(Exception):
                        await self.client.request(
                            "PATCH",
                            f"/api/v1/nodes/{name}/status",
                            body={"status": {"conditions": self._node_conditions(transition=False)}},
                            content_type="application/strategic-merge-patch+json",
                        )
            await asyncio.sleep(self.heartbeat)

    async def _renew(self, name: str, lease: dict[str, Any] | None) -> dict[str, Any]:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases"
        spec = {"holderIdentity": name, "leaseDurationSeconds": self.lease_duration, "renewTime": micro_now()}
        if lease is None:
            try:
                lease = await self.client.request("GET", f"{base}/{name}")
            except ApiError as exc:
                if not exc.not_found:
                    raise
                owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self.node_uids.get(name, "")}
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": [owner]},
                    "spec": spec,
                }
                return await self.client.request("POST", base, body=body)
        lease = dict(lease)
        lease["spec"] = {**(lease.get("spec") or {}), **spec}
        return await self.client.request("PUT", f"{base}/{name}", body=lease)

    # ------------------------------------------------------------------ ConfigMaps and Secrets
    def _configmap_list(self, items: list[dict[str, Any]]) -> None:
        self.configmaps.clear()
        self._synced.set()

    def _configmap_event(self, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ref = (meta.get("namespace", "default"), meta.get("name", ""))
        if etype == "DELETED":
            self.configmaps.pop(ref, None)
            return
        self.configmaps[ref] = obj
        for r in self.runs.values():
            if r.ns == ref[0] and r.task is not None and not r.task.done():
                r.refresh("ConfigMap", obj)

    async def _source(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap (from the watch, else read) or a Secret (read); None if it does not exist."""
        if kind == "ConfigMap" and (namespace, name) in self.configmaps:
            return self.configmaps[(namespace, name)]
        try:
            return await self.client.request("GET", f"/api/v1/namespaces/{namespace}/{kind.lower()}s/{name}")
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    # ------------------------------------------------------------------ pods
    async def _pods_after_sync(self) -> None:
        with contextlib.suppress(TimeoutError):  # ConfigMaps not readable: they are read one by one
            await asyncio.wait_for(self._synced.wait(), 10)
        await list_watch(self.client, "/api/v1/pods", self._pod_event, self._pod_list)

    def _pod_list(self, items: list[dict[str, Any]]) -> None:
        """A new list: pods that went away while nothing was watched are stopped."""
        present = {(p.get("metadata") or {}).get("uid") for p in items}
        self.dns.clear()
        for r in self.runs.values():
            if r.uid not in present and r.task is not None and not r.task.done():
                r.gone = True
                r.terminate(self._grace(r.pod), finalize=False)

    @staticmethod
    def _grace(pod: dict[str, Any]) -> float:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        for value in (meta.get("deletionGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds")):
            if value is not None:
                return float(value)
        return DEFAULT_GRACE

    def _pod_event(self, etype: str, pod: dict[str, Any]) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name')}"
        uid = meta.get("uid", "")
        r = self.runs.get(uid)
        if etype == "DELETED":
            self._note_dns(key, None)
            if r is not None:
                r.gone = True
                r.terminate(self._grace(pod), finalize=False)
                self._forget_finished()
            return
        self._note_dns(key, pod)
        if spec.get("nodeName") not in self.node_names:
            return
        if meta.get("deletionTimestamp"):
            if r is not None:
                r.terminate(self._grace(pod), finalize=True)
            else:
                self._spawn(force_delete(self.client, meta.get("namespace", "default"), meta.get("name", ""), uid))
            return
        if r is not None:
            if r.task is not None and not r.task.done():
                r.refresh("Pod", pod)
            return
        phase = (pod.get("status") or {}).get("phase") or PodPhase.PENDING
        if phase not in (PodPhase.PENDING, PodPhase.RUNNING):
            return
        r = _PodRun(self, pod)
        self.runs[uid] = r
        self.latest[key] = uid
        if phase == PodPhase.RUNNING and r.policy == "Never":
            r.task = self._spawn(self._lost(r))
        else:  # a Running one was started by a kubelet before this one: started again
            r.task = self._spawn(r.run())

    def _forget_finished(self, keep: int = 1000) -> None:
        """Forget the oldest finished runs of deleted pods beyond ``keep`` (their files stay)."""
        done = [uid for uid, r in self.runs.items() if r.gone and r.task is not None and r.task.done()]
        for uid in done[: max(0, len(done) - keep)]:
            r = self.runs.pop(uid)
            if self.latest.get(r.key) == uid:
                del self.latest[r.key]

    async def _lost(self, r: _PodRun) -> None:
        """A Running pod of this node this kubelet did not start (it was restarted): its
        processes are gone, so the pod fails."""
        r.prepared = True
        r.ip = (r.pod.get("status") or {}).get("podIP") or HOST_IP
        r.failed = ("ProcessLost", "the process kubelet restarted; the pod's processes are gone")
        for c in r.containers:
            c.started = True
            c.state = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": _now()}}
        await r._report()


# ---------------------------------------------------------------------------------------- CLI
def _parse_labels(values: Sequence[str]) -> dict[str, str]:
    out = {}
    for v in values:
        k, sep, val = v.partition("=")
        if not sep:
            raise SystemExit(f"--label {v!r}: expected KEY=VALUE")
        out[k] = val
    return out


async def _serve(args: argparse.Namespace) -> None:
    from ..kube.client import KubeClient, load_config

    cfg = load_config(args.kubeconfig, args.context)
    client = KubeClient(cfg)
    nodes: int | list[str] = args.node_name or args.nodes
    kubelet = ProcessKubelet(
        client,
        nodes,
        node_prefix=args.node_prefix,
        cpu=args.cpu,
        memory=args.memory,
        pods=args.pods,
        gpus=args.gpus,
        labels=_parse_labels(args.label),
        root=args.root,
        distinct_ips=not args.same_ip,
        backoff=(args.backoff, max(args.backoff, 300.0)),
        python=args.python,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await kubelet.start()
    print(f"process kubelet: nodes {', '.join(kubelet.node_names)}; pods under {kubelet.root}", flush=True)
    try:
        await stop.wait()
    finally:
        await kubelet.stop(delete_nodes=args.delete_nodes)
        await client.close()


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m lavaflow.testing.process_kubelet",
        description="Register nodes and run the pods bound to them as local processes.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--context")
    p.add_argument("--nodes", type=int, default=1, help="how many nodes (named NODE_PREFIX-i)")
    p.add_argument("--node-name", action="append", default=[], help="a node's name (repeatable; instead of --nodes)")
    p.add_argument("--node-prefix", default="process-node")
    p.add_argument("--cpu", help="each node's cpu (default: this host's)")
    p.add_argument("--memory", help="each node's memory (default: this host's)")
    p.add_argument("--pods", default="110")
    p.add_argument("--gpus", type=int, default=0, help="a fake nvidia.com/gpu count per node")
    p.add_argument("--label", action="append", default=[], help="KEY=VALUE node label (repeatable)")
    p.add_argument("--root", help="pods' directories and logs (default: a temporary directory)")
    p.add_argument("--same-ip", action="store_true", help="every pod on 127.0.0.1 (else 127.x.y.z each)")
    p.add_argument("--python", help="the pods' python: its directory goes first on their PATH (default: this one)")
    p.add_argument("--backoff", type=float, default=10.0, help="first restart back-off, seconds")
    p.add_argument("--delete-nodes", action="store_true", help="delete the nodes on exit")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
