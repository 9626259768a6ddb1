"""XCom values too large for a run's status: the backends (`backends`: XComChunks or fsspec object
storage), the XComChunk store with the runner's standard-library client (`chunks`), and the
controller's and UI's async reads of stored values (`reads`).

May import: `controller.kube`, `zonda`, fsspec. The runner imports `backends`, so nothing it reaches
may import kubernetes_asyncio (the `runner-is-light` contract).
"""
