"""Stopping the processes' background tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel each task (None: none), then wait for each to end, whatever it ends with: a task
    being stopped has nothing left to report."""
    pending = [t for t in tasks if t is not None]
    for t in pending:
        t.cancel()
    for t in pending:
        try:
            await t
        except (asyncio.CancelledError, Exception):
            pass
