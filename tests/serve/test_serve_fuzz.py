"""``optplan serve`` fuzzed from its own OpenAPI document with schemathesis: for requests generated from
every operation's schema (valid ones, and invalid ones the server must refuse), no answer is a 5xx, and
every answer's status code, Content-Type, headers and body are the ones the document declares.

The default run is small and seeded, so it is deterministic and quick. A longer run, with a fresh seed
each time::

    OPTPLAN_FUZZ_EXAMPLES=500 OPTPLAN_FUZZ_SEED=random pytest tests/serve/test_serve_fuzz.py -p no:cacheprovider

The same server can be fuzzed from outside with the schemathesis CLI::

    optplan serve --port 8686 --max-time-limit 0.2 &
    st run http://127.0.0.1:8686/openapi.json --checks all --exclude-checks positive_data_acceptance \\
        --max-examples 500
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks
from schemathesis.core.result import Err, Ok

from optplan.serve import ENDPOINTS, OptplanServer, ServeConfig, make_server, openapi_document

EXAMPLES = int(os.environ.get("OPTPLAN_FUZZ_EXAMPLES", "8"))
"""Generated requests per operation in the fuzzing phase (the coverage phase adds its own)."""
SEED = os.environ.get("OPTPLAN_FUZZ_SEED", "20251201")
"""A fixed seed keeps the default run deterministic; ``random`` draws one (schemathesis prints it)."""
TIME_LIMIT = 0.05
"""--max-time-limit of the fuzzed server: every generated timeLimitSeconds is capped to it."""

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,  # a request the schema forbids is refused with a 4xx
    checks.unsupported_method,  # any other method on a path is 405 with Allow
]


CONFIG = ServeConfig(port=0, max_time_limit=TIME_LIMIT, queue_timeout=60)
DOCUMENT = openapi_document(CONFIG)
schema = schemathesis.openapi.from_dict(DOCUMENT, config=schemathesis.Config.from_dict({
    **({} if SEED == "random" else {"seed": int(SEED)}),
    "generation": {"max-examples": EXAMPLES, "deterministic": SEED != "random"},
}))
"""Built at collection time (schemathesis' fixture-based loader does not run on pytest 9); the first
test proves it is the document the server serves."""


@pytest.fixture(scope="module")
def served() -> Iterator[OptplanServer]:
    server = make_server(CONFIG)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()
    t.join()


def test_the_fuzzed_document_is_the_served_one_and_valid_openapi(served: OptplanServer) -> None:
    with urllib.request.urlopen(f"{served.url}/openapi.json", timeout=60) as r:
        assert json.load(r) == DOCUMENT
    schema.validate()  # against the OpenAPI 3.1 meta-schema; raises on the first error
    results = list(schema.get_all_operations())
    assert all(isinstance(r, Ok) for r in results), [r.err() for r in results if isinstance(r, Err)]
    fuzzed = {r.ok().path for r in results if isinstance(r, Ok)}
    assert fuzzed == set(ENDPOINTS) == set(DOCUMENT["paths"])


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_the_server_keeps_its_openapi_document(case: schemathesis.Case, served: OptplanServer) -> None:
    case.call_and_validate(base_url=served.url, checks=CHECKS, timeout=60)


def _planning_requests() -> list[tuple[str, dict[str, Any]]]:
    """Requests that plan (random ones are refused, 400, before a planner runs): their 200 answers are
    checked against the document too."""
    from tests.serve.test_serve import PLACE_DEMO, PLACE_JOBS, RELOCATION, SEED, _cluster, _docs, _execute_run

    cluster = [*_cluster(6, 4, None), _execute_run()]
    return [
        ("/v1/repack/plan", {"objects": _docs(SEED), "solver": "greedy"}),
        ("/v1/repack/plan", {"objects": _docs(SEED), "solver": "cpsat", "timeLimitSeconds": 5,
                             "weights": {"movedPods": 1e6, "affectedCards": 1e-6}}),
        ("/v1/place", {"objects": _docs(PLACE_DEMO), "jobs": _docs(PLACE_JOBS), "solver": "greedy",
                       "now": "2025-06-01T12:00:00Z"}),
        ("/v1/execute/nominate", {"objects": cluster, "run": "exec", "relocation": RELOCATION, "replacement": "p"}),
        ("/v1/execute/verify", {"objects": _cluster(6, 4, "c"), "run": _execute_run()}),
    ]


@pytest.mark.parametrize(("path", "body"), _planning_requests(), ids=lambda v: v if isinstance(v, str) else "")
def test_planning_answers_keep_the_document(served: OptplanServer, path: str, body: dict[str, Any]) -> None:
    case = schema[path]["POST"].Case(body=body, media_type="application/json")
    response = case.call_and_validate(base_url=served.url, checks=CHECKS, timeout=60)
    assert response.status_code == 200, response.text
