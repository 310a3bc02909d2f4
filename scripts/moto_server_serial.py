#!/usr/bin/env python3
"""moto_server, with DynamoDB requests applied one at a time.

DynamoDB applies a conditional write atomically: of two writers racing on one item, exactly one
wins. moto checks the condition and then writes without a lock, and moto_server serves each
request on its own thread, so two racing `attribute_not_exists` writes can both succeed. The
store conformance suite races writers on purpose (`concurrent_*_one_winner`), so run the
emulator through this wrapper. It takes the same arguments as `moto_server`; only DynamoDB
requests are serialised, other services (SQS long polls) stay concurrent.

    python3 scripts/moto_server_serial.py -H 127.0.0.1 -p 5000
"""

import sys
import threading

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_dynamodb = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


def _serialising_dynamodb(self, environ, start_response):
    # DynamoDB's JSON protocol names the operation in X-Amz-Target: "DynamoDB_20120810.PutItem".
    # The backend runs inside the call, so holding the lock across it covers check and write.
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
        with _dynamodb:
            return _dispatch(self, environ, start_response)
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serialising_dynamodb

if __name__ == "__main__":
    server.main(sys.argv[1:])
