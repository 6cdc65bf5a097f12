"""What the API server serves, read from its discovery documents.

``GET /api/v1`` and ``GET /apis/{group}/{version}`` answer an ``APIResourceList``: one entry per
resource and per subresource of that group/version (``podgroups``, ``queues``, ``queues/status``,
``pods/binding``...). A CRD without a status subresource (Volcano's PodGroup) has no
``plural/status`` entry, and a write to ``.../status`` is then answered 404.
"""

from __future__ import annotations

from typing import Any

from .client import KubeClient


def discovery_path(api_version: str) -> str:
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


async def served_resources(client: KubeClient, api_version: str) -> dict[str, dict[str, Any]]:
    """The resources and subresources served under ``api_version``, by name (``"podgroups"``,
    ``"podgroups/status"``). Raises ApiError when the group/version is not served (404) or may not
    be read (403)."""
    doc = await client.request("GET", discovery_path(api_version), timeout=10)
    return {
        str(r["name"]): r for r in doc.get("resources") or () if isinstance(r, dict) and isinstance(r.get("name"), str)
    }
