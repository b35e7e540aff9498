"""deploy/gunicorn.conf.py with each request profiled (cProfile, in the thread serving it) while
the file `<COMPACTOR_PROFILE_DIR>/on` exists; each worker writes its figures to
`<COMPACTOR_PROFILE_DIR>/<pid>.prof` when it exits. For bench/cli_replay_bench.py --profile."""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
import time
from pathlib import Path

_here = Path(__file__).resolve().parent.parent / "deploy" / "gunicorn.conf.py"
exec(compile(_here.read_text(), str(_here), "exec"))  # noqa: S102 - the deployed settings, as they are
# The deployed hooks run too (the memory bound's post_request, ...), inside what is timed.
_deployed = {name: globals().get(name) for name in ("pre_request", "post_request", "post_worker_init", "worker_exit")}


def _run_deployed(name, *args):
    if _deployed[name] is not None:
        _deployed[name](*args)


_folder = Path(os.environ["COMPACTOR_PROFILE_DIR"])
_local = threading.local()
_stats: list[pstats.Stats] = []
_stats_lock = threading.Lock()
_spent: dict[str, list[float]] = {}


def pre_request(worker, req):
    if not (_folder / "on").exists():
        _run_deployed("pre_request", worker, req)
        return
    _local.started = time.thread_time()
    if not os.environ.get("COMPACTOR_PROFILE_FUNCS"):
        # Wall time by default (what the client waits for); thread CPU time with COMPACTOR_PROFILE_CPU=1.
        _local.profile = (
            cProfile.Profile(time.thread_time) if os.environ.get("COMPACTOR_PROFILE_CPU") else cProfile.Profile()
        )
        _local.profile.enable()
    _run_deployed("pre_request", worker, req)


def post_request(worker, req, environ, resp):
    _run_deployed("post_request", worker, req, environ, resp)
    started = getattr(_local, "started", None)
    if started is not None:
        _local.started = None
        entry = _spent.setdefault("request (gunicorn's pre_request to post_request)", [0.0, 0])
        entry[0] += time.thread_time() - started
        entry[1] += 1
    profile = getattr(_local, "profile", None)
    if profile is None:
        return
    profile.disable()
    _local.profile = None
    with _stats_lock:
        if _stats:
            _stats[0].add(profile)
        else:
            _stats.append(pstats.Stats(profile))


def worker_exit(server, worker):
    _run_deployed("worker_exit", server, worker)
    with _stats_lock:
        if _stats:
            _stats[0].dump_stats(str(_folder / f"{os.getpid()}.prof"))


# COMPACTOR_PROFILE_FUNCS="gateway.services.gateway_begin gateway.views._RecordOnClose.close ...":
# the thread CPU time spent in each (cumulative, while profiling is on), without cProfile's
# overhead; written to <COMPACTOR_PROFILE_DIR>/<pid>.funcs.json when the worker exits.
def _timed(name, function):
    import functools

    # Thread CPU time, or wall time with COMPACTOR_PROFILE_WALL=1 (waits included: locks, fsyncs).
    clock = time.perf_counter if os.environ.get("COMPACTOR_PROFILE_WALL") else time.thread_time

    @functools.wraps(function)
    def timed(*args, **kwargs):
        if not (_folder / "on").exists():
            return function(*args, **kwargs)
        started = clock()
        try:
            return function(*args, **kwargs)
        finally:
            took = clock() - started
            entry = _spent.setdefault(name, [0.0, 0])
            entry[0] += took
            entry[1] += 1
            worst = _spent.setdefault(f"{name} longest (ms)", [0.0, 0])
            worst[0] = max(worst[0], took)

    return timed


_gc_started = [0.0]


def _gc_timer(phase, info):
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    elif (_folder / "on").exists():
        entry = _spent.setdefault(f"gc generation {info['generation']} (wall)", [0.0, 0])
        pause = time.perf_counter() - _gc_started[0]
        entry[0] += pause
        entry[1] += 1
        worst = _spent.setdefault(f"gc generation {info['generation']} (wall) longest (ms)", [0.0, 0])
        worst[0] = max(worst[0], pause)


def post_worker_init(worker):
    import gc
    import importlib

    _run_deployed("post_worker_init", worker)

    gc.callbacks.append(_gc_timer)

    for spec in os.environ.get("COMPACTOR_PROFILE_FUNCS", "").split():
        parts = spec.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                owner = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for name in parts[cut:-1]:
                owner = getattr(owner, name)
            setattr(owner, parts[-1], _timed(spec, getattr(owner, parts[-1])))
            break


_previous_exit = worker_exit


def worker_exit(server, worker):  # noqa: F811 - adds to the one above
    import json

    _previous_exit(server, worker)
    if _spent:
        (_folder / f"{os.getpid()}.funcs.json").write_text(json.dumps(_spent))
