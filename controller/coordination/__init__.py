"""How replicas divide work (named for Kubernetes' `coordination.k8s.io`): the one fenced Lease
algorithm (`leases`, clocks injected: leader election and shard ownership) and the pure shard plan
(`shards`: which shard a key is in, how many shards a replica may hold), and the shard and member
Leases with the membership cycle every sharded component runs (`shard_leases`: the triggerer, the
controller with `--shards`).

May import: `controller.kube`, `zonda`.
"""
