"""The worker's receive count is the queue's.

The worker tells the user and closes the turn on the receive it takes for the last
(`WorkerOptions::max_receives`, functions/worker/src/lib.rs) before SQS moves the job to the
dead letters (`maxReceiveCount` of the turn queue's redrive policy). Raised on one side only,
users would be told their message failed while SQS still had tries left (the tries then running
a closed turn), or never told at all. The CDK stack is held to the template by compare.py.

Run from infra/: python -m unittest test_receives_match.py (infra/check runs it)."""

import os
import re
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def read(*path):
    with open(os.path.join(HERE, *path)) as f:
        return f.read()


class ReceivesMatch(unittest.TestCase):
    def test_the_worker_gives_up_on_the_queues_last_receive(self):
        template = re.findall(r"maxReceiveCount:\s*(\d+)", read("template.yaml"))
        self.assertEqual(len(set(template)), 1, template)
        worker = re.findall(
            r"max_receives:\s*(\d+),", read("..", "functions", "worker", "src", "lib.rs")
        )
        self.assertEqual(len(worker), 1, worker)
        self.assertEqual(worker[0], template[0])


if __name__ == "__main__":
    unittest.main()
