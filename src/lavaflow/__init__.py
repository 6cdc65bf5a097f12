"""lavaflow: a batch scheduler for AI, HPC and big-data workloads.

One pure scheduling core (snapshot -> session -> actions -> plugins -> statement)
that runs against an embedded simulated cluster or a Kubernetes cluster.
"""

__version__ = "0.1.0"
