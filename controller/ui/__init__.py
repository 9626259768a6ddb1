"""The web UI (`zonda ui`): DAGs, the grid, the graph, runs and task instances in the browser.

`views` and `graphs` are pure (dicts in, view models or DOT out); `store` keeps a watch-fed copy of
the DAGs and DagRuns; `access` decides who the viewer is and what they may do; `server` is the aiohttp
application that ties them together and pushes changes to open pages (Server-Sent Events).
"""
