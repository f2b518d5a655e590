"""Startup and shutdown: voices on disk → engine loaded and warm → serving → clean exit."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Protocol

from ..engine.engine import Engine
from ..engine.settings import SynthesisSettings
from ..engine.speech import warm_up
from ..runtime.cache import PreparationError
from ..runtime.children import ChildStop
from ..store import MissingModelFiles
from ..worker import Scheduler
from .config import ServerConfig, StartupError, VoiceSelection, ensure_voices
from .handler import HayakoeHandler
from .info import voice_card
from .listener import Listener
from .service import ServerOptions, Service
from .wording import counted
from .zeroconf import ZeroconfAdvertiser, advertised_address, default_service_name

_LOGGER = logging.getLogger(__name__)
# How often the main thread, waiting for the loading, runs a stop signal's handler that came to another thread.
SIGNAL_POLL_SECONDS = 0.05


class FrontEnd(Protocol):
    """Another way in to the same service (the web page): started once the server listens, stopped before it."""

    async def start(self, service: Service) -> None: ...

    async def stop(self) -> None: ...


def load_stoppably(config: ServerConfig, selection: VoiceSelection) -> tuple[Engine, str]:
    """`load_engine` on a thread of its own while this one, the main thread, waits for it.

    A stop signal's handler runs in the main thread, and only between two of
    its Python steps: run there, a start would hear a stop only once the
    model run, the lock or the optimizer it waited for was done. Here the
    main thread only waits, so the handler runs at once; as it raises, the
    loading is stopped (its optimizer children at once, its waits for a lock
    within 50 ms, between two voices and two warm-up runs) and the stop waits
    only for the model run the loading is in. The kernel may hand the signal
    to any of the process's threads, and then the main thread is not woken:
    it waits in short steps, after each of which the handler runs.
    """
    stop = ChildStop()
    loading: Future[tuple[Engine, str]] = Future()

    def load() -> None:
        try:
            loading.set_result(load_engine(config, selection, stop))
        except BaseException as err:  # handed to the main thread, which reports it
            loading.set_exception(err)

    thread = threading.Thread(target=load, name="loading", daemon=True)
    thread.start()
    try:
        while True:
            try:  # in short waits: a blocked wait would run the handler only once the loading ends
                return loading.result(timeout=SIGNAL_POLL_SECONDS)
            except FutureTimeout:
                continue
    except BaseException:
        stop.stop()
        thread.join()
        raise


def load_engine(config: ServerConfig, selection: VoiceSelection, stop: ChildStop | None = None) -> tuple[Engine, str]:
    """Load (and warm up) every voice that will be served; returns the engine and default voice. `stop`,
    from another thread, ends it (PreparationError "stopped")."""
    data_dirs, default_voice, load = selection.data_dirs, selection.default_voice, selection.load
    started = time.monotonic()
    from ..text.user_dictionary import UserDictionaryError, apply_user_dictionary

    try:
        keep_words = apply_user_dictionary(config.dictionary)
    except UserDictionaryError as err:
        raise StartupError(str(err)) from err
    if config.dictionary is not None:
        _LOGGER.info("User dictionary %s applied", config.dictionary)
    try:
        engine = Engine.load(
            data_dirs,
            voices=load,
            threads=config.threads,
            keep_words=keep_words,
            cache_dir=config.cache_dir,
            backend=config.backend,
            precision=config.precision,
            stop=stop,
        )
    except (MissingModelFiles, PreparationError, ValueError) as err:  # missing or broken files, not JP-Extra
        raise StartupError(str(err)) from err
    except Exception as err:  # ONNX Runtime refusing a file, e.g. a cache entry damaged in a crash
        cache = f"the model cache {config.cache_dir}" if config.cache_dir else "the model cache"
        raise StartupError(
            f"Could not load the models: {err}\nIf this persists, delete {cache} and start again."
        ) from err
    if not engine.voices:
        raise StartupError("No voice could be loaded from " + ", ".join(str(d) for d in data_dirs))
    if default_voice not in engine.voices:
        raise StartupError(f"The default voice {default_voice!r} is not loaded")
    style = config.style
    if style is not None and style not in engine.voices[default_voice].styles:
        raise StartupError(
            f"The default voice {default_voice!r} has no style {style!r}; "
            f"styles: {', '.join(engine.voices[default_voice].styles)}"
        )
    if config.warm_up:
        warm_up(engine, (lambda: stop.stopped) if stop else None)
    if stop is not None and stop.stopped:
        raise PreparationError("Loading stopped", "stopped")
    _LOGGER.info(
        "Ready in %.1f s: %s, default %s; %s",
        time.monotonic() - started,
        counted(len(engine.voices), "voice"),
        default_voice,
        "; ".join(f"{v.name} ({v.sample_rate} Hz) from {v.origin}" for v in engine.voices.values()),
    )
    return engine, default_voice


def build_service(config: ServerConfig, engine: Engine, default_voice: str, scheduler: Scheduler) -> Service:
    preferred = config.style or SynthesisSettings().style  # Neutral, where a voice has it
    cards = {
        name: voice_card(name, voice.styles, preferred, voice.aivmx, voice.license)
        for name, voice in engine.voices.items()
    }
    options = ServerOptions(
        default_voice=default_voice,
        settings=config.settings,
        samples_per_chunk=config.samples_per_chunk,
        streaming=config.streaming,
        max_text_length=config.max_text_length,
    )
    return Service(engine, scheduler, options, cards)


async def serve(
    config: ServerConfig, service: Service, listener: Listener, front_ends: Sequence[FrontEnd] = ()
) -> None:
    """Serve on the bound `listener` (and `front_ends`) until SIGTERM/SIGINT (or, for stdio, until stdin closes)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass

    await listener.start(partial(HayakoeHandler, service))
    _LOGGER.info("Listening on %s", listener.address)
    advertiser: ZeroconfAdvertiser | None = None
    started: list[FrontEnd] = []
    try:
        for front_end in front_ends:
            await front_end.start(service)
            started.append(front_end)
        if config.zeroconf is not None:
            assert listener.host is not None and listener.port is not None
            try:
                address = advertised_address(listener.host, config.zeroconf_host)
                advertiser = ZeroconfAdvertiser(config.zeroconf or default_service_name(), listener.port, address)
                await advertiser.register()
            except Exception as err:  # discovery is a convenience: keep serving without it
                _LOGGER.error("Zeroconf registration failed (%s); serving without discovery", err)
                if advertiser is not None:
                    await advertiser.close()
                advertiser = None
        closed = asyncio.create_task(listener.wait_closed())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([closed, stopping], return_when=asyncio.FIRST_COMPLETED)
        for task in (closed, stopping):
            task.cancel()
        _LOGGER.info("Shutting down")
    finally:
        for front_end in started:
            await front_end.stop()
        if advertiser is not None:
            try:
                await asyncio.wait_for(advertiser.unregister(), 5)
            except Exception:  # never block shutdown on mDNS
                _LOGGER.warning("Zeroconf unregistration failed", exc_info=True)
        await listener.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass


def run_server(
    config: ServerConfig,
    listener: Listener,
    selection: VoiceSelection | None = None,
    front_ends: Sequence[FrontEnd] = (),
) -> None:
    """Load, serve on the bound `listener` and `front_ends`, shut down. Raises StartupError for configuration problems."""
    engine, default_voice = load_stoppably(config, selection or ensure_voices(config))
    scheduler = Scheduler(max_requests=config.max_queue)
    scheduler.start()
    service = build_service(config, engine, default_voice, scheduler)
    stop_measuring = measure_in_background(engine, scheduler)
    try:
        asyncio.run(serve(config, service, listener, front_ends))
    except BaseException:
        stop_measuring()
        scheduler.close(timeout=10)
        raise
    stop_measuring()
    if not scheduler.close(timeout=10):
        # A model run still going (a long step on a slow machine) would abort the interpreter's exit
        # ("terminate called without an active exception"), which reads as a crash: everything is
        # closed and answered, so leave without waiting for it.
        _LOGGER.warning("The inference worker did not stop in time; exiting without it")
        _LOGGER.info("Stopped")
        logging.shutdown()
        os._exit(0)
    _LOGGER.info("Stopped")


def measure_in_background(engine: Engine, scheduler: Scheduler) -> Callable[[], None]:
    """Measure the voices' decoder runtimes in a thread of its own while the server serves (see
    engine/runtimes.py), each switched to between requests; returns what stops it."""
    measuring = engine.measuring
    if measuring is None or not measuring.pending:
        return lambda: None
    names = ", ".join(item.voice.name for item in measuring.pending)
    _LOGGER.info("Serving on onnxruntime f32 while the decoder runtimes of %s are measured in the background", names)
    thread = threading.Thread(target=measuring.run, args=(scheduler.when_idle,), name="measuring", daemon=True)
    thread.start()

    def stop() -> None:
        measuring.stop()
        thread.join(10)

    return stop
