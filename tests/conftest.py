from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from sessions.models import ApiKey
from tests import corpus


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # First, before an empty parameter set's own skip: the corpus's absence says why.
    corpus.require(item)


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("mallory", password="mallory-password")


@pytest.fixture
def api_key(user) -> str:
    _, key = ApiKey.objects.create_key(owner=user, name="test")
    return key


@pytest.fixture
def api(api_key) -> APIClient:
    """A client authenticated as `user` with a Bearer API key."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return client


@pytest.fixture
def other_api(other_user) -> APIClient:
    _, key = ApiKey.objects.create_key(owner=other_user, name="other")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture(autouse=True)
def _empty_cache():
    """Login and API throttle counters live in the cache: each test starts with none."""
    from django.core.cache import cache

    cache.clear()
    yield
