"""The fastest binder an API server can have: a client that decides nothing (issue 36).

It lists the pending pods of ``--scheduler-name`` and the nodes once, then posts each pod's
binding to the next node in turn, ``--concurrency`` requests in flight, under the same client
QPS and burst as the schedulers it is measured beside. What it reaches is what the API server
accepts on the machine: the ceiling for a scheduler's binds per second. Run by
``kube_throughput.py --order ...,raw``; on its own:

    python benchmarks/raw_binder.py --kubeconfig K --scheduler-name raw-binder
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys

from lavaflow.kube.client import ApiError, KubeClient, load_config


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--scheduler-name", default="raw-binder")
    ap.add_argument("--qps", type=float, default=2000.0)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    cfg = load_config(args.kubeconfig)
    cfg.qps, cfg.burst, cfg.max_connections = args.qps, int(args.qps), args.concurrency
    client = KubeClient(cfg)
    try:
        nodes = [n["metadata"]["name"] for n in (await client.request("GET", "/api/v1/nodes"))["items"]]
        selector = f"spec.schedulerName={args.scheduler_name},spec.nodeName="
        pods = (await client.request("GET", "/api/v1/pods", params={"fieldSelector": selector}))["items"]
        if not nodes:
            print("raw binder: no nodes", file=sys.stderr)
            return 2
        targets = itertools.cycle(nodes)
        sem = asyncio.Semaphore(args.concurrency)
        failed = 0

        async def bind(pod: dict, node: str) -> None:
            nonlocal failed
            meta = pod["metadata"]
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            async with sem:
                try:
                    await client.request(
                        "POST", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding", body=body
                    )
                except ApiError:
                    failed += 1

        await asyncio.gather(*(bind(p, next(targets)) for p in pods))
        print(f"raw binder: {len(pods) - failed} of {len(pods)} pods bound over {len(nodes)} nodes", file=sys.stderr)
        return 0 if not failed else 1
    finally:
        await client.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
