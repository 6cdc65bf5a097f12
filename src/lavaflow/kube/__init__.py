"""The Kubernetes backend: informers feed the scheduling core and controllers; decisions go to the API server.

Nothing here schedules: the cache, the scheduler and the controllers are the
simulator's, unchanged. This package lists and watches objects, applies
decisions (bindings, evictions, status subresources, events), elects a leader,
serves metrics and admission reviews, and packages the whole for a cluster.
Its dependencies are the ``kube`` extra: ``pip install 'lavaflow[kube]'``.
"""
