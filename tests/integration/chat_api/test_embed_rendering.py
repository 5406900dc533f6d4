"""The embed page renders answers with the one answer renderer, in real Chromium.

The renderer is ``models/rendering.py``, the browser headless Chromium: a Markdown table is a table
(not ``| a | b |`` text), result numbers are formatted (no 15-decimal floats), and months read Jan
... Dec on the chart axis.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from tests.browser_support import open_page
from tests.integration.chat_api.chat_support import session, stream_lines

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer

DELAY = "Average arrival delay by carrier"
MONTHLY = "Monthly flight counts from EWR"


async def test_the_embed_page_shows_answers_numbers_and_months_as_people_read_them(
    server: RunningServer, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    settings = session("iris")
    first = await stream_lines(client, server, {"input": DELAY, "sessionSettings": settings})
    chat_id: str = first[0]["state"]["chatId"]
    await stream_lines(
        client, server, {"input": MONTHLY, "chatId": chat_id, "sessionSettings": settings}
    )
    response = await client.post(server.session_url, json=settings, headers=server.headers)
    url = f"{server.base_url}/embed/chat/{chat_id}?session={response.json()['sessionId']}"
    page = open_page(url, tmp_path / "embed")
    assert page.status == "rendered", page.dom[-2000:]
    shown = page.dom.split('<main id="thread">')[1].split("</main>")[0]  # not the JSON data
    answers = re.findall(r'<div class="answer">(.*?)</div>', shown, re.DOTALL)
    assert len(answers) == 2 and all("<table>" in a for a in answers)
    assert "| Carrier" not in shown and "|---|" not in shown
    cells = re.findall(r"<td>([^<]*)</td>", shown)
    assert cells and not [c for c in cells if re.search(r"\d\.\d{3,}", c)], cells
    months = re.findall(r"<figure class=\"chart\"[^>]*>(.*?)</figure>", shown, re.DOTALL)[-1]
    assert ">Jan<" in months and ">Dec<" in months
    assert page.console == [], page.console
