"""Health check for Docker HEALTHCHECK: a Describe → Info round trip.

    python -m wyoming_hayakoe.server.health --uri tcp://127.0.0.1:10200
    wyoming-hayakoe-health --uri tcp://127.0.0.1:10200

Exit code 0 when the server answers with an installed `hayakoe` TTS program
that has at least one installed voice; 1 otherwise (with the reason on
stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from wyoming.client import AsyncClient
from wyoming.info import Describe, Info

from .info import PROGRAM_NAME

DEFAULT_URI = "tcp://127.0.0.1:10200"


async def check(uri: str, timeout: float) -> str:
    """'' when healthy, else the reason it is not."""

    async def round_trip() -> str:
        async with AsyncClient.from_uri(uri) as client:
            await client.write_event(Describe().event())
            while True:
                event = await client.read_event()
                if event is None:
                    return "the server closed the connection without answering"
                if Info.is_type(event.type):
                    break
        info = Info.from_event(event)
        for program in info.tts:
            if program.name == PROGRAM_NAME and program.installed:
                if any(voice.installed for voice in program.voices):
                    return ""
                return f"the {PROGRAM_NAME} program has no installed voice"
        return f"no installed {PROGRAM_NAME} TTS program in the answer"

    try:
        return await asyncio.wait_for(round_trip(), timeout)
    except asyncio.TimeoutError:
        return f"no answer within {timeout:g} s"
    except (OSError, ValueError) as err:
        return f"{type(err).__name__}: {err}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wyoming-hayakoe-health", description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default=DEFAULT_URI, help="Server to check (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=10.0, help="Seconds to wait (default: %(default)s)")
    args = parser.parse_args(argv)
    reason = asyncio.run(check(args.uri, args.timeout))
    if reason:
        print(f"unhealthy: {reason}", file=sys.stderr)
        return 1
    print("healthy")
    return 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
