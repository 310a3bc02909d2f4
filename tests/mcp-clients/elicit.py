"""A risky call through the official MCP Python SDK client, which can send its human to a page
(URL-mode elicitation).

Usage: elicit.py URL TOKEN EVENT_ID approve|self|decline. Creates nothing itself: cancels the
published event EVENT_ID. Asked, the client's human
- approve: opens Bridle's page and approves there (through the page's own API, as the page's
  script does; the local server has one user and no sign-in), then accepts;
- self: accepts without opening the page (a script answering its own question);
- decline: declines.
Prints one JSON object: what it was asked and the call's result.
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urlparse

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def approve_on_page(url: str) -> None:
    page = urlparse(url)
    query = parse_qs(page.query)
    api = f"{page.scheme}://{page.netloc}/api/mcp-approvals/{query['token'][0]}/{query['call'][0]}"
    async with httpx2.AsyncClient() as web:
        read = await web.get(api)
        read.raise_for_status()
        answer = {"approve": True, "description": read.json()["description"]}
        (await web.post(api, json=answer)).raise_for_status()


async def main(url: str, token: str, event_id: str, human: str) -> None:
    asked = []

    async def answer(context, params):
        asked.append(
            {"mode": params.mode, "message": params.message, "url": getattr(params, "url", None)}
        )
        if human == "approve":
            await approve_on_page(params.url)
        return types.ElicitResult(action="decline" if human == "decline" else "accept")

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
