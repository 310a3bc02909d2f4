"""The roles may call every DynamoDB operation the code makes.

The Lambdas' DynamoDB access is all in shared/store-dynamodb. This reads its sources for the
operations they call (client calls, and the Put/Update/Delete/ConditionCheck pieces of
transactions, which IAM authorises as the item actions), and checks that every role with a
`Table` statement in template.yaml allows each of them (compare.py holds the CDK stack to the
same statements). moto checks no IAM, so without this an operation the roles lack passes every
test and fails on AWS: the worker's BatchGetItem did, from 98db9d6 until this check.

Run from infra/: python -m unittest test_iam_covers_code.py (infra/check runs it)."""

import copy
import os
import re
import unittest

import compare

HERE = os.path.dirname(os.path.abspath(__file__))
STORE = os.path.join(HERE, "..", "shared", "store-dynamodb", "src")

# Table setup for local runs and tests (`create_table`); the stacks create the table instead.
NOT_RUN_BY_LAMBDAS = {"table.rs"}

CALLS = {
    "get_item": "dynamodb:GetItem",
    "put_item": "dynamodb:PutItem",
    "update_item": "dynamodb:UpdateItem",
    "delete_item": "dynamodb:DeleteItem",
    "query": "dynamodb:Query",
    "scan": "dynamodb:Scan",
    "batch_get_item": "dynamodb:BatchGetItem",
    "batch_write_item": "dynamodb:BatchWriteItem",
    "transact_get_items": "dynamodb:GetItem",
    "describe_table": "dynamodb:DescribeTable",
    "update_table": "dynamodb:UpdateTable",
    "update_time_to_live": "dynamodb:UpdateTimeToLive",
    "create_table": "dynamodb:CreateTable",
    "delete_table": "dynamodb:DeleteTable",
    "execute_statement": "dynamodb:PartiQLSelect",
    "batch_execute_statement": "dynamodb:PartiQLSelect",
    "execute_transaction": "dynamodb:PartiQLSelect",
    # TransactWriteItems needs the actions of its pieces, found below.
    "transact_write_items": None,
}
PIECES = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


def needed(src_dir=STORE):
    """IAM actions the store's code calls, each with a file that calls it."""
    found = {}
    for name in sorted(os.listdir(src_dir)):
        if not name.endswith(".rs") or name in NOT_RUN_BY_LAMBDAS:
            continue
        with open(os.path.join(src_dir, name)) as f:
            text = f.read()
        for call in re.findall(r"\.([a-z_]+)\(\)", text):
            if CALLS.get(call):
                found.setdefault(CALLS[call], name)
        for piece in re.findall(r"\b(Put|Update|Delete|ConditionCheck)::builder\(\)", text):
            found.setdefault(PIECES[piece], name)
    return found


def table_actions(resources):
    """Per role: the actions of its `Table` statement."""
    out = {}
    for logical_id, r in resources.items():
        if r["Type"] != "AWS::IAM::Role":
            continue
        for policy in r["Properties"].get("Policies", []):
            for st in policy["PolicyDocument"]["Statement"]:
                if st.get("Sid") == "Table":
                    actions = st["Action"]
                    out[logical_id] = set([actions] if isinstance(actions, str) else actions)
    return out


def missing(resources, src_dir=STORE):
    """(role, action, a file that calls it) for each action a role lacks."""
    need = needed(src_dir)
    return sorted(
        (role, action, need[action])
        for role, allowed in table_actions(resources).items()
        for action in need
        if action not in allowed
    )


class IamCoversCodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.resources = compare.expand_sam(os.path.join(HERE, "template.yaml"))["Resources"]

    def test_the_store_calls_what_it_is_known_to_call(self):
        # If this fails, the scan above stopped seeing the code (a rename, a move).
        need = needed()
        for action in ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
                       "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]:
            self.assertIn(action, need)

    def test_both_roles_with_the_table_allow_every_operation_the_code_makes(self):
        roles = table_actions(self.resources)
        self.assertEqual(sorted(roles), ["WebRole", "WorkerRole"])
        self.assertEqual(missing(self.resources), [])

    def test_a_role_without_an_operation_is_caught(self):
        resources = copy.deepcopy(self.resources)
        for r in resources.values():
            for policy in r["Properties"].get("Policies", []) if r["Type"] == "AWS::IAM::Role" else []:
                for st in policy["PolicyDocument"]["Statement"]:
                    if st.get("Sid") == "Table":
                        st["Action"] = [a for a in st["Action"] if a != "dynamodb:BatchGetItem"]
        gaps = missing(resources)
        self.assertEqual([(role, action) for role, action, _ in gaps],
                         [("WebRole", "dynamodb:BatchGetItem"), ("WorkerRole", "dynamodb:BatchGetItem")])


if __name__ == "__main__":
    unittest.main()
