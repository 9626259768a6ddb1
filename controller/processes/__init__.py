"""What every long-running Zonda process shares: logging (`logs`: text or JSON lines) and the health
server with its event-loop watchdog (`health`).

May import: the standard library, aiohttp, `zonda`.
"""
