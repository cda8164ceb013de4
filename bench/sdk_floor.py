"""The floor: the least a Python program must do to run the benchmark's cases through the
real ``openai`` SDK, in one file, with nothing else (no config, no journal, no report, no
history). Every tool that talks to a model through the SDK pays at least this.

    .venv/bin/python bench/sdk_floor.py BASE_URL N C [--transport aiohttp|httpx]
        [--api responses|chat]

Sends the ``N`` generated cases (``common.case_input``), ``C`` at a time, on the API the
agent speaks (``responses``: ``client.responses.create``, as our ``openai`` agents and
HoloDeck's openai-agents SDK do; ``chat``: ``client.chat.completions.create``, as our judges
and ``http`` targets do), checks each reply exactly, prints ``floor: N/N correct`` and exits
0 only when every reply matched. The benchmarks time it from spawn to exit beside our CLI
(``bench/throughput.py``, ``bench/startup.py``): the ideal ``ceil(N/C) * L`` ignores that
Python, the SDK and the server share two cores; the floor measures it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import openai
from common import OFFLINE_KEY, SYSTEM_PROMPT, case_input


async def ask_chat(client: openai.AsyncOpenAI, i: int) -> str | None:
    reply = await client.chat.completions.create(
        model="gpt-4o-mini",
        temperature=0.0,
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": case_input(i)},
        ],
    )
    return reply.choices[0].message.content


async def ask_responses(client: openai.AsyncOpenAI, i: int) -> str | None:
    reply = await client.responses.create(
        model="gpt-4o-mini",
        temperature=0.0,
        instructions=SYSTEM_PROMPT,
        input=[{"role": "user", "content": case_input(i)}],
    )
    return reply.output_text


ASK = {"chat": ask_chat, "responses": ask_responses}


async def run(base_url: str, n: int, concurrency: int, transport: str, api: str) -> int:
    http_client = openai.DefaultAioHttpClient() if transport == "aiohttp" else None
    client = openai.AsyncOpenAI(
        base_url=base_url, api_key=OFFLINE_KEY, max_retries=0, http_client=http_client
    )
    gate = asyncio.Semaphore(concurrency)
    ask = ASK[api]

    async def one(i: int) -> bool:
        async with gate:
            text = await ask(client, i)
        return text == f"answer {i}"

    async with client:
        results = await asyncio.gather(*(one(i) for i in range(n)))
    return sum(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base_url")
    parser.add_argument("n", type=int)
    parser.add_argument("concurrency", type=int)
    parser.add_argument("--transport", choices=("aiohttp", "httpx"), default="aiohttp")
    parser.add_argument("--api", choices=tuple(ASK), default="responses")
    args = parser.parse_args()
    correct = asyncio.run(run(args.base_url, args.n, args.concurrency, args.transport, args.api))
    print(f"floor: {correct}/{args.n} correct")
    return 0 if correct == args.n else 1


if __name__ == "__main__":
    sys.exit(main())
