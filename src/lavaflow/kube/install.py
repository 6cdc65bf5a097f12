"""`lavaflow install` against a cluster: which of lavaflow's CRDs are there already, and applying
the manifests around those that are not lavaflow's.

A CRD of the same name that lavaflow did not install (Volcano's own, as Volcano's installer leaves
them) is left as it is, as long as it serves the version lavaflow reads and writes: the processes
learn from discovery whether it has a status subresource and write status accordingly (see
``KubeStore.has_status``). lavaflow's own CRDs carry ``manifests.OWN_CRD_LABEL``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

from .client import KubeClient
from .manifests import OWN_CRD_LABEL
from .ops import get_object, server_side_apply

FIELD_MANAGER = "lavaflow-install"


class InstallError(Exception):
    """A CRD on the cluster that lavaflow cannot work with."""


@dataclass
class FoundCRD:
    """One of lavaflow's CRDs (``want``) and the CRD of that name on the cluster (None: absent)."""

    want: dict[str, Any]
    have: dict[str, Any] | None

    @property
    def name(self) -> str:
        return cast(str, self.want["metadata"]["name"])

    @property
    def version(self) -> str:
        """The version lavaflow reads and writes."""
        return cast(str, self.want["spec"]["versions"][0]["name"])

    @property
    def ours(self) -> bool:
        labels = ((self.have or {}).get("metadata") or {}).get("labels") or {}
        return labels.get(OWN_CRD_LABEL[0]) == OWN_CRD_LABEL[1]

    @property
    def left(self) -> bool:
        """Present and not lavaflow's: left as it is."""
        return self.have is not None and not self.ours

    def served(self) -> list[dict[str, Any]]:
        versions = ((self.have or {}).get("spec") or {}).get("versions") or []
        return [v for v in versions if isinstance(v, dict) and v.get("served")]

    def check(self) -> None:
        """Raises InstallError when the CRD is left as it is but does not serve lavaflow's version."""
        if not self.left or any(v.get("name") == self.version for v in self.served()):
            return
        serves = ", ".join(str(v.get("name")) for v in self.served()) or "no version"
        raise InstallError(
            f"{self.name}: found (not lavaflow's), but it does not serve {self.version}, which lavaflow "
            f"needs (it serves {serves}): upgrade it (Volcano v1.10 or later ships {self.version}) "
            "or replace it with lavaflow's (deploy/crds)"
        )

    def line(self, done: str, left: str = "left as it is") -> str:
        """What was found, and what is done with it: ``done`` if it is not left as it is, else
        ``left``."""
        if self.have is None:
            return f"{self.name}: not found: {done}"
        if self.ours:
            return f"{self.name}: found (lavaflow's): {done}"
        mine = next(v for v in self.served() if v.get("name") == self.version)
        status = (
            "status subresource"
            if "status" in (mine.get("subresources") or {})
            else "no status subresource — lavaflow writes status on the object"
        )
        serves = ", ".join(str(v.get("name")) for v in self.served())
        return f"{self.name}: found (not lavaflow's; serves {serves}; {status}): {left}"


async def find_crds(client: KubeClient, crds: list[dict[str, Any]]) -> list[FoundCRD]:
    """Each of ``crds`` with the CRD of its name on the cluster; InstallError if one found is not
    lavaflow's and does not serve the version lavaflow needs."""
    found = [
        FoundCRD(want, await get_object(client, "CustomResourceDefinition", want["metadata"]["name"])) for want in crds
    ]
    for f in found:
        f.check()
    return found


async def install(client: KubeClient, found: list[FoundCRD], others: list[dict[str, Any]]) -> AsyncIterator[str]:
    """Server-side apply of lavaflow's CRDs not left as they are, then of ``others``, in order: a
    line for each CRD and each object once done (a CRD left as it is, at once)."""
    for f in found:
        if not f.left:
            await server_side_apply(client, f.want, FIELD_MANAGER)
        yield f.line("updated" if f.have is not None else "created")
    for doc in others:
        await server_side_apply(client, doc, FIELD_MANAGER)
        meta = doc["metadata"]
        yield f"{doc['kind']} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}: applied"
