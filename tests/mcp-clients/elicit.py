"""A risky call through the official MCP Python SDK client with elicitation.

Usage: elicit.py URL TOKEN EVENT_ID accept|decline. Creates nothing itself: cancels the
published event EVENT_ID with a client that answers Bridle's question with ACTION, and prints
one JSON object: the question it was asked and the call's result.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str, event_id: str, action: str) -> None:
    asked = []

    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, elicitation_callback=answer) as client:
            result = await client.call_tool("cancel_event", {"event_id": event_id})
            text = "".join(getattr(block, "text", "") for block in result.content)
            print(
                json.dumps(
                    {
                        "protocol": client.protocol_version,
                        "asked": asked,
                        "is_error": bool(result.is_error),
                        "text": text,
                    }
                )
            )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
