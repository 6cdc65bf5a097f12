"""ssh: a key pair and an ssh config naming every pod, in a Secret mounted in each pod."""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING

from ....api.core import KeyToPath, Pod, Secret, SecretVolumeSource, Volume, VolumeMount
from ....api.volcano import Job, TaskSpec
from .base import JobPlugin, mount_everywhere, owner_refs

if TYPE_CHECKING:  # pragma: no cover
    from ....store.base import Store

log = logging.getLogger("lavaflow.controllers")


SSH_SUFFIX = "-ssh"
SSH_KEYS = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
SSH_ROOT_PATH = "/root/.ssh"  # where the keys go unless --ssh-key-file-path says otherwise
SSH_DIR = ".ssh"  # the keys' directory inside the volume, mounted as the mount's subPath
SSH_ROOT_MODE = 0o600  # the files' mode at /root/.ssh (ssh refuses a private key others can read)
SSH_USER_MODE = 0o644  # elsewhere: readable by a user who is not root (the files belong to root)


def _raw_flag(raw: list[str], name: str) -> str:
    """The value of ``--name=VALUE`` exactly as given (a key's final newline kept); the last wins."""
    value = ""
    for a in raw or []:
        key, sep, rest = a.partition("=")
        if sep and key.strip() in (f"--{name}", f"-{name}"):
            value = rest
    return value


class SSHPlugin(JobPlugin):
    """Secret ``<job>-ssh`` with a key pair (generated per job, or the one given by
    ``--ssh-private-key`` / ``--ssh-public-key``), ``authorized_keys`` and an ssh ``config`` naming
    every pod, mounted in every container at ``/root/.ssh`` (mode 0600) or at
    ``--ssh-key-file-path`` (mode 0644), as Volcano does."""

    name = "ssh"

    def __init__(self, args: list[str]) -> None:
        super().__init__(args)
        self.raw = list(args or [])

    def _port(self) -> int:
        raw = self.args.get("ssh-port", "22")
        try:
            port = int(raw)
        except ValueError:
            return 22  # (Volcano: the flag's parse error is logged, the default kept)
        if not 0 < port <= 65535:
            log.warning("ssh plugin: invalid ssh port %s, falling back to port 22", raw)
            return 22
        return port

    def _path(self) -> str:
        path = self.args.get("ssh-key-file-path", "")
        return SSH_ROOT_PATH if path in ("", "true") else path

    def on_job_add(self, job: Job, store: Store) -> None:
        key = f"{job.namespace}/{job.name}{SSH_SUFFIX}"
        if store.get("Secret", key) is not None:
            return
        private_key = _raw_flag(self.raw, "ssh-private-key")
        if private_key:
            priv_pem, pub = private_key.encode(), _raw_flag(self.raw, "ssh-public-key").encode()
        else:
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import rsa

            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            priv_pem = private.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            )
            pub = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            pub += b"\n"  # (an authorized_keys line)
        port = self._port()
        config = "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        for t in job.spec.tasks:
            for i in range(t.replicas):
                host = f"{job.name}-{t.name}-{i}"
                config += f"Host {host}\n  HostName {host}.{job.name}\n  Port {port}\n"
        data = {"id_rsa": priv_pem, "id_rsa.pub": pub, "authorized_keys": pub, "config": config.encode()}
        store.create(
            Secret.model_validate(
                {
                    "metadata": {
                        "name": f"{job.name}{SSH_SUFFIX}",
                        "namespace": job.namespace,
                        "ownerReferences": owner_refs(job),
                    },
                    "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
                }
            )
        )
        job.status.controlled_resources["plugin-ssh"] = "ssh"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        name = f"{job.name}{SSH_SUFFIX}"
        path = self._path()
        volume = Volume(
            name=name,
            secret=SecretVolumeSource(
                secret_name=name,
                items=[KeyToPath(key=k, path=f"{SSH_DIR}/{k}") for k in SSH_KEYS],
                default_mode=SSH_ROOT_MODE if path == SSH_ROOT_PATH else SSH_USER_MODE,
            ),
        )
        mount_everywhere(pod, volume, VolumeMount(name=name, mount_path=path, sub_path=SSH_DIR))

    def on_job_delete(self, job: Job, store: Store) -> None:
        store.delete("Secret", f"{job.namespace}/{job.name}{SSH_SUFFIX}")
