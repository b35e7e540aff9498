"""Settings for bench/api_load.py only: the project's, plus the one-row floor endpoint's URLconf."""

from project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.api_load_urls"
