"""How replicas divide work (named for Kubernetes' `coordination.k8s.io`): the one fenced Lease
algorithm (`leases`, clocks injected: leader election and shard ownership) and the pure shard plan
(`shards`: which shard a key is in, how many shards a replica may hold).

May import: `controller.kube`, `zonda`.
"""
