from __future__ import annotations

import pytest


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user("root", password="root-password", is_staff=True, is_superuser=True)
