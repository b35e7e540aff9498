"""Reading /metrics as Prometheus would."""

from __future__ import annotations

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "metrics-token-for-the-tests-0123456789"


def scrape(client: Client | None = None, token: str = TOKEN) -> dict[tuple[str, frozenset], float]:
    """{(sample name, frozenset of label items): value} from GET /metrics."""
    response = (client or Client()).get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    samples: dict[tuple[str, frozenset], float] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    """A sample's value (0 when the series does not exist yet: a counter never incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum over every series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, items), v in samples.items() if n == name and wanted <= set(items))
