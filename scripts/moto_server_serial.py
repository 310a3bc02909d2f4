#!/usr/bin/env python3
"""moto_server, with DynamoDB requests applied one at a time.

DynamoDB applies a conditional write atomically: of two writers racing on one item, exactly one
wins. moto checks the condition and then writes without a lock, and moto_server serves each
request on its own thread, so two racing `attribute_not_exists` writes can both succeed. The
store conformance suite races writers on purpose (`concurrent_*_one_winner`), so run the
emulator through this wrapper. It takes the same arguments as `moto_server`; only DynamoDB
requests are serialised, other services (SQS long polls) stay concurrent.

It also gives TransactWriteItems DynamoDB's idempotency, which moto lacks: a request carrying a
ClientRequestToken already seen in the last 10 minutes is not applied again; the same request
gets the first one's answer, a different one IdempotentParameterMismatchException. The SDK sends
one token for all the retries of a call, so a retry after a lost answer (the write went
through, its response did not) applies the write once, as on DynamoDB.

    python3 scripts/moto_server_serial.py -H 127.0.0.1 -p 5000
"""

import io
import json
import sys
import threading
import time

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_dynamodb = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


# ClientRequestToken -> (request body, time seen, status, headers, answer body).
_tokens = {}
_TOKEN_KEPT_S = 600


def _idempotent_transaction(self, environ, start_response):
    """A TransactWriteItems call, applied at most once per ClientRequestToken (lock held)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(body)
    try:
        token = json.loads(body).get("ClientRequestToken")
    except (ValueError, AttributeError):
        token = None
    now = time.monotonic()
    for old in [t for t, seen in _tokens.items() if now - seen[1] > _TOKEN_KEPT_S]:
        del _tokens[old]
    if token in _tokens:
        first_body, _, status, headers, answer = _tokens[token]
        if first_body != body:
            status = "400 Bad Request"
            headers = [("Content-Type", "application/x-amz-json-1.0")]
            answer = json.dumps({
                "__type": "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
                "message": "The request uses the same client token as a previous, but non-identical request.",
            }).encode()
        start_response(status, headers)
        return [answer]
    answered = {}

    def keep_start(status, headers, exc_info=None):
        answered["status"], answered["headers"] = status, headers
        return start_response(status, headers, exc_info)

    answered_body = _dispatch(self, environ, keep_start)
    try:
        answer = b"".join(answered_body)
    finally:
        if hasattr(answered_body, "close"):
            answered_body.close()
    if token and answered.get("status", "").startswith("200"):
        _tokens[token] = (body, now, answered["status"], answered["headers"], answer)
    return [answer]


def _serialising_dynamodb(self, environ, start_response):
    # DynamoDB's JSON protocol names the operation in X-Amz-Target: "DynamoDB_20120810.PutItem".
    # The backend runs inside the call, so holding the lock across it covers check and write.
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target.startswith("DynamoDB_"):
        with _dynamodb:
            if target.endswith(".TransactWriteItems"):
                return _idempotent_transaction(self, environ, start_response)
            return _dispatch(self, environ, start_response)
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serialising_dynamodb

if __name__ == "__main__":
    server.main(sys.argv[1:])
