"""The official MCP Python SDK client (PyPI `mcp`) against Bridle's /mcp.

Usage: client.py URL TOKEN. Connects as a client with auto negotiation (it probes
`server/discover` first), lists the tools, calls a read tool, a write tool, and a write tool
with invalid arguments; prints one JSON object with what it saw. Exits non-zero on a failure.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def main(url: str, token: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport) as client:
            tools = await client.list_tools()
            read = await client.call_tool("list_events", {})
            write = await client.call_tool(
                "create_event",
                {
                    "title": "Python Open",
                    "starts_at": "2030-05-01T09:00",
                    "venue": "Hall 2",
                    "capacity": 12,
                },
            )
            invalid = await client.call_tool("create_event", {"title": "X", "capacity": "lots"})
            print(
                json.dumps(
                    {
                        "server": client.server_info.name if client.server_info else None,
                        "tools": sorted(t.name for t in tools.tools),
                        "read": {"is_error": bool(read.is_error), "text": text_of(read)},
                        "write": {
                            "is_error": bool(write.is_error),
                            "structured": write.structured_content,
                        },
                        "invalid": {"is_error": bool(invalid.is_error), "text": text_of(invalid)},
                    }
                )
            )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
